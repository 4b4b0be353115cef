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
are ever confused (Kafka compares 16-byte MD5 digests). The rows read are held as they are until
they would pass the budget, and only then reduced to a row per key, so a bucket whose records fit
is reduced once.

As Kafka's cleaner does, the map holds the dirty section only: the cleaned section
[log start, `CompactionInput.clean_end`) holds each key once, so its rows are streamed past the map
(`_CleanProbe`) rather than added to it. A clean row whose key the map lacks is its key's winner;
one whose key the map holds is reduced with the map's row of that key by the same rule (KIP-280:
an older record may still win by its timestamp or version), except by offset, where it simply
loses: every dirty offset lies above every clean one. A partition with a small dirty
section and a large cleaned one is thus mapped by one task, in a map of its dirty keys.
The number of buckets is first planned from the dirty section's records, at `PLANNED_ENTRY_BYTES` a key;
a task whose map outgrows its budget (longer keys) stops and reports the size it reached, and the
partition runs again with more buckets. Buckets are also added, up to the cluster's parallelism,
when a run has fewer partitions than cores and a partition is large enough to be worth it.

A task returns its bucket's winners as an `OffsetSet` over the partition's range; the driver
unites a partition's buckets. A bucket of several writes its set to the store and returns where
(`offsets_file`), so that a large partition's winners never pass through the Spark JVM. A file that
cannot be read (CorruptSegment) makes its partition uncleanable, a store that fails fails it for
the run (`MapFailure`); the other partitions carry on.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray
from pyspark.sql import SparkSession

from lakecleaner.config import TopicConfig
from lakecleaner.engine.inputs import CompactionInput
from lakecleaner.engine.keys import bool_mask, key_buckets, key_hash, rows_where
from lakecleaner.engine.memory import give_back, trim_heap_tops
from lakecleaner.engine.offset_set import Members, OffsetSet
from lakecleaner.engine.offsets_file import WINNERS, StoredOffsets, load_offsets, offsets_path, store_offsets
from lakecleaner.engine.report import FAILED, UNCLEANABLE
from lakecleaner.engine.sparkio import Overlap, run_tasks
from lakecleaner.engine.spill import Spill, read_spill, spill_path, write_spill
from lakecleaner.engine.storage import StoreSpec
from lakecleaner.engine.versions import HASH, latest_per_key, order_columns, order_table, source_columns, uses_hash
from lakecleaner.errors import CorruptSegment, StorageError
from lakecleaner.io import ObjectStore
from lakecleaner.io.concurrent import map_bounded
from lakecleaner.log.layout import partition_prefix
from lakecleaner.log.manifest import SegmentFile
from lakecleaner.log.segment_files import FetchedFiles, live_rows, read_file_key_index, read_segment_file

#: Bytes a record is planned to take in a task's map before any is read. Kafka's entry is 24 bytes
#: (a 16-byte digest and an 8-byte offset); here an entry is the key's bytes, a 4-byte offset into
#: them, the 8-byte offset and, for the strategies that sort by it (`versions.uses_hash`), the key's
#: 8-byte hash and its order columns (23 bytes for an 11-byte key by offset). Planned by
#: records, so that a bucket's rows fit its map before they are reduced, and reduced once; a map
#: of longer keys outgrows its plan and runs again in more buckets.
PLANNED_ENTRY_BYTES = 40
#: Bytes of key buckets' winners files the driver reads at once while it joins them.
WINNERS_READ_BYTES = 32 * 1024 * 1024
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
        return buckets_for(records, self.bytes)


def buckets_for(records: int, budget_bytes: int) -> int:
    """Key buckets a map of `records` keys needs, at the planned entry size, so that no task's
    map exceeds `budget_bytes` (`MapBudget.bytes`)."""
    return max(1, math.ceil(records * PLANNED_ENTRY_BYTES / budget_bytes))


