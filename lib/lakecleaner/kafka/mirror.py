"""Mirror a Kafka topic into the lake at its own offsets (`lakecleaner mirror`, issue 47).

Each partition's records are appended as Kafka holds them, byte for byte: key, value (a null
value stays null: a tombstone), headers in order, timestamp, offset. Offsets Kafka no longer has
(compacted away, aborted transactions, control records; read_committed) stay gaps, as followers
append (`PartitionLog.append(offsets=)`, Kafka's `UnifiedLog.appendAsFollower`).

The resume point is the lake's own log end per partition: no consumer group is needed, and each
append is one commit, so a process killed at any moment and run again leaves every record once,
with no gap Kafka does not have. Records are buffered per partition up to `batch_bytes` or
`linger_ms`, so memory stays bounded whatever the topic's size.

The lake topic is created from the Kafka topic's partition count and cleanup.policy when it does
not exist; partitions Kafka added are added to the lake topic; a Kafka topic with fewer
partitions than the lake's, or one whose log ends before the lake's (recreated, truncated), is
`MirrorMismatch` and nothing is written.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from itertools import groupby, repeat
from operator import is_not
from typing import Any

import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition
from confluent_kafka.admin import ConfigResource, ResourceType  # type: ignore[attr-defined]

from lakecleaner.config.kafka import KafkaCluster, MirrorSpec
from lakecleaner.errors import KafkaUnavailable, LakeCleanerError, MirrorMismatch, TopicNotFound
from lakecleaner.kafka.clients import REQUEST_TIMEOUT_S, admin, consumer, retried, unavailable
from lakecleaner.lake import Lake, Topic
from lakecleaner.log.records import HEADER_TYPE

log = logging.getLogger(__name__)

#: Buffered bytes (keys, values, headers) per partition before an append.
DEFAULT_BATCH_BYTES = 16 * 1024 * 1024
#: How long a partition's first buffered record may wait for an append.
DEFAULT_LINGER_MS = 1000
#: The headers of a record without any (shared: never changed).
_NO_HEADERS: list[tuple[str, bytes | None]] = []
#: librdkafka's Message accessors, for `map` over a poll's messages (typed loosely: a message's
#: offset and partition are None only on error events, which are taken apart first).
_ERROR: Any = Message.error
_PARTITION: Any = Message.partition
_OFFSET: Any = Message.offset
_KEY: Any = Message.key
_VALUE: Any = Message.value
_HEADERS: Any = Message.headers
_TIMESTAMP: Any = Message.timestamp
#: How long DescribeConfigs may take (a cluster that cannot answer it, such as librdkafka's mock).
_DESCRIBE_TIMEOUT_S = 5.0
#: Messages asked of librdkafka per poll.
_POLL_MESSAGES = 10_000
#: How long a run waits out errors librdkafka retries (a broker restarting) before it ends
#: with `KafkaUnavailable`.
DEFAULT_GIVE_UP_S = 60.0


@dataclass
class PartitionProgress:
    """One partition's mirror: where it started and ended, and what it appended."""

    partition: int
    start_offset: int
    next_offset: int
    high_watermark: int
    records: int = 0
    bytes: int = 0

    @property
    def lag(self) -> int:
        """Records behind the cluster's high watermark as last seen (Kafka's consumer lag)."""
        return max(0, self.high_watermark - self.next_offset)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "lag": self.lag}


@dataclass
class MirrorReport:
    """What one `mirror` run did; `stopped`: why it ended (caught up, max seconds, max records,
    signal)."""

    topic: str
    cluster: str
    source_topic: str
    created: bool
    added_partitions: int
    stopped: str
    partitions: list[PartitionProgress] = field(default_factory=list)

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions)

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "cluster": self.cluster,
            "source_topic": self.source_topic,
            "created": self.created,
            "added_partitions": self.added_partitions,
            "stopped": self.stopped,
            "records": self.records,
            "partitions": [p.to_dict() for p in self.partitions],
        }


