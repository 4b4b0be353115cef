"""Pass 2, Kafka's recopy (`Cleaner.cleanSegments`, DESIGN section 5): one Spark task per
output group reads the group's files with pyarrow, keeps the rows whose offsets won pass 1,
and writes them to one new file.

The record rule (`shouldRetainRecord`, KIP-534 for tombstones) for a row of [log start, U):
kept iff it is its key's winner and not an expired tombstone. A tombstone winner without a
horizon gets delete_horizon_ms = now + delete.retention.ms and is kept; one whose horizon
≤ now is removed. Unkeyed rows and rows below the log start are dropped. Offsets and order
never change.

★ A group in which nothing changes (every row a winner, no tombstone to stamp or expire)
keeps its files: no rewrite. That is decided before writing, from the winner count and the
manifest's tombstone count, reading at most the delete_horizon_ms column.

While it holds a group's input, the task also settles what the group must hold, for the quality
gate (`gate_rows.Expected`), so the gate need not read the input again.

Each task gets its group's winning offsets from pass 1 as an `OffsetSet`: a partition in key
buckets as a file the driver wrote for the group (`offsets_file.KEPT`), beside which the task
writes what the group must hold for the gate (`offsets_file.EXPECTED`), so that neither travels
through Spark (a bit per offset of a large partition, in the closure every worker unpickles and
the results the JVM collects). A partition whose offset map fits one task is cleaned by one
task, pass 1 and then its groups (`PartitionTask`), with no Spark job and no trip through the
driver between the passes; when its output fits one key bucket too, the same task then reads it
back for the quality gate (`gate_in_task`), so the gate costs no Spark job of its own.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray
from pyspark.sql import SparkSession

from lakecleaner.config import LONG_MAX, TopicConfig
from lakecleaner.engine.gate_rows import (
    Expectation,
    Expected,
    GateGroup,
    GateOutcome,
    GateRules,
    GateTask,
    gate_buckets,
    gate_check,
)
from lakecleaner.engine.keys import in_sorted, rows_where
from lakecleaner.engine.offset_map import (
    MapFailure,
    MapResult,
    MapTask,
    bucket_winners,
    parsed_files,
    read_by_index,
)
from lakecleaner.engine.offset_set import OffsetSet
from lakecleaner.engine.offsets_file import EXPECTED, KEPT, StoredOffsets, load_offsets, offsets_path, store_offsets
from lakecleaner.engine.sparkio import Overlap, run_tasks
from lakecleaner.engine.storage import StoreSpec
from lakecleaner.engine.writer import OutputTarget, SegmentWriter
from lakecleaner.errors import CorruptSegment, LakeCleanerError, StorageError
from lakecleaner.io import ObjectStore
from lakecleaner.io.base import ObjectInfo
from lakecleaner.io.concurrent import map_ordered
from lakecleaner.log.deletion_vectors import read_vector, write_vector
from lakecleaner.log.layout import partition_prefix
from lakecleaner.log.manifest import SegmentFile
from lakecleaner.log.segment_files import WHOLE_OBJECT_BYTES, FetchedFiles, read_segment_file, read_segment_row_groups
from lakecleaner.policy.cleanable import deadline_passed, erasure_due

UNCHANGED, VECTORED, REWRITTEN, CORRUPT, ERROR = "unchanged", "vectored", "rewritten", "corrupt", "error"

#: Bytes of small files a partition's task keeps between pass 1 and pass 2 (`FetchedFiles`): a
#: partition of files this small is cleaned with one GET per file; larger ones read them twice.
FETCHED_BYTES = 32 * 1024 * 1024
#: Bytes of the columns pass 1 parsed (keys and offsets) that a partition's task keeps for
#: pass 2 (`FetchedFiles.keep_columns`): about 27 bytes a record of 15-byte keys, so the keys and
#: offsets of 2.4M records; pass 2 parses them again for the files past that.
KEPT_COLUMNS_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class RecopyTask:
    """One group of one partition, as a pass-2 task sees it."""

    index: int
    partition: int
    log_start_offset: int
    files: tuple[SegmentFile, ...]
    #: The records the group's files hold for readers (without those their deletion vectors remove).
    record_count: int
    tombstone_count: int
    target: OutputTarget
    #: The group's share of pass 1's winners, or where the driver wrote it (`offsets_file.KEPT`).
    kept: OffsetSet | StoredOffsets | None = None
    #: Where the task writes what the group must hold, for the gate (`offsets_file.EXPECTED`):
    #: set with a stored share; empty, the expectation comes back with the result.
    expected_path: str = ""
    #: The topic's `lakecleaner.rewrite.dead.ratio` where deletion vectors may serve (0: never).
    dead_ratio: float = 0.0
    #: When the records this clean supersedes must be physically gone (KIP-354; None: the topic
    #: has no max.compaction.lag.ms): a vector may remove them only while it is ahead.
    erase_by_ms: int | None = None


@dataclass
class RowCounts:
    """What the record rule did to a group's rows."""

    superseded: int = 0
    unkeyed: int = 0
    below_log_start: int = 0
    tombstones_stamped: int = 0
    tombstones_removed: int = 0