@dataclass(frozen=True)
class MapTask:
    """One key bucket of one partition over [low, high): the whole partition from its segment files
    (`files`, one bucket), or one bucket of several from the rows the scatter step wrote
    (`spills`). Rows below `clean_end` belong to the cleaned section (`CompactionInput.clean_end`)."""

    topic: str
    partition: int
    log_start_offset: int
    low: int
    high: int
    clean_end: int
    files: tuple[SegmentFile, ...]
    bucket: int
    buckets: int
    budget_bytes: int
    spills: tuple[Spill, ...] = ()
    #: Where a bucket of several writes its winners, relative to the partition (`offsets_file`).
    winners_path: str = ""


@dataclass(frozen=True)
class ScatterTask:
    """Files of one partition whose keyed rows are split into key buckets and written to one spill
    file (`path`, relative to the partition), bucket after bucket."""

    topic: str
    partition: int
    log_start_offset: int
    files: tuple[SegmentFile, ...]
    buckets: int
    path: str


@dataclass(frozen=True)
class MapFailure:
    """Why pass 1 could not map a partition. `uncleanable` when its data is at fault: a corrupt
    segment file, or a map that outgrows log.cleaner.dedupe.buffer.size however many key buckets
    (Kafka's cleaner marks such a partition uncleanable). A store that failed (a segment, a spill
    or a winners file it could not read or write) fails the partition for this run instead, as
    pass 2's storage errors do: Kafka marks the log directory offline on an IOException, never the
    partition uncleanable (kafka-cleaner-semantics.md 1.15)."""

    message: str
    uncleanable: bool

    @staticmethod
    def of(exc: CorruptSegment | StorageError) -> MapFailure:
        return MapFailure(str(exc), isinstance(exc, CorruptSegment))

    @property
    def status(self) -> str:
        """The partition's status in the run's report."""
        return UNCLEANABLE if self.uncleanable else FAILED


@dataclass(frozen=True)
class Scattered:
    """A scatter task's spill file and where each bucket's batches lie in it, or why the partition
    cannot be cleaned."""

    partition: int
    path: str
    spills: tuple[Spill, ...] = ()
    error: MapFailure | None = None
    malformed: int = 0


@dataclass(frozen=True)
class MapResult:
    """A pass-1 task's outcome: its bucket's winners, or why the partition cannot be cleaned, or
    (`needed_bytes` > 0) the map size it reached when it outgrew its budget."""

    partition: int
    bucket: int
    winners: OffsetSet | None = None
    #: Where the winners were written instead (`MapTask.winners_path`): `winners` is then None.
    stored: StoredOffsets | None = None
    error: MapFailure | None = None
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
    errors: dict[int, MapFailure] = field(default_factory=dict)
    malformed: dict[int, int] = field(default_factory=dict)


class _Map:
    """A task's offset map: rows (key, order columns…, offset), reduced to one per key when the
    rows held would pass the budget."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.reduced: pa.Table | None = None
        self.pending: list[pa.Table] = []
        self.pending_bytes = 0

    def add(self, rows: pa.Table) -> None:
        if self.pending_bytes + rows.nbytes + self.bytes > self.budget:
            self.reduce()
        self.pending.append(rows)
        self.pending_bytes += rows.nbytes

    def reduce(self) -> None:
        parts = ([self.reduced] if self.reduced is not None else []) + self.pending
        if parts:
            self.reduced = latest_per_key(pa.concat_tables(parts))
        self.pending, self.pending_bytes = [], 0

    @property
    def bytes(self) -> int:
        return 0 if self.reduced is None else self.reduced.nbytes


def _file_rows(
    store: ObjectStore,
    prefix: str,
    file: SegmentFile,
    log_start: int,
    config: TopicConfig,
    fetched: FetchedFiles | None = None,
) -> tuple[pa.Table, int]:
    """A segment file's keyed rows at or after the log start as (key, order columns…, offset),
    and the count of malformed version headers."""
    columns = source_columns(config.compaction_strategy)
    table = read_segment_file(store, prefix + file.path, columns=columns, expected=file, fetched=fetched)
    if file.base_offset < log_start:
        table = rows_where(table, table.column("offset").to_numpy() >= log_start)
    ordered, malformed = order_table(table, config)
    return rows_where(ordered, bool_mask(pc.is_valid(ordered.column("key")))), malformed


def _hashed(rows: pa.Table) -> pa.Table:
    """The rows with their keys' hashes (`keys.key_hash`) in the HASH column."""
    return rows.append_column(HASH, pa.array(key_hash(rows.column("key"))))