@dataclass(frozen=True)
class MirrorLimits:
    """When a run ends: `once` at the high watermarks seen at its start; else at `max_seconds`,
    `max_records`, or when `stop` is set (SIGTERM); with `KafkaUnavailable` after `give_up_s`
    of errors and no record. `batch_bytes` and `linger_ms` bound a partition's buffer."""

    once: bool = False
    max_seconds: float | None = None
    max_records: int | None = None
    batch_bytes: int = DEFAULT_BATCH_BYTES
    linger_ms: int = DEFAULT_LINGER_MS
    give_up_s: float = DEFAULT_GIVE_UP_S


def mirror_source(lake: Lake, name: str) -> tuple[MirrorSpec, KafkaCluster]:
    """The topic's `mirror:` and its cluster; an error naming the config key when it has none."""
    spec = lake.config.topics.get(name)
    if spec is None or spec.mirror is None:
        raise LakeCleanerError(
            f"topic {name} has no mirror source: add `mirror: {{cluster: <name>}}` under topics.{name} in "
            f"{lake.config.source} (and the cluster under kafka.clusters)"
        )
    return spec.mirror, lake.config.kafka_clusters[spec.mirror.cluster]


def mirror_topic(
    lake: Lake,
    name: str,
    limits: MirrorLimits,
    *,
    stop: threading.Event | None = None,
    on_append: Callable[[PartitionProgress], None] | None = None,
) -> MirrorReport:
    """Mirror the lake topic `name` from its configured Kafka topic until `limits` end the run;
    what was buffered is appended before it returns (also when `stop` is set)."""
    source, cluster = mirror_source(lake, name)
    errors = _ClusterErrors(cluster, source.topic, limits.give_up_s)
    client = consumer(cluster, f"mirror-{name}", on_error=errors)
    try:
        count = _partition_count(client, cluster, source.topic)
        topic, created, added = _lake_topic(lake, name, count, cluster, source.topic)
        progress = _starting_points(client, cluster, source.topic, topic)
        run = _Run(topic, source.topic, progress, limits, stop or threading.Event(), on_append)
        stopped = run.consume(client, errors)
    finally:
        client.close()
    return MirrorReport(name, cluster.name, source.topic, created, added, stopped, list(progress.values()))


def _partition_count(client: Any, cluster: KafkaCluster, source: str) -> int:

    try:
        metadata = client.list_topics(source, timeout=REQUEST_TIMEOUT_S)
    except KafkaException as exc:
        raise unavailable(cluster, f"a metadata request for topic {source}", exc) from None
    found = metadata.topics.get(source)
    if found is None or found.error is not None or not found.partitions:
        reason = found.error.str() if found is not None and found.error is not None else "no such topic"
        raise TopicNotFound(f"Kafka cluster {cluster.name} has no topic {source} ({reason}); check mirror.topic")
    return len(found.partitions)


def _kafka_cleanup_policy(cluster: KafkaCluster, source: str) -> str | None:
    """The Kafka topic's cleanup.policy (DescribeConfigs), or None when the cluster does not say
    within `_DESCRIBE_TIMEOUT_S` (then the lake topic takes the config file's, and a warning says so)."""
    resource = ConfigResource(ResourceType.TOPIC, source)
    try:
        client = admin(cluster)  # kept until the answer came: a collected client drops its requests
        described = client.describe_configs([resource], request_timeout=_DESCRIBE_TIMEOUT_S)
        entries = described[resource].result(timeout=_DESCRIBE_TIMEOUT_S)
    except (KafkaException, KeyError, TimeoutError) as exc:
        log.warning(
            "Kafka cluster %s did not say topic %s's cleanup.policy (%s): the lake topic takes the config file's",
            cluster.name,
            source,
            type(exc).__name__,
        )
        return None
    entry = entries.get("cleanup.policy")
    return None if entry is None or entry.value is None else str(entry.value)