@dataclass(frozen=True)
class GroupResult:
    """A pass-2 task's outcome. `file` is the written file (None: unchanged, emptied or failed);
    `expected` is what the group must hold, for the quality gate (`gate_rows`)."""

    task: int
    status: str
    error: str | None = None
    file: SegmentFile | None = None
    tombstone_count: int = 0
    earliest_delete_horizon_ms: int | None = None
    counts: RowCounts = field(default_factory=RowCounts)
    expected: Expectation = field(default_factory=Expectation)
    #: A vectored group's files, each with the deletion vector of every record removed from it.
    vectored: tuple[SegmentFile, ...] = ()
    #: The deletion vectors the task wrote for them.
    vectors_written: tuple[str, ...] = ()

    @property
    def written(self) -> tuple[str, ...]:
        """The objects the task wrote: the group's new file, or the new deletion vectors of its files."""
        return self.vectors_written if self.file is None else (self.file.path,)


def clean_rows(
    table: pa.Table, kept: NDArray[np.int64], log_start: int, now_ms: int, horizon_ms: int, counts: RowCounts
) -> tuple[pa.Table, NDArray[np.bool_]]:
    """The record rule on rows of one file (a row group); `kept` holds the winning offsets,
    sorted. Returns the rows kept and which of `table`'s rows they are."""
    offsets = table.column("offset").to_numpy()
    won = in_sorted(offsets, kept)
    in_range = offsets >= log_start
    keyed = pc.is_valid(table.column("key")).to_numpy()
    tombstone = pc.is_null(table.column("value")).to_numpy()
    horizon = table.column("delete_horizon_ms")
    has_horizon = pc.is_valid(horizon).to_numpy()
    horizons = pc.fill_null(horizon, 0).to_numpy()
    won &= in_range & keyed
    expired = tombstone & has_horizon & (horizons <= now_ms)
    keep = won & ~expired
    stamp = keep & tombstone & ~has_horizon
    counts.below_log_start += int((~in_range).sum())
    counts.unkeyed += int((in_range & ~keyed).sum())
    counts.superseded += int((in_range & keyed & ~won).sum())
    counts.tombstones_removed += int((won & expired).sum())
    counts.tombstones_stamped += int(stamp.sum())
    if stamp.any():
        stamped = pa.array(np.where(stamp, horizon_ms, horizons), pa.int64(), mask=~(has_horizon | stamp))
        table = table.set_column(table.schema.get_field_index("delete_horizon_ms"), "delete_horizon_ms", stamped)
    return rows_where(table, keep), keep


def _tombstones_change(store: ObjectStore, task: RecopyTask, now_ms: int, fetched: FetchedFiles | None) -> bool:
    """Whether a group whose rows all won would still change: a tombstone without a horizon (to
    stamp) or with one that has passed (to remove: KIP-534, and physically, so one a deletion
    vector hides counts too). Horizons are set only on tombstones; the files are read as stored,
    as `tombstone_count` counts them."""
    if task.tombstone_count == 0:
        return False
    stamped, earliest = 0, None
    for file in task.files:
        key = task.target.prefix + file.path
        table = read_segment_file(
            store, key, columns=["delete_horizon_ms"], expected=file, fetched=fetched, physical=True
        )
        horizon = table.column("delete_horizon_ms")
        stamped += len(horizon) - horizon.null_count
        low = pc.min(horizon).as_py()
        earliest = low if earliest is None or (low is not None and low < earliest) else earliest
    return stamped < task.tombstone_count or (earliest is not None and earliest <= now_ms)