class _BucketRows:
    """The keyed rows of a task's bucket: the dirty section's first (a spill or a file at a time,
    each with the records it covers and the malformed version headers among them, which the
    scatter step counted for spilled rows), then the cleaned section's. A spill holds both, in
    offset order: its clean rows are held until the dirty ones are mapped."""

    def __init__(self, store: ObjectStore, config: TopicConfig, task: MapTask, fetched: FetchedFiles | None) -> None:
        self.store, self.config, self.task, self.fetched = store, config, task, fetched
        self.prefix = partition_prefix(task.topic, task.partition)
        self.held: list[pa.Table] = []

    def dirty(self) -> Iterator[tuple[pa.Table, int, int]]:
        for spill in self.task.spills:
            rows = read_spill(self.store, self.prefix, spill)
            clean = rows.column("offset").to_numpy() < self.task.clean_end
            if clean.any():
                self.held.append(rows_where(rows, clean))
            yield rows_where(rows, ~clean), spill.rows, 0
        for file in self.task.files:
            if file.base_offset >= self.task.clean_end:
                rows, malformed = self._file(file)
                yield rows, file.record_count, malformed

    def clean(self) -> Iterator[tuple[pa.Table, int]]:
        """The cleaned section's keyed rows (but those of the files `indexed` gives)."""
        yield from ((rows, 0) for rows in self.held)
        self.held = []
        for file in parsed_files(self.task, self.config):
            if file.base_offset < self.task.clean_end:
                yield self._file(file)

    def indexed(self) -> Iterator[tuple[pa.Table, NDArray[np.bool_]]]:
        """The cleaned section's files with a key index: the index's rows (offset, key, hash), and
        which of them a reader reads at or after the log start (those the file's deletion vector
        leaves). The offsets are kept for pass 2 as the file's (`FetchedFiles.keep_columns`),
        which then reads a group it may keep without decoding its files (`recopy._vectored`)."""
        for file in self.task.files:
            if not read_by_index(self.task, self.config, file):
                continue
            rows = read_file_key_index(self.store, self.prefix, file, self.fetched)
            if self.fetched is not None:
                self.fetched.keep_columns(self.prefix + file.path, rows.select(["offset"]))
            offsets = rows.column("offset").to_numpy()
            yield rows, (offsets >= self.task.log_start_offset) & live_rows(self.store, self.prefix, file)

    def _file(self, file: SegmentFile) -> tuple[pa.Table, int]:
        rows, malformed = _file_rows(
            self.store, self.prefix, file, self.task.log_start_offset, self.config, self.fetched
        )
        return (_hashed(rows) if uses_hash(self.config.compaction_strategy) else rows), malformed

    @property
    def dirty_records(self) -> int:
        """Records the dirty rows cover, for the map's projection (a spill's clean rows count)."""
        files = sum(f.record_count for f in self.task.files if f.base_offset >= self.task.clean_end)
        return files + sum(s.rows for s in self.task.spills)


def _sorted_search(ordered: NDArray[np.uint64], needles: NDArray[np.uint64]) -> NDArray[np.intp]:
    """`np.searchsorted(ordered, needles)`, the needles searched in ascending order: each search
    then starts where the one before ended, so they cost half as much with their sort as
    searched in the rows' order (160k hashes among 125k: 16 against 30 ms)."""
    by = np.argsort(needles)
    at = np.empty(needles.size, np.intp)
    at[by] = np.searchsorted(ordered, needles[by])
    return at


