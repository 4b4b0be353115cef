"""librdkafka clients of a configured cluster, and what their errors mean.

Every client reads by offset with read_committed: aborted transactions' records and control
records are never delivered, and their offsets stay gaps, as in Kafka's own log. Errors name the
cluster by its name and bootstrap servers; a cluster's properties (which may hold SASL or SSL
secrets) are never formatted into a message.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from lakecleaner.config.kafka import KafkaCluster
from lakecleaner.errors import ConfigError, KafkaAccessDenied, KafkaUnavailable

log = logging.getLogger(__name__)

#: How long a metadata, watermark or offsets request may take before the cluster counts as not answering.
REQUEST_TIMEOUT_S = 10.0
#: Errors no retry mends, by what the user checks: the client's credentials (SASL), its TLS set-up,
#: or its rights (ACLs). A broker that is down, restarting, or moving a partition's leadership gives
#: errors librdkafka retries on its own.
_CREDENTIALS = frozenset({KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED})
_TLS = frozenset({KafkaError._SSL})
_RIGHTS = frozenset(
    {
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
    }
)
_PERMANENT = _CREDENTIALS | _TLS | _RIGHTS


def consumer(cluster: KafkaCluster, purpose: str, on_error: Callable[[Any], None] | None = None) -> Any:
    """A consumer that is assigned partitions and offsets (no group membership, nothing committed);
    `on_error` gets the errors librdkafka reports for the client as a whole (a broker refusing
    connections, a login refused), which it otherwise only logs."""

    callbacks: dict[str, Any] = {} if on_error is None else {"error_cb": on_error}
    settings = {
        **callbacks,
        **cluster.properties,
        "group.id": f"lakecleaner-{purpose}",  # never joined nor committed: assign() only
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "isolation.level": "read_committed",
        "enable.partition.eof": True,
        # an offset Kafka deleted under the reader is an event it reports, never a silent jump
        "auto.offset.reset": "error",
        "socket.timeout.ms": int(REQUEST_TIMEOUT_S * 1000),
    }
    return _made(cluster, lambda: Consumer(settings, logger=_QUIET))


def admin(cluster: KafkaCluster, on_error: Callable[[Any], None] | None = None) -> Any:
    """An AdminClient of the cluster; `on_error` as for `consumer`."""

    callbacks: dict[str, Any] = {} if on_error is None else {"error_cb": on_error}
    settings = {**callbacks, **cluster.properties, "socket.timeout.ms": int(REQUEST_TIMEOUT_S * 1000)}
    return _made(cluster, lambda: AdminClient(settings, logger=_QUIET))


def _made(cluster: KafkaCluster, make: Callable[[], T]) -> T:
    """A client of the cluster; ConfigError naming the cluster's section when librdkafka refuses its
    properties (a value out of range, two that disagree)."""
    try:
        return make()
    except KafkaException as exc:
        reason = scrubbed(cluster, _error_of(exc).str())
        raise ConfigError(
            [f"kafka.clusters.{cluster.name}: librdkafka refuses its client properties: {reason}"]
        ) from None


def retried(error: Any) -> bool:
    """Whether a consumer's error is one librdkafka retries (a broker down or restarting, a
    leader moving, a request timing out), so the caller waits; not a fatal error nor one of
    the client's credentials or rights."""
    return not error.fatal() and error.code() not in _PERMANENT


def denied(error: Any) -> bool:
    """Whether an error is the cluster refusing the client's credentials, TLS or rights."""
    return bool(error.code() in _PERMANENT)


def unavailable(cluster: KafkaCluster, doing: str, cause: BaseException | str) -> KafkaUnavailable:
    """The error of a cluster that did not answer `doing`, naming it and the fix."""
    return KafkaUnavailable(
        f"Kafka cluster {cluster.name} ({cluster.bootstrap_servers}) did not answer {doing}: "
        f"{scrubbed(cluster, _reason(cause))}; check that it runs and that kafka.clusters.{cluster.name} reaches it"
    )