def recopy_group(
    store: ObjectStore,
    task: RecopyTask,
    kept: NDArray[np.int64],
    now_ms: int,
    retention_ms: int,
    fetched: FetchedFiles | None,
    max_workers: int,
) -> GroupResult:
    """Clean one group into one new file (or none, when nothing changes or nothing is kept),
    and settle what the group must hold for the quality gate (`fetched`: what this task fetched
    and parsed before; a group it rewrites has its files fetched there at once first, at most
    `max_workers` (lake.storage.max_concurrency) requests at a time, since pass 1 fetches only
    the files it decodes, `offset_map.parsed_files`)."""
    due = any(erasure_due(f, now_ms) for f in task.files)  # KIP-354: rewritten, whatever else
    if not due:
        all_won = kept.size == task.record_count
        if (all_won or _removable_by_vectors(task, kept, now_ms)) and not _tombstones_change(
            store, task, now_ms, fetched
        ):
            return GroupResult(task.index, UNCHANGED) if all_won else _vectored(store, task, kept, fetched)
    if fetched is not None:
        fetched.prefetch(store, [(task.target.prefix + f.path, f.size_bytes) for f in task.files], max_workers)
    horizon_ms = min(now_ms + retention_ms, LONG_MAX)
    writer = SegmentWriter(store, task.target, whole=sum(f.size_bytes for f in task.files) <= WHOLE_OBJECT_BYTES)
    counts = RowCounts()
    expected = Expected(GateRules(now_ms, horizon_ms), task.target.base_offset, task.target.next_offset)
    try:
        for file in task.files:
            key = task.target.prefix + file.path
            for table in read_segment_row_groups(store, key, expected=file, fetched=fetched):
                cleaned, rows = clean_rows(table, kept, task.log_start_offset, now_ms, horizon_ms, counts)
                writer.write(cleaned)
                expected.add(table, kept, task.log_start_offset, taken=(rows, cleaned))
        written = writer.close()
    except BaseException:
        with contextlib.suppress(OSError, LakeCleanerError):  # the storage may be what failed: keep the cause
            writer.abort()
        raise
    stats = writer.meta().stats
    return GroupResult(
        task.index,
        REWRITTEN,
        None,
        written,
        stats.tombstone_count,
        stats.earliest_delete_horizon_ms,
        counts,
        expected.result(),
    )


def vector_ratio(config: TopicConfig) -> float:
    """The share of a group's stored records below which a clean removes its lost records by
    deletion vectors: `lakecleaner.rewrite.dead.ratio`, but never above min.cleanable.dirty.ratio,
    since a vector's dead bytes count as dirty (`CleanableRange.dead_bytes`): a partition made due
    by them then has a group past the ratio, which its clean rewrites, rather than being due again
    at every run."""
    return min(config.lakecleaner_rewrite_dead_ratio, config.min_cleanable_dirty_ratio)


def _removable_by_vectors(task: RecopyTask, kept: NDArray[np.int64], now_ms: int) -> bool:
    """Whether the clean may remove the group's records that lost by deletion vectors instead of
    rewriting its files (issue 79): while the records removed, with those its vectors removed
    before, stay below `dead_ratio` of the records its files store, and the deadline by which
    they must be physically gone (KIP-354) is still ahead: the rewrite then comes by that
    deadline (`policy.cleanable.erasure_due`, the planner's `vector_erasure` trigger). Delta's
    and Iceberg's merge-on-read rule; Kafka rewrites every group (its `min.cleanable.dirty.ratio` decides only
    whether the log is cleaned at all)."""
    stored = sum(f.record_count for f in task.files)
    return (
        task.dead_ratio > 0
        and stored > 0
        and (stored - kept.size) / stored < task.dead_ratio
        and not deadline_passed(task.erase_by_ms, now_ms)
    )