def read_by_index(task: MapTask, config: TopicConfig, file: SegmentFile) -> bool:
    """Whether pass 1 reads a file's rows through its key index rather than its Parquet: a file of
    the cleaned section that has one, when records win by offset (a cleaned record whose key the
    dirty section holds then loses outright; by a KIP-280 order its version is compared too)."""
    ordered = bool(order_columns(config.compaction_strategy))
    return file.base_offset < task.clean_end and file.key_index is not None and not ordered


def parsed_files(task: MapTask, config: TopicConfig) -> list[SegmentFile]:
    """The files whose Parquet pass 1 decodes: all of the task's but those it reads by their key
    indexes (`read_by_index`). A partition's task fetches these before pass 1 (`recopy.clean_partition`);
    a group of the others is fetched only when pass 2 rewrites it."""
    return [f for f in task.files if not read_by_index(task, config, f)]


#: The slots of `_CleanProbe`'s bitmap of the map's hashes (4 MiB; a map of 125k keys fills 3%).
_SLOTS = 1 << 22
_SLOT_MASK = np.uint64(_SLOTS - 1)


class _CleanProbe:
    """The cleaned section's rows tested against the dirty section's map (Kafka cleans the whole
    log with a map of its dirty section): the cleaned section holds each key once, so a clean row
    whose key the map lacks is its key's winner, and one whose key the map holds is a candidate,
    reduced with the map by the rule of `versions` (`ordered`), or by offset loses outright: the
    map's row of its key lies in the dirty section, at a higher offset. Rows are tested in batches
    of up to the map's budget, since Arrow builds the set of the map's keys once per batch."""

    def __init__(self, task: MapTask, dirty: pa.Table | None, ordered: bool) -> None:
        self.budget = task.budget_bytes
        self.dirty = dirty
        self.ordered = ordered
        records = sum(f.record_count for f in task.files) + sum(s.rows for s in task.spills)
        self.won = Members(task.low, task.high, records)
        self.keys: pa.Array | None = None
        #: The map's keys' hashes sorted, the order that sorts them and the bitmap of their low
        #: bits (`_hashed_map`).
        self.hashes: tuple[NDArray[np.uint64], NDArray[np.intp], NDArray[np.bool_]] | None = None
        self.pending: list[pa.Table] = []
        self.pending_bytes = 0
        self.candidates: list[pa.Table] = []

    def add(self, rows: pa.Table) -> None:
        if rows.num_rows == 0:  # no clean row: the set of the map's keys is never built
            return
        self.pending.append(rows)
        self.pending_bytes += rows.nbytes
        if self.pending_bytes >= self.budget:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        rows = pa.concat_tables(self.pending)
        self.pending, self.pending_bytes = [], 0
        if self.dirty is None:
            mapped = np.zeros(rows.num_rows, bool)
        else:
            mapped = bool_mask(pc.is_in(rows.column("key"), value_set=self._map_keys()))
        self.won.add(rows.column("offset").to_numpy()[~mapped])
        if self.ordered and mapped.any():
            self.candidates.append(rows_where(rows, mapped))

    def add_indexed(self, rows: pa.Table, live: NDArray[np.bool_]) -> None:
        """The `live` rows of a cleaned file by its key index (offset, key, hash), by offset: a row
        whose key the map holds loses, the others win. The index's hashes find the candidates and
        their keys are then compared exactly, so the file's Parquet is not decoded nor its keys
        hashed."""
        lost = np.zeros(rows.num_rows, bool)
        if self.dirty is not None and self.dirty.num_rows:
            lost[self._held(rows)] = True
        self.won.add(rows.column("offset").to_numpy()[live & ~lost])

    def _held(self, rows: pa.Table) -> NDArray[np.intp]:
        """The rows of an index whose key the map holds: those whose hash one of the map's keys
        has (a bitmap of the hashes' low bits lets few others through to the binary search),
        each compared with that key (and, where two of the map's keys share the hash, with all
        of them)."""
        keys, ordered, order, bits = self._hashed_map()
        hashes = rows.column(HASH).to_numpy()
        near = np.flatnonzero(bits[(hashes & _SLOT_MASK).astype(np.intp)])
        at = np.minimum(_sorted_search(ordered, hashes[near]), ordered.size - 1)
        hit = ordered[at] == hashes[near]
        candidates, at = near[hit], at[hit]
        same = bool_mask(pc.equal(rows.column("key").take(pa.array(candidates)), keys.take(pa.array(order[at]))))
        shared = ~same & (at + 1 < ordered.size) & (ordered[np.minimum(at + 1, ordered.size - 1)] == hashes[candidates])
        if shared.any():  # two of the map's keys share a hash: compare with the map's set of keys
            again = rows.column("key").take(pa.array(candidates[shared]))
            same[shared] = bool_mask(pc.is_in(again, value_set=keys))
        held: NDArray[np.intp] = candidates[same]
        return held

    def _hashed_map(self) -> tuple[pa.Array, NDArray[np.uint64], NDArray[np.intp], NDArray[np.bool_]]:
        """The map's keys, their hashes sorted, the order that sorts them and the bitmap of their
        low bits (taken once)."""
        keys = self._map_keys()
        if self.hashes is None:
            hashes = key_hash(keys)
            order = np.argsort(hashes)
            bits = np.zeros(_SLOTS, bool)
            bits[(hashes & _SLOT_MASK).astype(np.intp)] = True
            self.hashes = (hashes[order], order, bits)
        return (keys, *self.hashes)

    def _map_keys(self) -> pa.Array:
        """The map's keys in one array (taken once: Arrow builds a set of them per `is_in`)."""
        assert self.dirty is not None
        if self.keys is None:
            self.keys = self.dirty.column("key").combine_chunks()
        return self.keys

    def winners(self) -> OffsetSet:
        """Every winner of the range: the clean rows the map lacks, and the winners of the map's
        keys among the map and the candidates."""
        self.flush()
        parts = ([self.dirty] if self.dirty is not None else []) + self.candidates
        if parts:
            final = latest_per_key(pa.concat_tables(parts)) if self.candidates else parts[0]
            # combined in Arrow's memory, which the map just freed (numpy would concatenate the
            # chunks in malloc's, on top of it: `offset_set._zeroed`)
            self.won.add(final.column("offset").combine_chunks().to_numpy())
        return self.won.result()


