"""librdkafka clients of a configured cluster, and what their errors mean.

Every client reads by offset with read_committed: aborted transactions' records and control
records are never delivered, and their offsets stay gaps, as in Kafka's own log. Errors name the
cluster by its name and bootstrap servers; a cluster's properties (which may hold SASL or SSL
secrets) are never formatted into a message.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaError
from confluent_kafka.admin import AdminClient

from lakecleaner.config.kafka import KafkaCluster
from lakecleaner.errors import KafkaUnavailable

#: How long a metadata, watermark or offsets request may take before the cluster counts as not answering.
REQUEST_TIMEOUT_S = 10.0
#: Errors no retry mends: the client's credentials or rights (a broker that is down, restarting,
#: or moving a partition's leadership gives errors librdkafka retries on its own).
_PERMANENT = frozenset(
    {
        KafkaError._AUTHENTICATION,
        KafkaError.SASL_AUTHENTICATION_FAILED,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
    }
)


def consumer(cluster: KafkaCluster, purpose: str, on_error: Callable[[Any], None] | None = None) -> Any:
    """A consumer that is assigned partitions and offsets (no group membership, nothing committed);
    `on_error` gets the errors librdkafka reports for the client as a whole (a broker refusing
    connections, a login refused), which it otherwise only logs."""

    callbacks = {} if on_error is None else {"error_cb": on_error}
    return Consumer(
        {
            **callbacks,
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


def retried(error: Any) -> bool:
    """Whether a consumer's error is one librdkafka retries (a broker down or restarting, a
    leader moving, a request timing out), so the caller waits; not a fatal error nor one of
    the client's credentials or rights."""
    return not error.fatal() and error.code() not in _PERMANENT


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
