"""What Kafka's LogCleanerManager keeps about the cleaner between runs, kept durably per topic:
the partitions marked uncleanable after a failed compaction, and the last compaction run.

Kafka holds its uncleanable set in memory (kafka-cleaner-semantics.md section 1.15): a partition
whose cleaning threw is skipped until the broker restarts, and `uncleanable-partitions-count` and
`uncleanable-bytes` export it. Here a run and the next are separate processes, so the state is one
JSON object per topic at `_lakecleaner/cleaner/<topic>.json`, updated by conditional writes. The
decision of what to skip is policy (`policy.uncleanable`); this module only stores the facts.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from lakecleaner.config import TopicConfig
from lakecleaner.errors import CorruptCleanerState, LakeCleanerError, ObjectNotFound
from lakecleaner.io import ObjectStore
from lakecleaner.io.concurrent import map_ordered
from lakecleaner.io.strict_json import Fields, Malformed, load_object
from lakecleaner.log.manifest import Manifest
from lakecleaner.names import validate_topic_name

log = logging.getLogger(__name__)

CLEANER_STATE_PREFIX = "_lakecleaner/cleaner/"


def cleaner_state_key(topic: str) -> str:
    return f"{CLEANER_STATE_PREFIX}{topic}.json"


def sealed_segments_fingerprint(manifest: Manifest) -> str:
    """A digest of the log's sealed segments (their ids): it changes when segments are rolled,
    compacted, deleted by retention or rebuilt by repair, and not when records are appended to the
    active segment, which compaction never reads."""
    ids = ",".join(s.id for s in manifest.segments if s.sealed)
    return hashlib.sha256(ids.encode()).hexdigest()[:32]


def config_fingerprint(config: TopicConfig) -> str:
    """A digest of a topic's effective config: it changes when any setting changes."""
    text = json.dumps(config.to_kafka_dict(), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class UncleanablePartition:
    """A partition whose last compaction failed: why, when (first and last failure), how many
    attempts failed in a row, the log end offset then, and the digests of the log's sealed
    segments and of the topic config then, by which a later run sees that the log has changed."""

    partition: int
    reason: str
    first_failed_ms: int
    last_failed_ms: int
    attempts: int
    log_end_offset: int
    segments_fingerprint: str
    config_fingerprint: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_fields(f: Fields) -> UncleanablePartition:
        return UncleanablePartition(
            partition=f.integer("partition", hi=(1 << 31) - 1),
            reason=f.text("reason", max_chars=1 << 16),
            first_failed_ms=f.integer("first_failed_ms"),
            last_failed_ms=f.integer("last_failed_ms"),
            attempts=f.integer("attempts", lo=1),
            log_end_offset=f.integer("log_end_offset"),
            segments_fingerprint=f.text("segments_fingerprint", max_chars=256),
            config_fingerprint=f.text("config_fingerprint", max_chars=256),
        )


@dataclass(frozen=True)
class LastRun:
    """The topic's last compaction run: its id, when it started and finished, how long the
    cleaning took (Kafka's max-clean-time-secs) and the fullest offset map of its tasks as a
    percentage of log.cleaner.dedupe.buffer.size (Kafka's max-buffer-utilization-percent)."""

    run_id: str
    started_ms: int
    finished_ms: int
    clean_time_ms: int
    buffer_utilization_percent: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_fields(f: Fields) -> LastRun:
        return LastRun(
            run_id=f.text("run_id", max_chars=256),
            started_ms=f.integer("started_ms"),
            finished_ms=f.integer("finished_ms"),
            clean_time_ms=f.integer("clean_time_ms"),
            buffer_utilization_percent=f.integer("buffer_utilization_percent", hi=1 << 31),
        )


@dataclass(frozen=True)
class CleanerState:
    """A topic's cleaner state: uncleanable partitions (partition → entry), the last compaction run,
    and the latest "now" a run of the topic's DAG reached its report with (`last_dag_run_ms`: the
    erasure audit's sign that the DAG runs)."""

    topic: str
    uncleanable: Mapping[int, UncleanablePartition] = field(default_factory=dict)
    last_run: LastRun | None = None
    last_dag_run_ms: int | None = None

    def to_json(self) -> bytes:
        data = {
            "topic": self.topic,
            "uncleanable": [e.to_dict() for _, e in sorted(self.uncleanable.items())],
            "last_run": None if self.last_run is None else self.last_run.to_dict(),
            "last_dag_run_ms": self.last_dag_run_ms,
        }
        return json.dumps(data, indent=1).encode()

    @staticmethod
    def from_json(data: bytes, topic: str, location: str) -> CleanerState:
        """Parse and validate; CorruptCleanerState naming `location` and the fix."""
        try:
            f = load_object(data, max_bytes=64 << 20)
            entries = [UncleanablePartition.from_fields(e) for e in f.objects("uncleanable")]
            last = f.optional_object("last_run")
            state = CleanerState(
                f.text("topic", max_chars=249),
                {e.partition: e for e in entries},
                None if last is None else LastRun.from_fields(last),
                f.optional_int("last_dag_run_ms"),
            )
        except Malformed as exc:
            raise CorruptCleanerState(
                f"cleaner state {location} is corrupt ({exc}); delete it to retry every "
                f"partition (`lakecleaner uncleanable clear --topic {topic}`)"
            ) from None
        if state.topic != topic or len(state.uncleanable) != len(entries):
            raise CorruptCleanerState(
                f"cleaner state {location} names topic {state.topic!r} or lists a partition twice; delete it to "
                f"retry every partition (`lakecleaner uncleanable clear --topic {topic}`)"
            )
        return state


@dataclass(frozen=True)
class Failure:
    """A partition's failed compaction, as the engine reports it, with the manifest it planned on
    (None when its manifest could not be read)."""

    partition: int
    reason: str
    manifest: Manifest | None


def mark_uncleanable(
    state: CleanerState, failures: Iterable[Failure], config: TopicConfig, now_ms: int
) -> dict[int, UncleanablePartition]:
    """The uncleanable entries after `failures`: a new entry per newly failed partition, and one
    more attempt (with the new reason and log) for a partition that was already uncleanable."""
    entries = dict(state.uncleanable)
    for failure in failures:
        before = entries.get(failure.partition)
        manifest = failure.manifest
        entries[failure.partition] = UncleanablePartition(
            partition=failure.partition,
            reason=failure.reason,
            first_failed_ms=now_ms if before is None else before.first_failed_ms,
            last_failed_ms=now_ms,
            attempts=1 if before is None else before.attempts + 1,
            log_end_offset=0 if manifest is None else manifest.next_offset,
            segments_fingerprint="" if manifest is None else sealed_segments_fingerprint(manifest),
            config_fingerprint=config_fingerprint(config),
        )
    return entries


@dataclass(frozen=True)
class CleaningDone:
    """What a compaction run returns to the manager (Kafka's Cleaner to LogCleanerManager): the
    partitions whose data failed them, the partitions cleaned or with nothing to do, and the run."""

    failures: tuple[Failure, ...]
    cleaned: frozenset[int]
    last_run: LastRun


def after_cleaning(state: CleanerState, done: CleaningDone, config: TopicConfig, now_ms: int) -> CleanerState:
    """The state after a run: its failed partitions marked uncleanable (Kafka's
    `markPartitionUncleanable`, kept between runs), the mark of every cleaned partition cleared,
    the run kept as the topic's last; a partition in neither keeps its mark as it was."""
    marked = mark_uncleanable(state, done.failures, config, now_ms)
    kept = {p: e for p, e in marked.items() if p not in done.cleaned}
    return replace(state, uncleanable=kept, last_run=done.last_run)


class CleanerStateStore:
    """Read and update topics' cleaner state."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store

    def read(self, topic: str) -> CleanerState:
        """The topic's state; a topic never compacted has none. A damaged state file is logged and
        read as empty: every partition is then retried, which is safe (a partition that still
        fails is marked again), and the next update replaces the file."""
        data, _ = self._load(topic)
        try:
            return self._parse(topic, data)
        except CorruptCleanerState as exc:
            log.warning("%s", exc)
            return CleanerState(topic)

    def read_many(self, topics: Sequence[str], max_workers: int) -> dict[str, CleanerState]:
        """`read` for many topics, concurrently."""
        return dict(zip(topics, map_ordered(self.read, topics, max_workers), strict=True))

    def _load(self, topic: str) -> tuple[bytes | None, str | None]:
        validate_topic_name(topic)
        try:
            return self.store.read_with_etag(cleaner_state_key(topic))
        except ObjectNotFound:
            return None, None

    def _parse(self, topic: str, data: bytes | None) -> CleanerState:
        if data is None:
            return CleanerState(topic)
        return CleanerState.from_json(data, topic, self.store.location(cleaner_state_key(topic)))

    def update(self, topic: str, change: Callable[[CleanerState], CleanerState]) -> CleanerState:
        """Apply `change` to the current state with a conditional write, retried when another
        writer got there first. A damaged state file is replaced (it only ever causes retries)."""
        validate_topic_name(topic)
        result: list[CleanerState] = []

        def apply(data: bytes | None) -> bytes | None:
            damaged = False
            try:
                current = self._parse(topic, data)
            except CorruptCleanerState:
                current, damaged = CleanerState(topic), True
            result[:] = [change(current)]
            return None if result[0] == current and not damaged else result[0].to_json()

        self.store.update(cleaner_state_key(topic), apply, what=f"the cleaner state of topic {topic}")
        return result[0]

    def done_cleaning(self, topic: str, done: CleaningDone, config: TopicConfig, now_ms: int) -> None:
        """Record what a compaction run returned (`after_cleaning`; Kafka's `doneCleaning`). A
        storage error is logged, not raised: the run's outcome stands, and a lost mark only means
        a retry."""
        try:
            self.update(topic, lambda state: after_cleaning(state, done, config, now_ms))
        except LakeCleanerError as exc:
            log.warning(
                "topic %s: the cleaner state could not be updated after run %s: %s", topic, done.last_run.run_id, exc
            )

    def clear(self, topic: str, partitions: Iterable[int] | None = None) -> list[int]:
        """Forget that the given (default: all) partitions are uncleanable; returns those that were."""
        wanted = None if partitions is None else set(partitions)
        cleared: list[int] = []

        def forget(state: CleanerState) -> CleanerState:
            cleared[:] = sorted(p for p in state.uncleanable if wanted is None or p in wanted)
            kept = {p: e for p, e in state.uncleanable.items() if p not in cleared}
            return replace(state, uncleanable=kept)

        self.update(topic, forget)
        return cleared