def _vectored(
    store: ObjectStore, task: RecopyTask, kept: NDArray[np.int64], fetched: FetchedFiles | None
) -> GroupResult:
    """The group's files kept, each whose records not kept grew with a new deletion vector of
    them (a vector names every removed position, those of the file's vector before included: a
    record that lost stays lost), due for erasure by the earlier of the old vector's deadline and
    this clean's. Reads each file's offsets only (and its old vector, when records below the log
    start are among those removed: `_newly_below_log_start`)."""
    files: list[SegmentFile] = []
    written: list[str] = []
    counts = RowCounts()
    for file in task.files:
        key = task.target.prefix + file.path
        stored = read_segment_file(store, key, columns=["offset"], expected=file, fetched=fetched, physical=True)
        offsets = stored.column("offset").to_numpy()
        dead = np.flatnonzero(~in_sorted(offsets, kept))
        old = file.deletion_vector
        before = old.cardinality if old is not None else 0
        if len(dead) == before:
            files.append(file)
            continue
        version = task.target.manifest_version
        erase_by = _earlier(task.erase_by_ms, None if old is None else old.erase_by_ms)
        vector = write_vector(store, task.target.prefix, file.path, version, dead, erase_by)
        files.append(dataclasses.replace(file, deletion_vector=vector))
        written.append(vector.path)
        below = _newly_below_log_start(store, task, file, offsets, dead)
        counts.below_log_start += below
        counts.superseded += len(dead) - before - below
    return GroupResult(
        task.index,
        VECTORED,
        tombstone_count=task.tombstone_count,
        counts=counts,
        vectored=tuple(files),
        vectors_written=tuple(written),
    )


def _newly_below_log_start(
    store: ObjectStore, task: RecopyTask, file: SegmentFile, offsets: NDArray[np.int64], dead: NDArray[np.int64]
) -> int:
    """How many of the positions `dead` (of the file's stored rows, at `offsets`) that its old
    vector did not remove lie below the log start: the clean drops them as Kafka's does
    (`below_log_start_dropped`), not as superseded. The old vector is read only when some do."""
    below = dead[offsets[dead] < task.log_start_offset]
    if not below.size or file.deletion_vector is None:
        return int(below.size)
    removed = read_vector(store, task.target.prefix, file.deletion_vector, file.record_count)
    return int((~in_sorted(below, removed)).sum())


def _earlier(a: int | None, b: int | None) -> int | None:
    """The earlier of two deadlines (None: none)."""
    return b if a is None else a if b is None else min(a, b)


def _run(
    spec: StoreSpec, now_ms: int, retention_ms: int, task: RecopyTask, fetched: FetchedFiles | None = None
) -> GroupResult:
    store = spec.open()
    try:
        kept = _kept(store, task).offsets()
        result = recopy_group(store, task, kept, now_ms, retention_ms, fetched, spec.settings.max_concurrency)
        return _expectation_stored(store, task, result)
    except CorruptSegment as exc:
        return GroupResult(task.index, CORRUPT, str(exc))
    except LakeCleanerError as exc:
        return GroupResult(task.index, ERROR, f"{type(exc).__name__}: {exc}")
    except OSError as exc:  # pyarrow's filesystem failed writing the output (after its retries)
        location = spec.open().location(task.target.prefix + task.target.path)
        return GroupResult(task.index, ERROR, f"StorageError: write {location}: {str(exc)[:300]}")


def _kept(store: ObjectStore, task: RecopyTask) -> OffsetSet:
    """The group's share of the winners, read from the store when the driver wrote it there."""
    assert task.kept is not None
    if isinstance(task.kept, StoredOffsets):
        return load_offsets(store, task.target.prefix, task.kept)
    return task.kept


def _expectation_stored(store: ObjectStore, task: RecopyTask, result: GroupResult) -> GroupResult:
    """`result`, its expected offsets written to `task.expected_path` when it has one."""
    offsets = result.expected.offsets
    if not task.expected_path or not isinstance(offsets, OffsetSet):
        return result
    stored = store_offsets(store, task.target.prefix, task.expected_path, offsets)
    return dataclasses.replace(result, expected=dataclasses.replace(result.expected, offsets=stored))


