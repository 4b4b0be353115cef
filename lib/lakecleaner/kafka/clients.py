"""librdkafka clients of a configured cluster, and what their errors mean.

Every client reads by offset with read_committed: aborted transactions' records and control
records are never delivered, and their offsets stay gaps, as in Kafka's own log. Errors name the
cluster by its name and bootstrap servers; a cluster's properties (which may hold SASL or SSL
secrets) are never formatted into a message.
"""

from __future__ import annotations

import logging
from typing import Any

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient

from lakecleaner.config.kafka import KafkaCluster
from lakecleaner.errors import KafkaUnavailable

#: How long a metadata, watermark or offsets request may take before the cluster counts as not answering.
REQUEST_TIMEOUT_S = 10.0


def consumer(cluster: KafkaCluster, purpose: str) -> Any:
    """A consumer that is assigned partitions and offsets (no group membership, nothing committed)."""

    return Consumer(
        {
            **cluster.properties,
            "group.id": f"lakecleaner-{purpose}",  # never joined nor committed: assign() only
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "socket.timeout.ms": int(REQUEST_TIMEOUT_S * 1000),
        },
        logger=_QUIET,
    )


def admin(cluster: KafkaCluster) -> Any:
    """An AdminClient of the cluster."""

    return AdminClient({**cluster.properties, "socket.timeout.ms": int(REQUEST_TIMEOUT_S * 1000)}, logger=_QUIET)


def unavailable(cluster: KafkaCluster, doing: str, cause: BaseException | str) -> KafkaUnavailable:
    """The error of a cluster that did not answer `doing`, naming it and the fix."""
    return KafkaUnavailable(
        f"Kafka cluster {cluster.name} ({cluster.bootstrap_servers}) did not answer {doing}: {_reason(cause)}; "
        f"check that it runs and that kafka.clusters.{cluster.name} reaches it"
    )


def _reason(cause: BaseException | str) -> str:
    if isinstance(cause, str):
        return cause
    args = getattr(cause, "args", ())
    error = args[0] if args else cause
    text = error.str() if hasattr(error, "str") else str(error)
    return text or type(cause).__name__


class _Quiet:
    """librdkafka's log lines go to Python's logging at debug level: a broker that is down is
    one clear error from the command, not a page of retries on stderr."""

    def __init__(self) -> None:
        self._log = logging.getLogger("lakecleaner.kafka.librdkafka")

    def log(self, level: int, msg: str, *args: object) -> None:
        self._log.debug(msg, *args)


_QUIET = _Quiet()