def _lake_topic(lake: Lake, name: str, count: int, cluster: KafkaCluster, source: str) -> tuple[Topic, bool, int]:
    """The lake topic, created like the Kafka topic (partition count, cleanup.policy unless the
    config file sets one) or grown to its partition count; (topic, created, partitions added)."""
    try:
        topic = lake.topic(name)
    except TopicNotFound:
        spec = lake.config.topics.get(name)
        overrides: dict[str, object] = {}
        if not (spec and "cleanup.policy" in spec.overrides):  # the file's wins: Kafka is not asked
            policy = _kafka_cleanup_policy(cluster, source)
            if policy:
                overrides["cleanup.policy"] = policy
        return lake.create_topic(name, count, overrides, exist_ok=True), True, count
    if count < topic.partitions:
        raise MirrorMismatch(
            f"Kafka topic {source} on {cluster.name} has {count} partitions but lake topic {name} has "
            f"{topic.partitions}: Kafka never removes partitions, so this is another topic; nothing was written"
        )
    if count > topic.partitions:
        return lake.add_partitions(name, count), False, count - topic.partitions
    return topic, False, 0


def _starting_points(client: Any, cluster: KafkaCluster, source: str, topic: Topic) -> dict[int, PartitionProgress]:
    """Each partition's resume point (the lake's log end, or Kafka's log start if that is later:
    records Kafka deleted are gone from both) and the high watermark it reads up to."""

    manifests = topic.manifests()
    out: dict[int, PartitionProgress] = {}
    for p in range(topic.partitions):
        try:
            low, high = client.get_watermark_offsets(TopicPartition(source, p), timeout=REQUEST_TIMEOUT_S)
        except KafkaException as exc:
            raise unavailable(cluster, f"a watermark request for {source}-{p}", exc) from None
        lake_end = manifests[p].next_offset
        if lake_end > high:
            raise MirrorMismatch(
                f"lake partition {topic.name}-{p} ends at offset {lake_end} but Kafka's {source}-{p} ends at {high}: "
                "the Kafka topic was recreated or truncated; nothing was written (mirror it into a new lake topic)"
            )
        start = max(lake_end, low)
        out[p] = PartitionProgress(p, start, start, high)
    return out


class _ClusterErrors:
    """The errors of a run's consumer (librdkafka's error callback and error events), and when
    they end it.

    librdkafka retries a broker that refuses connections or restarts, and reports each failed
    attempt; a run waits those out (a warning when a streak starts) and goes on when records come
    again. After `give_up_s` of errors and no record it asks the cluster once for a watermark:
    an answer means the cluster is back (an idle topic brings no record to say so), no answer
    ends the run with `KafkaUnavailable`. An error no retry mends (fatal, credentials, rights)
    ends it at the next poll.
    """

    def __init__(self, cluster: KafkaCluster, source: str, give_up_s: float) -> None:
        self.cluster, self.source, self.give_up_s = cluster, source, give_up_s
        self.since: float | None = None
        self.last = ""
        self.permanent: str | None = None
        #: Before the consume loop, the requests that set a run up report their own errors.
        self.watching = False

    def __call__(self, error: Any) -> None:
        self.last = error.str()
        if not self.watching:
            return
        if not retried(error):
            self.permanent = self.permanent or self.last
        elif self.since is None:
            self.since = time.monotonic()
            log.warning(
                "Kafka cluster %s: %s; librdkafka retries, the mirror waits up to %g s",
                self.cluster.name,
                self.last,
                self.give_up_s,
            )

    def answered(self) -> None:
        """Records (or a partition's end) came: the cluster answers."""
        self.since = None

    def give_up_if_stalled(self, client: Any, probe: TopicPartition) -> None:
        """End the run on an error no retry mends, or after `give_up_s` of errors when the
        cluster does not answer a watermark request for `probe` either."""
        if self.permanent is not None:
            raise unavailable(self.cluster, f"fetches of {self.source}", self.permanent)
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