def bucket_winners(
    spec: StoreSpec, config: TopicConfig, task: MapTask, fetched: FetchedFiles | None = None
) -> MapResult:
    """One pass-1 task: the winners of `task`'s bucket of keys over its partition's range
    (`fetched`: small files it fetches are kept there for pass 2 in the same task). The dirty
    section's rows go into the map; the cleaned section's are then tested against it."""
    rows = _BucketRows(spec.open(), config, task, fetched)
    offset_map = _Map(task.budget_bytes)
    malformed = 0
    total, read = rows.dirty_records, 0
    try:
        for dirty, covered, bad in rows.dirty():
            offset_map.add(dirty)
            malformed += bad
            read += covered
            projected = math.ceil(offset_map.bytes * total / max(read, 1))
            if projected > task.budget_bytes:  # new keys keep coming at this rate: the map will not fit
                return MapResult(task.partition, task.bucket, needed_bytes=projected)
        offset_map.reduce()
        if offset_map.bytes > task.budget_bytes:
            return MapResult(task.partition, task.bucket, needed_bytes=offset_map.bytes)
        ordered = bool(order_columns(config.compaction_strategy))
        probe = _CleanProbe(task, offset_map.reduced, ordered)
        for clean, bad in rows.clean():
            probe.add(clean)
            malformed += bad
        for index, live in rows.indexed():
            probe.add_indexed(index, live)
        winners = probe.winners()
        if task.winners_path:
            stored = store_offsets(rows.store, rows.prefix, task.winners_path, winners)
            return MapResult(task.partition, task.bucket, None, stored, malformed=malformed, map_bytes=offset_map.bytes)
    except (CorruptSegment, StorageError) as exc:  # the partition fails; the others go on
        return MapResult(task.partition, task.bucket, error=MapFailure.of(exc))
    return MapResult(task.partition, task.bucket, winners, malformed=malformed, map_bytes=offset_map.bytes)


