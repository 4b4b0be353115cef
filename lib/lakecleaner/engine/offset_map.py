"""Pass 1, Kafka's offset map (`Cleaner.buildOffsetMap`, DESIGN section 5): the winning offset
of every (partition, key) over [log start, U).

Memory is bounded per task, with Kafka's setting and meaning: `log.cleaner.dedupe.buffer.size`
bytes of offset map per task, filled to at most `log.cleaner.io.buffer.load.factor`. Where Kafka
stops at a full map and cleans only the part of the dirty section it covered (the next run goes
on), lakecleaner splits a partition's key space into as many hash buckets as the map needs
(`keys.key_buckets`), one task each, and cleans the whole dirty section in one run.

A task reads the offset, key and ordering columns of every file of its partition's range
(`versions.source_columns`: values never), keeps the records of its bucket, and reduces them to
each key's winner by the single rule of `versions`, comparing the keys themselves, so no two keys
are ever confused (Kafka compares 16-byte MD5 digests). Rows are reduced whenever what is held
since the last reduction is as large as the map, so a task never holds more than twice its map.
The number of buckets is first planned from the record count, at `PLANNED_ENTRY_BYTES` a key;
a task whose map outgrows its budget (longer keys) stops and reports the size it reached, and the
partition runs again with more buckets. Buckets are also added, up to the cluster's parallelism,
when a run has fewer partitions than cores and a partition is large enough to be worth it.

A task returns its bucket's winners as an `OffsetSet` over the partition's range; the driver
unites a partition's buckets. A file that cannot be read (CorruptSegment) makes its partition
uncleanable for the run; the other partitions carry on.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession

from lakecleaner.config import TopicConfig
from lakecleaner.engine.keys import key_buckets
from lakecleaner.engine.offset_set import OffsetSet
from lakecleaner.engine.plan import PartitionPlan
from lakecleaner.engine.sparkio import run_tasks
from lakecleaner.engine.storage import StoreSpec
from lakecleaner.engine.versions import latest_per_key, order_table, source_columns
from lakecleaner.errors import CorruptSegment, StorageError
from lakecleaner.log.manifest import SegmentFile
from lakecleaner.log.partition import partition_prefix
from lakecleaner.log.segment_files import read_segment_file

#: Bytes a key is planned to take in a task's map before any is read: Kafka's 24-byte entry (a
#: 16-byte digest and an 8-byte offset) plus an offset into the keys' bytes and 12 key bytes.
PLANNED_ENTRY_BYTES = 40
#: Records a bucket added for parallelism (not memory) should hold at least.
MIN_PARALLEL_BUCKET_RECORDS = 1_000_000


@dataclass(frozen=True)
class MapBudget:
    """How much offset map a task may hold: Kafka's log.cleaner.dedupe.buffer.size (bytes) times
    log.cleaner.io.buffer.load.factor."""

    buffer_bytes: int
    load_factor: float

    @property
    def bytes(self) -> int:
        return max(1, int(self.buffer_bytes * self.load_factor))

    def buckets(self, records: int) -> int:
        """Buckets needed for a map of `records` keys at the planned entry size."""
        return max(1, math.ceil(records * PLANNED_ENTRY_BYTES / self.bytes))


@dataclass(frozen=True)
class MapTask:
    """One key bucket of one partition: every file of [low, high), keys of `bucket` only."""

    topic: str
    partition: int
    log_start_offset: int
    low: int
    high: int
    files: tuple[SegmentFile, ...]
    bucket: int
    buckets: int
    budget_bytes: int


@dataclass(frozen=True)
class MapResult:
    """A pass-1 task's outcome: its bucket's winners, or why the partition cannot be cleaned, or
    (`needed_bytes` > 0) the map size it reached when it outgrew its budget."""

    partition: int
    bucket: int
    winners: OffsetSet | None = None
    error: str | None = None
    malformed: int = 0
    needed_bytes: int = 0
    map_bytes: int = 0


@dataclass
class OffsetMap:
    """Pass 1's result: each partition's winning offsets over its range, the buckets its keys were
    split into and the largest map one of them held, the partitions that cannot be cleaned and the
    malformed version headers counted."""

    kept: dict[int, OffsetSet] = field(default_factory=dict)
    buckets: dict[int, int] = field(default_factory=dict)
    map_bytes: dict[int, int] = field(default_factory=dict)
    errors: dict[int, str] = field(default_factory=dict)
    malformed: dict[int, int] = field(default_factory=dict)


class _Map:
    """A task's offset map: rows (key, order columns…, offset), reduced to one per key whenever
    the rows held since the last reduction are as large as the map."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.reduced: pa.Table | None = None
        self.pending: list[pa.Table] = []
        self.pending_bytes = 0

    def add(self, rows: pa.Table) -> None:
        self.pending.append(rows)
        self.pending_bytes += rows.nbytes
        held = 0 if self.reduced is None else self.reduced.nbytes
        if self.pending_bytes >= max(held, self.budget // 4):
            self.reduce()

    def reduce(self) -> None:
        parts = ([self.reduced] if self.reduced is not None else []) + self.pending
        if parts:
            self.reduced = latest_per_key(pa.concat_tables(parts))
        self.pending, self.pending_bytes = [], 0

    @property
    def bytes(self) -> int:
        return 0 if self.reduced is None else self.reduced.nbytes


def bucket_winners(spec: StoreSpec, config: TopicConfig, task: MapTask) -> MapResult:
    """One pass-1 task: the winners of `task`'s bucket of keys over its partition's range."""
    store = spec.open()
    prefix = partition_prefix(task.topic, task.partition)
    offset_map = _Map(task.budget_bytes)
    malformed = 0
    for file in task.files:
        try:
            table = read_segment_file(
                store, prefix + file.path, columns=source_columns(config.compaction_strategy), expected=file
            )
        except (CorruptSegment, StorageError) as exc:  # the partition fails; the others go on
            return MapResult(task.partition, task.bucket, error=str(exc))
        if file.base_offset < task.log_start_offset:
            table = table.filter(pc.greater_equal(table.column("offset"), task.log_start_offset))
        if task.buckets > 1:
            table = table.filter(pa.array(key_buckets(table.column("key"), task.buckets) == task.bucket))
        ordered, bad = order_table(table, config)
        malformed += bad
        offset_map.add(ordered.filter(pc.is_valid(ordered.column("key"))))
        if offset_map.bytes > task.budget_bytes:
            return MapResult(task.partition, task.bucket, needed_bytes=_projected(offset_map.bytes, task, file))
    offset_map.reduce()
    if offset_map.bytes > task.budget_bytes:
        return MapResult(task.partition, task.bucket, needed_bytes=offset_map.bytes)
    offsets = np.zeros(0, np.int64) if offset_map.reduced is None else offset_map.reduced.column("offset").to_numpy()
    winners = OffsetSet.of(np.sort(offsets), task.low, task.high)
    return MapResult(task.partition, task.bucket, winners, malformed=malformed, map_bytes=offset_map.bytes)


def _projected(reached: int, task: MapTask, last: SegmentFile) -> int:
    """The map size a task that stopped after `last` would reach over all its files."""
    read = sum(f.record_count for f in task.files[: task.files.index(last) + 1])
    total = sum(f.record_count for f in task.files)
    return math.ceil(reached * total / max(read, 1))


def _too_small(budget: MapBudget, topic: str, partition: int, buckets: int) -> str:
    return (
        f"partition {topic}-{partition}: the offset map outgrew log.cleaner.dedupe.buffer.size="
        f"{budget.buffer_bytes} bytes (x log.cleaner.io.buffer.load.factor={budget.load_factor}) even "
        f"split into {buckets} key buckets; raise log.cleaner.dedupe.buffer.size"
    )


def map_tasks(topic: str, plan: PartitionPlan, buckets: int, budget: MapBudget) -> list[MapTask]:
    """The tasks of one partition split into `buckets` key buckets."""
    files = tuple(f for g in plan.groups for f in g.files)
    low, high = plan.groups[0].base_offset, plan.groups[-1].next_offset
    return [
        MapTask(topic, plan.partition, plan.log_start_offset, low, high, files, b, buckets, budget.bytes)
        for b in range(buckets)
    ]


def planned_buckets(plans: Sequence[PartitionPlan], budget: MapBudget, parallelism: int) -> dict[int, int]:
    """Each partition's key buckets: as many as its map needs at the planned entry size, or more,
    up to the share of `parallelism` the partition would leave idle, for large partitions."""
    spread = max(1, math.ceil(parallelism / max(len(plans), 1)))
    return {
        p.partition: max(budget.buckets(p.record_count), min(spread, p.record_count // MIN_PARALLEL_BUCKET_RECORDS))
        for p in plans
    }


def build_offset_map(
    spark: SparkSession,
    spec: StoreSpec,
    topic: str,
    config: TopicConfig,
    plans: Sequence[PartitionPlan],
    buckets: dict[int, int],
    budget: MapBudget,
) -> OffsetMap:
    """Run pass 1 for `plans`, each partition split into `buckets[partition]` key buckets;
    partitions whose maps outgrow their budget run again, in as many more buckets as the size
    they reached asks for."""
    result = OffsetMap()
    by_partition = {p.partition: p for p in plans}
    while buckets:
        tasks = [t for p, n in buckets.items() for t in map_tasks(topic, by_partition[p], n, budget)]
        outcomes = run_tasks(
            spark,
            tasks,
            partial(bucket_winners, spec, config),
            f"lakecleaner pass 1 (offset map) of {topic}",
            weight=lambda t: sum(f.size_bytes for f in t.files),
        )
        again: dict[int, int] = {}
        for outcome in outcomes:
            p = outcome.partition
            if outcome.error is not None:
                result.errors.setdefault(p, outcome.error)
            elif outcome.needed_bytes:
                wanted = more_buckets(buckets[p], outcome.needed_bytes, budget)
                if wanted > max(by_partition[p].record_count, 1):
                    result.errors[p] = _too_small(budget, topic, p, buckets[p])
                again[p] = max(again.get(p, 0), wanted)
        for p in buckets:
            if p in result.errors or p in again:
                continue
            mine = [o for o in outcomes if o.partition == p]
            kept = mine[0].winners
            assert kept is not None
            for other in mine[1:]:
                assert other.winners is not None
                kept = kept.union(other.winners)
            result.kept[p] = kept
            result.buckets[p] = buckets[p]
            result.malformed[p] = sum(o.malformed for o in mine)
            result.map_bytes[p] = max(o.map_bytes for o in mine)
        buckets = {p: n for p, n in again.items() if p not in result.errors}
    return result


def more_buckets(buckets: int, needed_bytes: int, budget: MapBudget) -> int:
    """The buckets for a partition whose map, split into `buckets`, reached `needed_bytes` in one
    of them: enough for that size, and one more share for the spread between buckets."""
    return buckets * (math.ceil(needed_bytes / budget.bytes) + 1)