class _Buffer:
    """A partition's buffered records as the columns of one append: offsets, timestamps, keys,
    values and headers, each taken from librdkafka's messages once.

    The per-record work is what the mirror adds to a bare consumer's, so it is done by `map` over
    librdkafka's `Message` accessors and by comprehensions, not by a Python loop over records; and
    the messages themselves are not kept (a buffer of them would be objects the garbage collector
    walks at each collection)."""

    def __init__(self) -> None:
        self.offsets: list[int] = []
        self.timestamps: list[int | None] = []
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.headers: list[list[tuple[str, bytes | None]] | None] = []
        #: Bytes of keys, values and headers buffered.
        self.size = 0

    def add(self, messages: list[Any], limit: int) -> list[Any]:
        """Buffer messages until the buffer holds `limit` bytes; the ones left over."""
        keys = list(map(_KEY, messages))
        values = list(map(_VALUE, messages))
        headers = list(map(_HEADERS, messages))
        size = _bytes(keys) + _bytes(values) + sum(map(_header_bytes, filter(None, headers)))
        taken = len(messages)
        if self.size + size >= limit:
            taken, size = _cut(keys, values, headers, limit - self.size)
            del keys[taken:], values[taken:], headers[taken:]
        kept = messages[:taken] if taken < len(messages) else messages
        self.offsets += map(_OFFSET, kept)
        self.timestamps += [stamp if kind else None for kind, stamp in map(_TIMESTAMP, kept)]
        self.keys += keys
        self.values += values
        self.headers += headers
        self.size += size
        return messages[taken:]

    def table(self) -> pa.Table:
        """The records as BATCH_SCHEMA columns (a timestamp Kafka does not have becomes the
        append's time; a record without headers has an empty list)."""
        return pa.table(
            {
                "key": pa.array(self.keys, pa.binary()),
                "value": pa.array(self.values, pa.binary()),
                "timestamp": pa.array(self.timestamps, pa.int64()),
                "headers": pa.array([h or _NO_HEADERS for h in self.headers], HEADER_TYPE),
            }
        )


def _bytes(items: list[bytes | None]) -> int:
    return sum(map(len, filter(None, items)))


def _header_bytes(headers: list[tuple[str, bytes | None]]) -> int:
    return sum(len(k) + (len(v) if v else 0) for k, v in headers)


def _cut(keys: list[bytes | None], values: list[bytes | None], headers: list[Any], room: int) -> tuple[int, int]:
    """How many of the records fill `room` bytes (the one that passes it included, so a record
    larger than the batch is buffered alone), and their bytes."""
    size = 0
    for index, (key, value, pairs) in enumerate(zip(keys, values, headers, strict=True)):
        size += (len(key) if key else 0) + (len(value) if value else 0) + (_header_bytes(pairs) if pairs else 0)
        if size >= room:
            return index + 1, size
    return len(keys), size