def scatter(spec: StoreSpec, config: TopicConfig, task: ScatterTask) -> Scattered:
    """The scatter step of a partition split into key buckets: the keyed rows of the task's files,
    hashed once, written to one Arrow IPC spill file bucket after bucket (with their hashes when
    the buckets' maps sort by them, `versions.uses_hash`), so that each bucket's task reads only
    its own rows (and the files and keys are read and hashed once, not once per bucket)."""
    store = spec.open()
    prefix = partition_prefix(task.topic, task.partition)
    parts: list[pa.Table] = []
    hashes: list[NDArray[np.uint64]] = []
    malformed = 0
    try:
        for file in task.files:
            rows, bad = _file_rows(store, prefix, file, task.log_start_offset, config)
            parts.append(_hashed(rows))
            hashes.append(parts[-1].column(HASH).to_numpy())
            malformed += bad
    except (CorruptSegment, StorageError) as exc:
        return Scattered(task.partition, task.path, error=MapFailure.of(exc))
    rows = pa.concat_tables(parts)
    buckets = key_buckets(np.concatenate(hashes), task.buckets) if hashes else np.zeros(0, np.uint64)
    if not uses_hash(config.compaction_strategy):  # the buckets' maps keep no hash: spill none
        rows = rows.drop_columns([HASH])
    try:
        spills = write_spill(store, prefix, task.path, rows, buckets, task.buckets)
    except StorageError as exc:
        return Scattered(task.partition, task.path, error=MapFailure.of(exc))
    return Scattered(task.partition, task.path, spills, None, malformed)


def _too_small(budget: MapBudget, topic: str, partition: int, buckets: int) -> MapFailure:
    return MapFailure(
        f"partition {topic}-{partition}: the offset map outgrew log.cleaner.dedupe.buffer.size="
        f"{budget.buffer_bytes} bytes (x log.cleaner.io.buffer.load.factor={budget.load_factor}) even "
        f"split into {buckets} key buckets; raise log.cleaner.dedupe.buffer.size",
        uncleanable=True,
    )


def map_task(topic: str, plan: CompactionInput, budget: MapBudget) -> MapTask:
    """The task of a partition whose map fits one bucket: every file of its range."""
    files = tuple(f for g in plan.groups for f in g.files)
    low, high = _range(plan)
    return MapTask(topic, plan.partition, plan.log_start_offset, low, high, plan.clean_end, files, 0, 1, budget.bytes)