def access_denied(cluster: KafkaCluster, error: Any, what: str = "") -> KafkaAccessDenied:
    """The error of a cluster that refused the client (`error`: a KafkaError whose code is one of
    `_PERMANENT`): what it refused, in its words less any of the cluster's property values, and
    which properties or ACLs to check, by name."""
    code, where = error.code(), f"kafka.clusters.{cluster.name}"
    if code in _CREDENTIALS:
        refused, fix = (
            "lakecleaner's credentials (SASL authentication failed)",
            (f"check security.protocol, sasl.mechanism, sasl.username and sasl.password under {where}"),
        )
    elif code in _TLS:
        refused, fix = "the TLS connection (SSL)", f"check security.protocol and the ssl.* properties under {where}"
    else:
        refused, fix = (
            f"lakecleaner's principal access{what} (ACLs)",
            (
                "grant the principal Describe and Read on the topic (and Describe on its consumer groups) in the "
                "cluster's ACLs"
            ),
        )
    return KafkaAccessDenied(
        f"Kafka cluster {cluster.name} ({cluster.bootstrap_servers}) refused {refused}: "
        f"{scrubbed(cluster, error.str())}; {fix}"
    )


#: Client properties whose values may be shown in a message (an allow-list: any other may be a secret).
_SHOWN_PROPERTIES = frozenset(
    {"bootstrap.servers", "security.protocol", "sasl.mechanism", "sasl.mechanisms", "client.id"}
)


def scrubbed(cluster: KafkaCluster, text: str) -> str:
    """`text` with the value of every property of the cluster not known to be harmless masked: a
    broker's or librdkafka's message may quote what the client sent, and a property may be a secret."""
    for key, value in cluster.properties.items():
        if key not in _SHOWN_PROPERTIES and len(value) >= 4 and value in text:
            text = text.replace(value, "***")
    return text


def _reason(cause: BaseException | str) -> str:
    if isinstance(cause, str):
        return cause
    args = getattr(cause, "args", ())
    error = args[0] if args else cause
    text = error.str() if hasattr(error, "str") else str(error)
    return text or type(cause).__name__


T = TypeVar("T")
#: The first pause between two attempts of a request the cluster did not answer, and the longest.
_FIRST_PAUSE_S, _LONGEST_PAUSE_S = 0.2, 2.0
#: How long the first attempt of a request waits for its answer (each next one waits twice as long,
#: up to REQUEST_TIMEOUT_S): a refused login shows within it, not after the request's whole timeout.
_FIRST_WAIT_S = 1.0