@dataclass(frozen=True)
class PartitionTask:
    """A partition whose offset map fits one task: pass 1 over its range, then pass 2 of each of
    its groups, in that one task (no Spark job between the passes, no winners through the driver)."""

    map: MapTask
    groups: tuple[RecopyTask, ...]


@dataclass(frozen=True)
class TaskGate:
    """The quality gate's read-back of a partition by the PartitionTask that staged its output
    (`gate_in_task`): the violations found, and each staged file as the store had it just before
    it was read back (None: missing). The run takes this verdict only for staged files that are
    still those; otherwise its gate job reads them again."""

    outcome: GateOutcome
    staged: dict[str, ObjectInfo | None]


@dataclass(frozen=True)
class PartitionOutcome:
    """A PartitionTask's pass 1, its groups' results (none when pass 1 failed or outgrew its
    budget) and, when the task read its output back, the gate's findings."""

    map: MapResult
    groups: tuple[GroupResult, ...] = ()
    gate: TaskGate | None = None


def clean_partition(
    spec: StoreSpec, config: TopicConfig, now_ms: int, retention_ms: int, task: PartitionTask
) -> PartitionOutcome:
    """Pass 1 of a partition in one key bucket, then pass 2 of each of its groups (the small files
    are fetched at once before pass 1 and kept for pass 2, `FETCHED_BYTES`, `_to_prefetch`), then the gate's
    read-back of the output where it fits one key bucket (a group that keeps its files from the
    keys and offsets pass 1 parsed of them, the staged files from the store). A store that fails the fetch fails the
    partition (`MapFailure`), not the Spark job and with it every other partition of the run."""
    fetched = FetchedFiles(FETCHED_BYTES, KEPT_COLUMNS_BYTES)
    prefix = partition_prefix(task.map.topic, task.map.partition)
    files = [(prefix + f.path, f.size_bytes) for f in _to_prefetch(spec, config, task.map)]
    try:
        fetched.prefetch(spec.open(), files, spec.settings.max_concurrency)
    except StorageError as exc:
        return PartitionOutcome(MapResult(task.map.partition, 0, error=MapFailure.of(exc)))
    found = bucket_winners(spec, config, task.map, fetched)
    if found.winners is None:
        return PartitionOutcome(found)
    groups = tuple(_run(spec, now_ms, retention_ms, g, fetched) for g in group_tasks(task.groups, found.winners))
    return PartitionOutcome(found, groups, gate_in_task(spec, GateRules.of(config, now_ms), task, groups, fetched))


def _to_prefetch(spec: StoreSpec, config: TopicConfig, task: MapTask) -> list[SegmentFile]:
    """The files a partition's task fetches before pass 1, in order while `FETCHED_BYTES` allows:
    those pass 1 decodes (`offset_map.parsed_files`), then, on a store far away, the others, whose
    groups deletion vectors may keep (a GET each rather than a footer's and a column's ranges when
    pass 2 reads their horizons). On a local lake a file read later costs no more than one read
    now: those are left (the incremental bench's cleaned files, 32 MB a partition read for
    nothing)."""
    if spec.local:
        return parsed_files(task, config)
    return sorted(task.files, key=partial(read_by_index, task, config))  # stable: those pass 1 decodes first


def gate_groups(tasks: Sequence[RecopyTask], results: Sequence[GroupResult]) -> tuple[GateGroup, ...]:
    """A partition's groups as the new log would hold them, for the quality gate: a group that
    keeps its files is read from them, a rewritten one from its staged file (none when it keeps
    no record)."""
    groups = []
    for task, result in zip(tasks, results, strict=True):
        reused = result.status in (UNCHANGED, VECTORED)
        files = result.vectored or task.files if reused else tuple(f for f in [result.file] if f is not None)
        target = task.target
        groups.append(
            GateGroup(target.base_offset, target.next_offset, files, reused, task.tombstone_count, result.expected)
        )
    return tuple(groups)


