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

The kept offsets reach a task either by broadcast (each partition's sorted offsets) or, when
they are too many, by a shuffle join: the winners are tagged with their group and grouped with
one marker row per group, so a group that keeps nothing still gets its task.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, fields
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray
from pyspark import Broadcast
from pyspark.sql import SparkSession

from lakecleaner.config import LONG_MAX
from lakecleaner.engine.gate_rows import Expectation, Expected, GateRules
from lakecleaner.engine.keys import in_sorted
from lakecleaner.engine.offset_map import OffsetMap
from lakecleaner.engine.sparkio import collect_tasks, ddl
from lakecleaner.engine.storage import StoreSpec
from lakecleaner.engine.writer import OutputTarget, SegmentWriter
from lakecleaner.errors import CorruptSegment, LakeCleanerError
from lakecleaner.io import ObjectStore
from lakecleaner.log.manifest import SegmentFile
from lakecleaner.log.segment_files import read_segment_file

UNCHANGED, REWRITTEN, CORRUPT, ERROR = "unchanged", "rewritten", "corrupt", "error"


@dataclass(frozen=True)
class RecopyTask:
    """One group of one partition, as a pass-2 task sees it."""

    index: int
    partition: int
    log_start_offset: int
    files: tuple[SegmentFile, ...]
    record_count: int
    tombstone_count: int
    target: OutputTarget


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

    def to_row(self) -> dict[str, Any]:
        """The RESULT_SCHEMA row of the shuffle-join path, without the expected offsets: that
        mode is for runs whose offsets would crowd the driver (the gate then checks their count
        and digest)."""
        f = self.file
        return {
            "task": self.task,
            "status": self.status,
            "error": self.error,
            "path": None if f is None else f.path,
            "base_offset": None if f is None else f.base_offset,
            "next_offset": None if f is None else f.next_offset,
            "record_count": None if f is None else f.record_count,
            "size_bytes": None if f is None else f.size_bytes,
            "tombstone_count": self.tombstone_count,
            "earliest_delete_horizon_ms": self.earliest_delete_horizon_ms,
            **asdict(self.counts),
            "expected_count": self.expected.count,
            "expected_offsets_digest": self.expected.offsets_digest,
            "expected_records": self.expected.records,
            "expected_horizons": self.expected.horizons,
        }

    @staticmethod
    def from_row(row: dict[str, Any]) -> GroupResult:
        file = None
        if row["path"] is not None:
            file = SegmentFile(
                row["path"], row["base_offset"], row["next_offset"], row["record_count"], row["size_bytes"]
            )
        counts = RowCounts(**{f.name: row[f.name] for f in fields(RowCounts)})
        return GroupResult(
            row["task"],
            row["status"],
            row["error"],
            file,
            row["tombstone_count"],
            row["earliest_delete_horizon_ms"],
            counts,
            Expectation(
                row["expected_count"],
                row["expected_offsets_digest"],
                records=row["expected_records"],
                horizons=row["expected_horizons"],
            ),
        )


RESULT_SCHEMA = pa.schema(
    [
        ("task", pa.int32()),
        ("status", pa.string()),
        ("error", pa.string()),
        ("path", pa.string()),
        ("base_offset", pa.int64()),
        ("next_offset", pa.int64()),
        ("record_count", pa.int64()),
        ("size_bytes", pa.int64()),
        ("tombstone_count", pa.int64()),
        ("earliest_delete_horizon_ms", pa.int64()),
        *[(f.name, pa.int64()) for f in fields(RowCounts)],
        ("expected_count", pa.int64()),
        ("expected_offsets_digest", pa.string()),
        ("expected_records", pa.string()),
        ("expected_horizons", pa.string()),
    ]
)
RESULT_DDL = ddl(RESULT_SCHEMA)


def clean_rows(
    table: pa.Table, kept: NDArray[np.int64], log_start: int, now_ms: int, horizon_ms: int, counts: RowCounts
) -> pa.Table:
    """The record rule on one file's rows; `kept` holds the winning offsets, sorted."""
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
    return table.filter(pa.array(keep))


def _tombstones_change(store: ObjectStore, task: RecopyTask, now_ms: int) -> bool:
    """Whether a group whose rows all won would still change: a tombstone without a horizon (to
    stamp) or with one that has passed (to remove). Horizons are set only on tombstones."""
    if task.tombstone_count == 0:
        return False
    stamped, earliest = 0, None
    for file in task.files:
        horizon = read_segment_file(
            store, task.target.prefix + file.path, columns=["delete_horizon_ms"], expected=file
        ).column("delete_horizon_ms")
        stamped += len(horizon) - horizon.null_count
        low = pc.min(horizon).as_py()
        earliest = low if earliest is None or (low is not None and low < earliest) else earliest
    return stamped < task.tombstone_count or (earliest is not None and earliest <= now_ms)


def recopy_group(
    store: ObjectStore, task: RecopyTask, kept: NDArray[np.int64], now_ms: int, retention_ms: int
) -> GroupResult:
    """Clean one group into one new file (or none, when nothing changes or nothing is kept),
    and settle what the group must hold for the quality gate."""
    if kept.size == task.record_count and not _tombstones_change(store, task, now_ms):
        return GroupResult(task.index, UNCHANGED)
    horizon_ms = min(now_ms + retention_ms, LONG_MAX)
    writer = SegmentWriter(store, task.target)
    counts = RowCounts()
    expected = Expected(GateRules(now_ms, horizon_ms))
    try:
        for file in task.files:
            table = read_segment_file(store, task.target.prefix + file.path, expected=file)
            writer.write(clean_rows(table, kept, task.log_start_offset, now_ms, horizon_ms, counts))
            expected.add(table, kept, task.log_start_offset)
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


def _run(spec: StoreSpec, now_ms: int, retention_ms: int, task: RecopyTask, kept: NDArray[np.int64]) -> GroupResult:
    try:
        return recopy_group(spec.open(), task, kept, now_ms, retention_ms)
    except CorruptSegment as exc:
        return GroupResult(task.index, CORRUPT, str(exc))
    except LakeCleanerError as exc:
        return GroupResult(task.index, ERROR, f"{type(exc).__name__}: {exc}")
    except OSError as exc:  # pyarrow's filesystem failed writing the output (after its retries)
        location = spec.open().location(task.target.prefix + task.target.path)
        return GroupResult(task.index, ERROR, f"StorageError: write {location}: {str(exc)[:300]}")


def _broadcast_task(
    spec: StoreSpec, now_ms: int, retention_ms: int, kept: Broadcast[dict[int, NDArray[np.int64]]], task: RecopyTask
) -> GroupResult:
    offsets = kept.value[task.partition]
    lo, hi = np.searchsorted(offsets, [task.target.base_offset, task.target.next_offset])
    return _run(spec, now_ms, retention_ms, task, offsets[lo:hi])


def _grouped_task(
    spec: StoreSpec, now_ms: int, retention_ms: int, tasks: Sequence[RecopyTask]
) -> Callable[[pa.Table], pa.Table]:
    """The applyInArrow function of the shuffle join: one task's winners (and its marker row).
    A plain annotated function, as applyInArrow infers its form from the type hints."""
    by_index = list(tasks)

    def run_group(table: pa.Table) -> pa.Table:
        offsets = table.column("offset").to_numpy()
        task = by_index[int(table.column("task")[0].as_py())]
        result = _run(spec, now_ms, retention_ms, task, np.sort(offsets[offsets >= 0]))
        return pa.Table.from_pylist([result.to_row()], schema=RESULT_SCHEMA)

    return run_group


class _TagGroups:
    """mapInArrow function tagging (partition, offset) winners with their pass-2 task."""

    def __init__(self, tasks: Sequence[RecopyTask]) -> None:
        self.bounds: dict[int, tuple[NDArray[np.int64], NDArray[np.int32]]] = {}
        for partition in {t.partition for t in tasks}:
            mine = sorted((t for t in tasks if t.partition == partition), key=lambda t: t.target.base_offset)
            self.bounds[partition] = (
                np.array([t.target.base_offset for t in mine], np.int64),
                np.array([t.index for t in mine], np.int32),
            )

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            partitions = batch.column("partition").to_numpy()
            offsets = batch.column("offset").to_numpy()
            task = np.zeros(len(offsets), np.int32)
            for partition in np.unique(partitions).tolist():
                rows = partitions == partition
                bases, ids = self.bounds[partition]
                task[rows] = ids[np.searchsorted(bases, offsets[rows], side="right") - 1]
            yield pa.RecordBatch.from_arrays([pa.array(task), batch.column("offset")], names=["task", "offset"])


def run_recopy(
    spark: SparkSession,
    spec: StoreSpec,
    tasks: Sequence[RecopyTask],
    offset_map: OffsetMap,
    now_ms: int,
    retention_ms: int,
) -> list[GroupResult]:
    """Run pass 2 over `tasks`; one result per task, in task order."""
    if not tasks:
        return []
    spark.sparkContext.setJobDescription("lakecleaner pass 2 (recopy)")
    if offset_map.kept is not None:
        kept = spark.sparkContext.broadcast(offset_map.kept)
        return collect_tasks(spark, tasks, partial(_broadcast_task, spec, now_ms, retention_ms, kept))
    assert offset_map.winners is not None
    wanted = offset_map.winners.where(offset_map.winners.partition.isin(sorted({t.partition for t in tasks})))
    tagged = wanted.mapInArrow(_TagGroups(tasks), "task int, offset long")
    markers = spark.createDataFrame([(t.index, -1) for t in tasks], "task int, offset long")
    grouped = tagged.unionByName(markers).groupBy("task")
    frame = grouped.applyInArrow(_grouped_task(spec, now_ms, retention_ms, tasks), RESULT_DDL)
    results = [GroupResult.from_row(row) for row in frame.toArrow().to_pylist()]
    return sorted(results, key=lambda r: r.task)