class ClusterErrors:
    """The errors librdkafka reports for a run's clients (their error callback, and a consumer's
    error events), and when they end it.

    An error no retry mends (credentials, TLS, rights, a fatal one) is kept, whenever it comes, and
    ends the run at its next request or poll with `KafkaAccessDenied` (or `KafkaUnavailable`),
    saying so; it is also what a request that failed meanwhile with only "transport failure" really
    met. librdkafka retries the rest (a broker that refuses connections or restarts, a leader
    moving): each kind is logged once per run, and a run waits them out. While the consume loop
    `watching`, after `give_up_s` of errors and no record it asks the cluster once for a watermark:
    an answer means the cluster is back (an idle topic brings no record to say so), no answer ends
    the run with `KafkaUnavailable`.
    """

    def __init__(self, cluster: KafkaCluster, source: str, give_up_s: float) -> None:
        self.cluster, self.source, self.give_up_s = cluster, source, give_up_s
        self.since: float | None = None
        self.last = ""
        self.permanent: Any = None
        self.logged: set[int] = set()
        #: Set when the consume loop starts: a streak of errors counts towards `give_up_s` from then.
        self.watching = False

    def __call__(self, error: Any) -> None:
        self.last = scrubbed(self.cluster, error.str())
        if not retried(error):
            self.permanent = self.permanent or error
            return
        if not self.watching:  # a request that fails meanwhile is retried, and says so (`retrying`)
            return
        self.log_once(error.code(), self.last)
        if self.since is None:
            self.since = time.monotonic()

    def log_once(self, code: int, text: str) -> None:
        """A warning for the first error of its kind in this run (the next ones of it are retried too)."""
        if code in self.logged:
            return
        self.logged.add(code)
        log.warning(
            "Kafka cluster %s: %s; librdkafka retries, the run waits up to %g s",
            self.cluster.name,
            text,
            self.give_up_s,
        )

    def answered(self) -> None:
        """Records (or a partition's end) came: the cluster answers."""
        self.since = None

    def refused(self) -> KafkaUnavailable | None:
        """The error of a kept permanent one: what the cluster refused, or a fatal client error."""
        if self.permanent is None:
            return None
        if denied(self.permanent):
            return access_denied(self.cluster, self.permanent)
        return unavailable(self.cluster, f"requests for {self.source}", self.permanent.str())

    def failed(self, doing: str, cause: BaseException | str) -> KafkaUnavailable:
        """The error that ends a request the cluster did not answer: a kept permanent one when the
        callback told of one (a refused login shows in the request's own error as a transport
        failure), else `unavailable`."""
        return self.refused() or unavailable(self.cluster, doing, cause)

    def retrying(self, doing: str, client: Any, request: Callable[[float], T], give_up_at: float) -> T:
        """`request(timeout)` of `client`, asked again after errors librdkafka counts as passing
        (each kind logged once) until `give_up_at` (time.monotonic()); then, or at an error no retry
        mends, the error that ends the run. The first attempt waits `_FIRST_WAIT_S` for its answer,
        each next one twice as long, within the time left and REQUEST_TIMEOUT_S. After a failed
        attempt the client's callbacks are served, so that what it reported meanwhile (a login
        refused) is known."""
        pause, wait = _FIRST_PAUSE_S, _FIRST_WAIT_S
        while True:
            try:
                return request(min(wait, REQUEST_TIMEOUT_S, max(_FIRST_WAIT_S, give_up_at - time.monotonic())))
            except (KafkaException, TimeoutError) as exc:
                client.poll(0)
                error = _error_of(exc)
                if not retried(error):
                    self.permanent = self.permanent or error
                refused = self.refused()
                if refused is not None:
                    raise refused from None
                if time.monotonic() + pause >= give_up_at:
                    raise unavailable(self.cluster, doing, exc) from None
                self.log_once(error.code(), scrubbed(self.cluster, error.str()))
                time.sleep(pause)
                pause, wait = min(pause * 2, _LONGEST_PAUSE_S), wait * 2

    def give_up_if_stalled(self, client: Any, probe: TopicPartition) -> None:
        """End the run on an error no retry mends, or after `give_up_s` of errors when the
        cluster does not answer a watermark request for `probe` either."""
        refused = self.refused()
        if refused is not None:
            raise refused
        if self.since is None or time.monotonic() - self.since < self.give_up_s:
            return
        try:
            client.get_watermark_offsets(probe, timeout=REQUEST_TIMEOUT_S)
        except KafkaException:
            raise unavailable(
                self.cluster, f"fetches of {self.source} for {self.give_up_s:g} s", f"last error: {self.last}"
            ) from None
        log.warning("Kafka cluster %s answers again", self.cluster.name)
        self.since = None


def _error_of(exc: BaseException) -> Any:
    """The KafkaError a request failed with (a future's own timeout: librdkafka's timed out)."""
    found = exc.args[0] if exc.args else None
    return found if isinstance(found, KafkaError) else KafkaError(KafkaError._TIMED_OUT)


class _Quiet:
    """librdkafka's log lines go to Python's logging at debug level: a broker that is down is
    one clear error from the command, not a page of retries on stderr."""

    def __init__(self) -> None:
        self._log = logging.getLogger("lakecleaner.kafka.librdkafka")

    def log(self, level: int, msg: str, *args: object) -> None:
        self._log.debug(msg, *args)


_QUIET = _Quiet()