def gate_in_task(
    spec: StoreSpec,
    rules: GateRules,
    task: PartitionTask,
    results: Sequence[GroupResult],
    fetched: FetchedFiles | None = None,
) -> TaskGate | None:
    """The quality gate's read-back of a partition whose output fits one key bucket, by the task
    that staged it: no Spark job of its own, no second wave of tasks, and each file read back by
    the worker that wrote it. Each staged file's HEAD is taken first: a file replaced at any time
    after it has another version tag when the run takes the verdict, and the run's gate job reads
    it again. None (the gate job checks the partition) when a group failed, when the output needs
    several key buckets (`gate_buckets`), or when a HEAD failed."""
    if any(r.error is not None for r in results):
        return None
    groups = gate_groups(task.groups, results)
    if gate_buckets(groups, task.map.budget_bytes) > 1:
        return None
    store = spec.open()
    prefix = partition_prefix(task.map.topic, task.map.partition)
    try:
        staged = {
            path: store.stat_if_present(prefix + path) for path in sorted({p for r in results for p in r.written})
        }
    except StorageError:
        return None
    gate = GateTask(task.map.partition, prefix, groups, task.map.clean_end)
    return TaskGate(gate_check(spec, rules, gate, fetched), staged)


def _clean(
    spec: StoreSpec, config: TopicConfig, now_ms: int, retention_ms: int, item: RecopyTask | PartitionTask
) -> GroupResult | PartitionOutcome:
    if isinstance(item, PartitionTask):
        return clean_partition(spec, config, now_ms, retention_ms, item)
    return _run(spec, now_ms, retention_ms, item)


def _weight(item: RecopyTask | PartitionTask) -> int:
    """Bytes a task reads: a partition's files once when they fit what it keeps between its
    passes (`FETCHED_BYTES`), else pass 1 reads the keys, about a fifth of a file, again."""
    if isinstance(item, PartitionTask):
        size = sum(f.size_bytes for f in item.map.files)
        return size if size <= FETCHED_BYTES else size * 6 // 5
    return sum(f.size_bytes for f in item.files)


def group_tasks(tasks: Sequence[RecopyTask], winners: OffsetSet) -> list[RecopyTask]:
    """Group tasks of one partition, each with its group's share of the partition's winners."""
    shares = winners.split([(t.target.base_offset, t.target.next_offset) for t in tasks])
    return [dataclasses.replace(t, kept=share) for t, share in zip(tasks, shares, strict=True)]


def stored_group_tasks(
    store: ObjectStore, run_id: str, tasks: Sequence[RecopyTask], winners: OffsetSet, max_concurrency: int
) -> list[RecopyTask]:
    """Group tasks of a partition in key buckets: each group's share of the winners written to the
    store at once (under lake.storage.max_concurrency) and named in its task, with where the task
    writes the group's expected offsets (`offsets_file`). Raises StorageError when a write fails."""

    def stored(task: RecopyTask) -> RecopyTask:
        assert isinstance(task.kept, OffsetSet)
        kept, expected = _group_offsets_paths(run_id, task)
        return dataclasses.replace(
            task, kept=store_offsets(store, task.target.prefix, kept, task.kept), expected_path=expected
        )

    return map_ordered(stored, group_tasks(tasks, winners), max_concurrency)


def offsets_files(run_id: str, tasks: Sequence[RecopyTask]) -> list[str]:
    """The keys of the offsets files of a partition's group tasks in key buckets: the shares
    `stored_group_tasks` writes and the expected offsets the tasks write beside them."""
    return [task.target.prefix + path for task in tasks for path in _group_offsets_paths(run_id, task)]


def _group_offsets_paths(run_id: str, task: RecopyTask) -> tuple[str, str]:
    """Where a group task's share of the winners and its expected offsets go, relative to the
    partition (`offsets_file.KEPT`, `offsets_file.EXPECTED`)."""
    return offsets_path(run_id, KEPT, task.partition, task.index), offsets_path(
        run_id, EXPECTED, task.partition, task.index
    )


def run_recopy(
    spark: SparkSession,
    spec: StoreSpec,
    config: TopicConfig,
    items: Sequence[RecopyTask | PartitionTask],
    now_ms: int,
    retention_ms: int,
) -> list[GroupResult | PartitionOutcome]:
    """Run pass 2 (with pass 1, for PartitionTasks) over `items`; one result per item, in order."""
    clean = partial(_clean, spec, config, now_ms, retention_ms)
    return run_tasks(spark, items, clean, "lakecleaner pass 2 (recopy)", weight=_weight, overlap=Overlap.of(spec))
