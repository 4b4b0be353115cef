"""One mirror run's consume loop (`kafka/mirror.py` sets it up): per-partition buffers, appended when
full, old, or at the end, each as one commit at the records' Kafka offsets (+ the history's delta).

Each partition is on its own (item 4 of issue 74): one whose first record differs from the sample
the lake kept, whose records cannot be stored (a record without a key for a compacted lake topic),
or whose log Kafka truncated under it, stops with the reason and the offset, while the others go
on. A partition whose next offset Kafka deleted during the run (retention, DeleteRecords) goes on
from Kafka's log start, and the gap is reported.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from itertools import groupby, repeat
from operator import is_not
from typing import Any

import pyarrow as pa
from confluent_kafka import KafkaError, Message, TopicPartition

from lakecleaner.clock import wall_clock_ms
from lakecleaner.errors import LakeCleanerError
from lakecleaner.io.kafka.clients import ClusterErrors
from lakecleaner.kafka.resume import Gap, PartitionStart, verdict
from lakecleaner.lake import Topic
from lakecleaner.log.records import HEADER_TYPE
from lakecleaner.log.source import MIRROR_WRITER, SAMPLE_PROPERTY, KafkaSource, RecordSample, record_digest

log = logging.getLogger(__name__)

#: Buffered bytes (keys, values, headers) per partition before an append.
DEFAULT_BATCH_BYTES = 16 * 1024 * 1024
#: How long a partition's first buffered record may wait for an append.
DEFAULT_LINGER_MS = 1000
#: How long a run waits out errors librdkafka retries (a broker restarting) before it ends
#: with `KafkaUnavailable`.
DEFAULT_GIVE_UP_S = 60.0
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
#: Messages asked of librdkafka per poll.
_POLL_MESSAGES = 10_000


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

    def give_up_at(self) -> float:
        """When a request the cluster keeps failing stops being asked again (time.monotonic())."""
        budget = self.give_up_s if self.max_seconds is None else min(self.give_up_s, self.max_seconds)
        return time.monotonic() + budget


@dataclass
class PartitionProgress:
    """One partition's mirror: where it started and ended (lake offsets), what it appended, and
    why it stopped when it did not reach the end (`error`)."""

    partition: int
    start_offset: int
    next_offset: int
    high_watermark: int
    records: int = 0
    bytes: int = 0
    error: str | None = None

    @property
    def lag(self) -> int:
        """Records behind the cluster's high watermark as last seen (Kafka's consumer lag)."""
        return max(0, self.high_watermark - self.next_offset)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "status": "failed" if self.error else "mirrored", "lag": self.lag}


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
        #: The leader epoch of the last record buffered (None: unknown).
        self.last_epoch: int | None = None
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
        self.last_epoch = kept[-1].leader_epoch()
        self.size += size
        return messages[taken:]

    def head(self, count: int) -> _Buffer:
        """A buffer of the first `count` records (the last one's epoch unknown)."""
        out = _Buffer()
        out.offsets, out.timestamps = self.offsets[:count], self.timestamps[:count]
        out.keys, out.values, out.headers = self.keys[:count], self.values[:count], self.headers[:count]
        out.size = _bytes(out.keys) + _bytes(out.values) + sum(map(_header_bytes, filter(None, out.headers)))
        return out

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

    def sample(self, source: KafkaSource, now_ms: int) -> RecordSample:
        """The last record as the lake will hold it once appended at `now_ms`."""
        stamp = self.timestamps[-1]
        return RecordSample(
            self.offsets[-1],
            source.lake_offset(self.offsets[-1]),
            now_ms if stamp is None else stamp,
            self.last_epoch,
            record_digest(self.keys[-1], self.values[-1]),
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


class MirrorRun:
    """One run's consume loop over the partitions `starts` gives, in Kafka offsets; what it did,
    in lake offsets, in `progress` and `gaps`."""

    def __init__(
        self,
        topic: Topic,
        source: KafkaSource,
        starts: dict[int, PartitionStart],
        limits: MirrorLimits,
        stop: threading.Event,
        on_append: Callable[[PartitionProgress], None] | None,
    ) -> None:
        self.topic, self.source, self.limits, self.stop, self.on_append = topic, source, limits, stop, on_append
        self.high = {p: s.high for p, s in starts.items()}
        #: The Kafka offset each partition's next new record is at least at.
        self.position = {p: s.start for p, s in starts.items()}
        #: The samples still to compare, by partition.
        self.verify = {p: s.sample for p, s in starts.items() if s.sample is not None and s.failure is None}
        self.progress = {
            p: PartitionProgress(
                p, source.lake_offset(s.start), source.lake_offset(s.start), source.lake_offset(s.high)
            )
            for p, s in starts.items()
        }
        self.gaps: list[Gap] = [s.gap for s in starts.values() if s.gap is not None]
        self.buffers: dict[int, _Buffer] = {p: _Buffer() for p in starts}
        self.first_buffered: dict[int, float] = {}
        self.done: set[int] = set()
        self.taken = 0
        self.client: Any = None
        for p, s in starts.items():
            if s.failure is not None:
                self._fail(p, s.failure)
        for gap in self.gaps:
            _warn_gap(topic.name, source.topic, gap)

    def consume(self, client: Any, errors: ClusterErrors) -> str:
        """Read until a limit ends the run; the reason."""
        self.client = client
        if self.limits.once:
            # nothing new to read: the sample is compared when there is (it guards what is written)
            self.done |= {p for p, high in self.high.items() if self.position[p] >= high}
        pending = [
            TopicPartition(self.source.topic, p, self.verify[p].kafka_offset if p in self.verify else self.position[p])
            for p in sorted(self.progress)
            if p not in self.done
        ]
        if not pending:
            return "caught up"
        client.incremental_assign(pending)
        errors.watching = True
        deadline = None if self.limits.max_seconds is None else time.monotonic() + self.limits.max_seconds
        try:
            while True:
                reason = self._ended(deadline)
                if reason:
                    return reason
                self._take(errors, client.consume(_POLL_MESSAGES, timeout=0.2))
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

    def _take(self, errors: ClusterErrors, messages: list[Any]) -> None:
        """Buffer a poll's messages in order, appending a partition whose buffer is full; an
        error event (a partition's end, an error) is handled where it stands among them."""
        found = list(map(_ERROR, messages))
        start = 0
        if any(map(is_not, found, repeat(None))):  # (KafkaError's == refuses None)
            for index in [i for i, error in enumerate(found) if error is not None]:
                self._buffer_runs(errors, messages[start:index])
                self._event(errors, found[index], messages[index].partition())
                start = index + 1
        self._buffer_runs(errors, messages[start:] if start else messages)

    def _event(self, errors: ClusterErrors, error: Any, p: int | None) -> None:
        """An error event of the consumer: a partition's end, its fetch position deleted in Kafka,
        its log truncated under it, or an error of the client."""
        code = error.code()
        if p is None or p not in self.progress:
            errors(error)
        elif code == KafkaError._PARTITION_EOF:
            errors.answered()
            self.verify.pop(p, None)  # Kafka no longer has the sample's record (compacted): nothing to compare
            self._end_of(p)
        elif code == KafkaError._AUTO_OFFSET_RESET:
            self._skip_deleted(errors, p)
        elif code == KafkaError._LOG_TRUNCATION:
            self._fail(p, f"Kafka truncated its log under the mirror ({error.str()}); nothing more was written to it")
        else:
            errors(error)

    def _skip_deleted(self, errors: ClusterErrors, p: int) -> None:
        """The offset the partition reads next was deleted in Kafka meanwhile (retention,
        DeleteRecords): append what it holds, report the gap, and go on from Kafka's log start
        (asked with the run's retries: a broker moving leadership then must not end the run)."""
        self._flush(p)
        tp = TopicPartition(self.source.topic, p)
        low, _ = errors.retrying(
            f"a watermark request for partition {p}",
            self.client,
            lambda timeout: self.client.get_watermark_offsets(tp, timeout=timeout),
            self.limits.give_up_at(),
        )
        self.verify.pop(p, None)
        expected = self.position[p]
        if low > expected:
            gap = Gap(p, self.source.lake_offset(expected), self.source.lake_offset(low) - 1)
            self.gaps.append(gap)
            _warn_gap(self.topic.name, self.source.topic, gap)
            self.position[p] = low
        self.client.incremental_unassign([tp])
        self.client.incremental_assign([TopicPartition(self.source.topic, p, self.position[p])])

    def _buffer_runs(self, errors: ClusterErrors, messages: list[Any]) -> None:
        """Buffer records: a poll holds runs of one partition's messages (librdkafka queues a
        fetched batch whole), each buffered at once."""
        if not messages:
            return
        errors.answered()
        for p, run in groupby(messages, key=_PARTITION):
            self._buffer(p, list(run))

    def _buffer(self, p: int, taken: list[Any]) -> None:
        """Add a partition's polled messages to its buffer, up to --once's high watermark and
        --max-records; append it when full. The first message of a partition with a sample to
        compare is that sample's record, or a later one when Kafka no longer has it; records below
        the resume point are the lake's already. With --once, a partition whose record just below
        the high watermark is taken is done then, not at its end event, which a broker lost at that
        moment never sends."""
        if p in self.done or not taken:
            return
        if p in self.verify and not self._verified(p, taken[0]):
            return
        if taken[0].offset() < self.position[p]:
            taken = [m for m in taken if m.offset() >= self.position[p]]
            if not taken:
                return
        high = self.high[p]
        if self.limits.once and taken[-1].offset() + 1 >= high:
            taken = [m for m in taken if m.offset() < high]
            self._finish(p)
        if self.limits.max_records is not None:
            taken = taken[: max(0, self.limits.max_records - self.taken)]
        if not taken:
            return
        self.taken += len(taken)
        self.position[p] = taken[-1].offset() + 1
        self.first_buffered.setdefault(p, time.monotonic())
        while taken:
            taken = self.buffers[p].add(taken, self.limits.batch_bytes)
            if self.buffers[p].size >= self.limits.batch_bytes:
                self._flush(p)

    def _verified(self, p: int, first: Any) -> bool:
        """Compare the partition's sample with Kafka's first record; False (the partition failed)
        when Kafka's record at the sample's offset is another one."""
        sample = self.verify.pop(p)
        if first.offset() != sample.kafka_offset:
            return True  # Kafka compacted the sample's record away: nothing to compare
        differs = verdict(sample, first)
        if differs is None:
            return True
        self._fail(
            p,
            f"Kafka's record at offset {sample.kafka_offset} of {self.source.topic}-{p} is not the one the lake "
            f"holds at offset {sample.lake_offset} ({differs}): the Kafka log was rewritten (an unclean leader "
            "election, or a topic created again on a cluster that gives no topic ids); nothing was written to it "
            "(mirror into a new lake topic, or follow the new log with `--restart-from-kafka`)",
        )
        return False

    def _finish(self, p: int) -> None:
        """With --once, the partition read all it will this run."""
        self.done.add(p)
        self.client.pause([TopicPartition(self.source.topic, p)])

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
        """Append the partition's buffer as one commit; a record without a key on a compacted lake
        topic ends the partition there (what comes before it is appended)."""
        batch = self.buffers[p]
        if not batch.offsets:
            return
        self.buffers[p] = _Buffer()
        self.first_buffered.pop(p, None)
        if self.topic.config.compact and None in batch.keys:
            index = batch.keys.index(None)
            if index and not self._append(p, batch.head(index)):
                return
            self._fail(p, self._keyless(p, batch.offsets[index]))
            return
        self._append(p, batch)

    def _keyless(self, p: int, kafka_offset: int) -> str:
        return (
            f"Kafka's record at offset {kafka_offset} of {self.source.topic}-{p} has no key, but lake topic "
            f"{self.topic.name} is compacted and holds keyed records only; the records before it were mirrored. "
            "The Kafka topic takes records without keys, so it is not compacted: give the lake topic cleanup.policy "
            f"delete (topics.{self.topic.name}.config), or delete the record in Kafka (DeleteRecords past offset "
            f"{kafka_offset}: the gap is then reported) and run the mirror again"
        )

    def _append(self, p: int, batch: _Buffer) -> bool:
        """Append `batch` at its lake offsets with the sample of its last record, as one commit;
        False (the partition failed) when it cannot be stored."""
        now = wall_clock_ms()
        sample = batch.sample(self.source, now)
        offsets = batch.offsets if not self.source.offset_delta else list(map(self.source.lake_offset, batch.offsets))
        try:
            self.topic.partition(p).append(
                batch.table(),
                offsets=offsets,
                now_ms=now,
                writer=MIRROR_WRITER,
                properties={SAMPLE_PROPERTY: sample.encode()},
            )
        except LakeCleanerError as exc:
            self._fail(
                p, f"records at Kafka offsets {batch.offsets[0]}..{batch.offsets[-1]} could not be stored: {exc}"
            )
            return False
        progress = self.progress[p]
        progress.records += len(offsets)
        progress.bytes += batch.size
        progress.next_offset = offsets[-1] + 1
        progress.high_watermark = max(progress.high_watermark, progress.next_offset)
        if self.on_append is not None:
            self.on_append(progress)
        return True

    def _fail(self, p: int, reason: str) -> None:
        """The partition stops this run with `reason`; the others go on."""
        self.progress[p].error = reason
        self.done.add(p)
        self.verify.pop(p, None)
        self.buffers[p] = _Buffer()
        self.first_buffered.pop(p, None)
        if self.client is not None:
            self.client.pause([TopicPartition(self.source.topic, p)])
        log.error("%s-%d not mirrored: %s", self.topic.name, p, reason)


def _warn_gap(topic: str, source: str, gap: Gap) -> None:
    log.warning(
        "%s-%d: offsets %d..%d were deleted in Kafka's %s before they were mirrored (retention or DeleteRecords)",
        topic,
        gap.partition,
        gap.first,
        gap.last,
        source,
    )


__all__ = [
    "DEFAULT_BATCH_BYTES",
    "DEFAULT_GIVE_UP_S",
    "DEFAULT_LINGER_MS",
    "MirrorLimits",
    "MirrorRun",
    "PartitionProgress",
]