def planned_buckets(plans: Sequence[CompactionInput], budget: MapBudget, parallelism: int) -> dict[int, int]:
    """Each partition's key buckets: as many as the map of its dirty section needs at the planned
    entry size, or more, up to the share of `parallelism` the partition would leave idle, for
    large partitions (in buckets, pass 2 runs a task per group rather than one for the
    partition); a partition split into buckets gets at least `bucketed`'s."""
    spread = max(1, math.ceil(parallelism / max(len(plans), 1)))
    planned = {
        p.partition: max(
            budget.buckets(p.dirty_record_count), min(spread, p.record_count // MIN_PARALLEL_BUCKET_RECORDS)
        )
        for p in plans
    }
    return {p.partition: bucketed(p, budget, planned[p.partition]) for p in plans}


def bucketed(plan: CompactionInput, budget: MapBudget, buckets: int) -> int:
    """The buckets of a partition whose map wants `buckets`: one task streams the cleaned section
    past a map that fits; in key buckets, each bucket holds its share of every row spilled, the
    cleaned section's too, so there are enough buckets for all of them to fit."""
    return 1 if buckets == 1 else max(buckets, budget.buckets(plan.record_count))


def scatter_tasks(
    topic: str, plan: CompactionInput, buckets: int, budget: MapBudget, parallelism: int, run_id: str
) -> list[ScatterTask]:
    """A partition's files in consecutive chunks, each small enough to be held and split at once,
    and at least one per core where the files allow."""
    files = [f for g in plan.groups for f in g.files]
    chunks = min(len(files), max(budget.buckets(plan.record_count), parallelism))
    per_chunk = math.ceil(plan.record_count / chunks)
    tasks: list[ScatterTask] = []
    chunk: list[SegmentFile] = []
    for file in files:
        chunk.append(file)
        if sum(f.record_count for f in chunk) >= per_chunk:
            tasks.append(_scatter_task(topic, plan, chunk, buckets, run_id))
            chunk = []
    if chunk:
        tasks.append(_scatter_task(topic, plan, chunk, buckets, run_id))
    return tasks


def _scatter_task(
    topic: str, plan: CompactionInput, files: list[SegmentFile], buckets: int, run_id: str
) -> ScatterTask:
    return ScatterTask(topic, plan.partition, plan.log_start_offset, tuple(files), buckets, spill_path(run_id, "map"))


def build_offset_map(
    spark: SparkSession,
    spec: StoreSpec,
    topic: str,
    config: TopicConfig,
    plans: Sequence[CompactionInput],
    buckets: dict[int, int],
    budget: MapBudget,
    *,
    parallelism: int,
    run_id: str,
) -> OffsetMap:
    """Run pass 1 for `plans`, each partition split into `buckets[partition]` key buckets: a
    scatter step hashes the keys once and spills them bucket by bucket, then a task per bucket
    builds its map. Partitions whose maps outgrow their budget run again, in as many more buckets
    as the size they reached asks for."""
    result = OffsetMap()
    by_partition = {p.partition: p for p in plans}
    while buckets:
        scatters = [
            t for p, n in buckets.items() for t in scatter_tasks(topic, by_partition[p], n, budget, parallelism, run_id)
        ]
        try:
            again = _scatter_and_map(
                spark, spec, topic, config, scatters, by_partition, buckets, budget, result, run_id
            )
        finally:
            spills = [partition_prefix(topic, t.partition) + t.path for t in scatters]
            winners = [
                partition_prefix(topic, p) + offsets_path(run_id, WINNERS, p, b)
                for p in buckets
                for b in range(buckets[p])
            ]
            spec.open().delete_many(spills + winners)
        buckets = {p: n for p, n in again.items() if p not in result.errors}
    return result


def _scatter_and_map(
    spark: SparkSession,
    spec: StoreSpec,
    topic: str,
    config: TopicConfig,
    scatters: list[ScatterTask],
    plans: dict[int, CompactionInput],
    buckets: dict[int, int],
    budget: MapBudget,
    result: OffsetMap,
    run_id: str,
) -> dict[int, int]:
    """One round of pass 1 in key buckets; returns the partitions to run again, with their buckets."""
    spills, malformed = _scatter(spark, spec, topic, config, scatters, result)
    tasks = [
        MapTask(
            topic,
            p,
            plans[p].log_start_offset,
            *_range(plans[p]),
            plans[p].clean_end,
            (),
            b,
            n,
            budget.bytes,
            spills.get((p, b), ()),
            offsets_path(run_id, WINNERS, p, b),
        )
        for p, n in buckets.items()
        if p not in result.errors
        for b in range(n)
    ]
    outcomes = run_tasks(
        spark,
        tasks,
        partial(bucket_winners, spec, config),
        f"lakecleaner pass 1 (offset map) of {topic}",
        weight=lambda t: sum(s.rows for s in t.spills),
    )
    again: dict[int, int] = {}
    for outcome in outcomes:
        p = outcome.partition
        if outcome.error is not None:
            result.errors.setdefault(p, outcome.error)
        elif outcome.needed_bytes:
            wanted = more_buckets(buckets[p], outcome.needed_bytes, budget)
            if wanted > max(plans[p].record_count, 1):
                result.errors[p] = _too_small(budget, topic, p, buckets[p])
            again[p] = max(again.get(p, 0), wanted)
    done = [p for p in buckets if p not in result.errors and p not in again]
    ranges = {p: _range(plans[p]) for p in done}
    united = _united_winners(spec, topic, [o for o in outcomes if o.partition in done], ranges, result)
    for p in done:
        if p in result.errors:
            continue
        result.kept[p] = united[p].result()
        result.buckets[p] = buckets[p]
        result.malformed[p] = malformed.get(p, 0)
        result.map_bytes[p] = max(o.map_bytes for o in outcomes if o.partition == p)
    return again


def _united_winners(
    spec: StoreSpec, topic: str, outcomes: list[MapResult], ranges: dict[int, tuple[int, int]], result: OffsetMap
) -> dict[int, Members]:
    """Each partition's winners over its range [low, high), its buckets' sets joined as they arrive
    (every bucket task of a round writes its set to the store, `MapTask.winners_path`): read back
    at once (under lake.storage.max_concurrency, `WINNERS_READ_BYTES` at a time), so that the
    driver holds a partition's union (a bit per offset of a dense range) and the sets in flight,
    never every bucket's at once, and afterwards the union alone (`memory.trim_heap_tops`: the
    files' buffers are freed into the reading threads' heaps). A partition whose file cannot be
    read goes to `result.errors`."""
    store = spec.open()
    stored = [(o.partition, o.stored) for o in outcomes if o.stored is not None]
    united = {p: Members(*ranges[p], sum(s.empty.count for q, s in stored if q == p)) for p in {p for p, _ in stored}}

    def read(item: tuple[int, StoredOffsets]) -> OffsetSet | MapFailure:
        try:
            return load_offsets(store, partition_prefix(topic, item[0]), item[1])
        except StorageError as exc:
            return MapFailure.of(exc)

    limit = spec.settings.max_concurrency
    sizes = [s.size for _, s in stored]
    trim_heap_tops()
    for index, found in map_bounded(read, stored, sizes, WINNERS_READ_BYTES, limit, limit):
        partition = stored[index][0]
        if isinstance(found, MapFailure):
            result.errors.setdefault(partition, found)
        elif partition not in result.errors:
            united[partition].join(found)
    if stored:
        give_back()  # what the files' buffers left in the I/O threads' malloc arenas (`engine.memory`)
    return united


def _scatter(
    spark: SparkSession,
    spec: StoreSpec,
    topic: str,
    config: TopicConfig,
    scatters: list[ScatterTask],
    result: OffsetMap,
) -> tuple[dict[tuple[int, int], tuple[Spill, ...]], dict[int, int]]:
    """The scatter step: each (partition, bucket)'s spills, and each partition's malformed version
    headers; partitions whose files cannot be read go to `result.errors`."""
    scattered = run_tasks(
        spark,
        scatters,
        partial(scatter, spec, config),
        f"lakecleaner pass 1 (scatter keys) of {topic}",
        weight=lambda t: sum(f.size_bytes for f in t.files),
        overlap=Overlap.of(spec),
    )
    malformed: dict[int, int] = {}
    spills: dict[tuple[int, int], tuple[Spill, ...]] = {}
    for found in scattered:
        if found.error is not None:
            result.errors.setdefault(found.partition, found.error)
            continue
        malformed[found.partition] = malformed.get(found.partition, 0) + found.malformed
        for b, spill in enumerate(found.spills):
            spills[(found.partition, b)] = (*spills.get((found.partition, b), ()), spill)
    return spills, malformed


def _range(plan: CompactionInput) -> tuple[int, int]:
    """The offsets [low, high) the partition's groups span."""
    return plan.groups[0].base_offset, plan.groups[-1].next_offset


def more_buckets(buckets: int, needed_bytes: int, budget: MapBudget) -> int:
    """The buckets for a partition whose map, split into `buckets`, reached `needed_bytes` in one
    of them: enough for that size, and one more share for the spread between buckets."""
    return buckets * (math.ceil(needed_bytes / budget.bytes) + 1)