class _Run:
    """One run's consume loop: per-partition buffers, appended when full, old, or at the end."""

    def __init__(
        self,
        topic: Topic,
        source: str,
        progress: dict[int, PartitionProgress],
        limits: MirrorLimits,
        stop: threading.Event,
        on_append: Callable[[PartitionProgress], None] | None,
    ) -> None:
        self.topic, self.source, self.progress = topic, source, progress
        self.limits, self.stop, self.on_append = limits, stop, on_append
        self.buffers: dict[int, _Buffer] = {p: _Buffer() for p in progress}
        self.first_buffered: dict[int, float] = {}
        self.done: set[int] = set()
        self.taken = 0

    def consume(self, client: Any, errors: _ClusterErrors) -> str:
        """Read until a limit ends the run; the reason."""

        if self.limits.once:
            self.done = {p for p, g in self.progress.items() if g.start_offset >= g.high_watermark}
        pending = [
            TopicPartition(self.source, p, g.start_offset) for p, g in self.progress.items() if p not in self.done
        ]
        if not pending:
            return "caught up"
        client.assign(pending)
        errors.watching = True
        deadline = None if self.limits.max_seconds is None else time.monotonic() + self.limits.max_seconds
        try:
            while True:
                reason = self._ended(deadline)
                if reason:
                    return reason
                self._take(client, errors, client.consume(_POLL_MESSAGES, timeout=0.2))
                errors.give_up_if_stalled(client, pending[0])
                self._flush_due()
        finally:
            for p in self.buffers:
                self._flush(p)

    def _ended(self, deadline: float | None) -> str | None:
        if self.limits.once and len(self.done) == len(self.progress):
            return "caught up"
        if self.limits.max_records is not None and self.taken >= self.limits.max_records:
            return "max records"
        if deadline is not None and time.monotonic() >= deadline:
            return "max seconds"
        return "signal" if self.stop.is_set() else None

    def _take(self, client: Any, errors: _ClusterErrors, messages: list[Any]) -> None:
        """Buffer a poll's messages in order, appending a partition whose buffer is full; an
        error event (a partition's end, an error) is handled where it stands among them."""
        found = list(map(_ERROR, messages))
        start = 0
        if any(map(is_not, found, repeat(None))):  # (KafkaError's == refuses None)
            for index in [i for i, error in enumerate(found) if error is not None]:
                self._buffer_runs(client, errors, messages[start:index])
                if found[index].code() == KafkaError._PARTITION_EOF:
                    errors.answered()
                    self._end_of(messages[index].partition())
                else:
                    errors(found[index])
                start = index + 1
        self._buffer_runs(client, errors, messages[start:] if start else messages)

    def _buffer_runs(self, client: Any, errors: _ClusterErrors, messages: list[Any]) -> None:
        """Buffer records: a poll holds runs of one partition's messages (librdkafka queues a
        fetched batch whole), each buffered at once."""
        if not messages:
            return
        errors.answered()
        for p, run in groupby(messages, key=_PARTITION):
            self._buffer(client, p, list(run))

    def _buffer(self, client: Any, p: int, taken: list[Any]) -> None:
        """Add a partition's polled messages to its buffer, up to --once's high watermark and
        --max-records; append it when full. With --once, a partition whose record just below the
        high watermark is taken is done then, not at its end event, which a broker lost at that
        moment never sends."""
        if p in self.done or not taken:
            return
        if self.limits.once and taken[-1].offset() + 1 >= self.progress[p].high_watermark:
            high = self.progress[p].high_watermark
            taken = [m for m in taken if m.offset() < high]
            self.done.add(p)
            client.pause([TopicPartition(self.source, p)])
        if self.limits.max_records is not None:
            taken = taken[: max(0, self.limits.max_records - self.taken)]
        if not taken:
            return
        self.taken += len(taken)
        self.first_buffered.setdefault(p, time.monotonic())
        while taken:
            taken = self.buffers[p].add(taken, self.limits.batch_bytes)
            if self.buffers[p].size >= self.limits.batch_bytes:
                self._flush(p)

    def _end_of(self, p: int) -> None:
        """A partition's end (librdkafka's partition EOF): append what it holds; with --once it is
        done."""
        self._flush(p)
        if self.limits.once:
            self.done.add(p)

    def _flush_due(self) -> None:
        now = time.monotonic()
        for p, since in list(self.first_buffered.items()):
            if (now - since) * 1000 >= self.limits.linger_ms:
                self._flush(p)

    def _flush(self, p: int) -> None:
        """Append the partition's buffer as one commit at the records' Kafka offsets."""
        batch = self.buffers[p]
        if not batch.offsets:
            return
        offsets = batch.offsets
        self.topic.partition(p).append(batch.table(), offsets=offsets)
        progress = self.progress[p]
        progress.records += len(offsets)
        progress.bytes += batch.size
        progress.next_offset = offsets[-1] + 1
        progress.high_watermark = max(progress.high_watermark, progress.next_offset)
        self.buffers[p] = _Buffer()
        self.first_buffered.pop(p, None)
        if self.on_append is not None:
            self.on_append(progress)


__all__ = [
    "DEFAULT_BATCH_BYTES",
    "DEFAULT_GIVE_UP_S",
    "DEFAULT_LINGER_MS",
    "KafkaUnavailable",
    "MirrorLimits",
    "MirrorReport",
    "PartitionProgress",
    "mirror_source",
    "mirror_topic",
]
