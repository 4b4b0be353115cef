"""A real one-node Apache Kafka broker (KRaft) for the end-to-end Kafka tests.

Its jars come from Maven Central (org.apache.kafka:kafka_2.13 and its runtime dependencies,
`tests/support/maven.py`); the broker is formatted with `kafka.tools.StorageTool` and run with
`kafka.Kafka` as broker and controller on two free loopback ports. The broker's own cleaner
runs every half second, so a compacted topic gets gaps in its offsets within a test.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import yaml
from confluent_kafka.admin import AdminClient

from tests.support.local_airflow import free_port
from tests.support.maven import fetched_jars

KAFKA_VERSION = "4.1.1"
#: The broker and its runtime dependencies; log4j's SLF4J binding keeps its logging in one place.
ARTIFACTS = (f"org.apache.kafka:kafka_2.13:{KAFKA_VERSION}", "org.apache.logging.log4j:log4j-slf4j2-impl:2.24.3")


def broker_jars() -> Path:
    """The folder of the broker's jars, fetched with Maven the first time."""
    return fetched_jars(f"kafka-{KAFKA_VERSION}", ARTIFACTS)


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


class KafkaBroker:
    """A running one-node broker; `bootstrap` is its PLAINTEXT listener, `sasl_bootstrap` a
    SASL_PLAINTEXT one that takes `SASL_USER` with `SASL_PASSWORD` (SASL/PLAIN)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        lib = broker_jars()
        port, sasl, controller = free_port(), free_port(), free_port()
        self.bootstrap = f"127.0.0.1:{port}"
        self.sasl_bootstrap = f"127.0.0.1:{sasl}"
        properties = folder / "server.properties"
        properties.write_text(
            "\n".join(
                [
                    "process.roles=broker,controller",
                    "node.id=1",
                    f"controller.quorum.voters=1@127.0.0.1:{controller}",
                    f"listeners=PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl},"
                    f"CONTROLLER://127.0.0.1:{controller}",
                    f"advertised.listeners=PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl}",
                    "controller.listener.names=CONTROLLER",
                    "inter.broker.listener.name=PLAINTEXT",
                    "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
                    "sasl.enabled.mechanisms=PLAIN",
                    "listener.name.sasl_plaintext.plain.sasl.jaas.config="
                    "org.apache.kafka.common.security.plain.PlainLoginModule required "
                    f'user_{SASL_USER}="{SASL_PASSWORD}";',
                    f"log.dirs={folder / 'data'}",
                    "offsets.topic.replication.factor=1",
                    "offsets.topic.num.partitions=1",
                    "transaction.state.log.replication.factor=1",
                    "transaction.state.log.min.isr=1",
                    "transaction.state.log.num.partitions=1",
                    "group.initial.rebalance.delay.ms=0",
                    "log.cleaner.backoff.ms=500",
                    "auto.create.topics.enable=false",
                    # a broker killed (`stop(crash=True)`) registers again once its lease ends
                    "broker.session.timeout.ms=2000",
                    "broker.heartbeat.interval.ms=500",
                ]
            )
            + "\n"
        )
        classpath = f"{lib}/*"
        cluster_id = subprocess.run(
            ["java", "-cp", classpath, "kafka.tools.StorageTool", "random-uuid"],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout.split()[-1]
        subprocess.run(
            ["java", "-cp", classpath, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(properties)],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        self._command = ["java", "-Xmx512m", "-cp", classpath, "kafka.Kafka", str(properties)]
        self.start()

    def start(self) -> None:
        """Run the broker; after `stop`, on the same ports and log (a restart as clients see one:
        connections refused, then the same records at the same offsets)."""
        self._log = (self.folder / "broker.log").open("a")
        self.process = subprocess.Popen(self._command, stdout=self._log, stderr=subprocess.STDOUT)
        self._wait_until_ready()

    def _wait_until_ready(self, timeout_s: float = 90) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the Kafka broker exited: {(self.folder / 'broker.log').read_text()[-3000:]}")
            try:
                admin.list_topics(timeout=2)
                return
            except Exception:  # not answering yet
                time.sleep(0.5)
        raise TimeoutError(f"the Kafka broker at {self.bootstrap} did not answer within {timeout_s} s")

    def stop(self, crash: bool = False) -> None:
        """Stop the broker: gracefully (SIGTERM; it serves fetches for seconds while it shuts
        down) or, with `crash`, at once (SIGKILL), as a machine lost for good."""
        if crash:
            self.process.kill()
        else:
            self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)
        self._log.close()
