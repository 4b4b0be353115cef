"""The end-to-end Kafka tests' broker (`lakecleaner.dev.kafka_broker`, the one `lakecleaner dev
kafka` runs), with a SASL/PLAIN listener, and the client settings the tests use on it."""

from __future__ import annotations

from pathlib import Path

import yaml

from lakecleaner.dev.kafka_broker import KafkaBroker, SaslUser

#: Client properties for small fetches, so that a client holds few records at any moment (a fetch
#: returns at least one whole batch, KIP-74, however small its limit): a test that acts mid-run
#: (stops the broker, deletes records) then finds most of the topic still to be read.
SMALL_FETCHES = {
    "fetch.max.bytes": 8192,
    "message.max.bytes": 8192,
    "max.partition.fetch.bytes": 4096,
    "queued.max.messages.kbytes": 16,
}
#: Producer settings for small batches, to go with SMALL_FETCHES.
SMALL_BATCHES = {"batch.size": 8192}


def with_small_fetches(config_path: Path, cluster: str = "main") -> Path:
    """The config file at `config_path` with SMALL_FETCHES added to the cluster's properties."""
    config = yaml.safe_load(config_path.read_text())
    config["kafka"]["clusters"][cluster].update(SMALL_FETCHES)
    config_path.write_text(yaml.safe_dump(config))
    return config_path


#: The one user of the broker's SASL_PLAINTEXT listener (SASL/PLAIN), and its password.
SASL_USER, SASL_PASSWORD = "lake", "lake-secret-123"


def sasl_broker(folder: Path) -> KafkaBroker:
    """The tests' broker: on free ports, with a SASL/PLAIN listener taking `SASL_USER`."""
    return KafkaBroker(folder, sasl=SaslUser(SASL_USER, SASL_PASSWORD))
