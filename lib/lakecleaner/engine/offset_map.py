"""Pass 1, Kafka's offset map (`Cleaner.buildOffsetMap`, DESIGN section 5): the winning offset
of every (partition, key) over [log start, U).

The range's files are spread over Spark tasks, each holding files of one partition in offset
order. A task reads only the offset, key and ordering columns (`versions.source_columns`:
values never), drops records below the log start, and reduces its rows to the winner of each
of its keys (a partial offset map). Spark then merges the partial maps per (partition, key)
with a max over (order columns…, offset), so values never enter the shuffle, and a key spread
over many tasks is still decided by the single rule of `versions`. When every partition was
read by a single task (its range fits in one task), the partial maps are final and
there is nothing to merge: no shuffle, and only (partition, offset) leaves the tasks.

Unlike Kafka's fixed-size SkimpyOffsetMap there is no partial cleaning: Spark spills instead,
and keys are compared exactly rather than by MD5 digest.

A file that cannot be read (CorruptSegment) makes its partition uncleanable for the run; the
task reports it through a Collector and the other partitions carry on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakecleaner.config import TopicConfig
from lakecleaner.engine.plan import PartitionPlan
from lakecleaner.engine.sparkio import Collector, batches, collect_tasks, map_tasks
from lakecleaner.engine.storage import StoreSpec
from lakecleaner.engine.versions import latest_per_key, order_columns, order_table, source_columns
from lakecleaner.errors import CorruptSegment, StorageError
from lakecleaner.log.manifest import SegmentFile
from lakecleaner.log.partition import partition_prefix
from lakecleaner.log.segment_files import read_segment_file

_OFFSETS = pa.schema([("partition", pa.int32()), ("offset", pa.int64())])
_ORDER_DDL = {"offset": "", "timestamp": "timestamp long, ", "header": "has_version tinyint, version long, "}


@dataclass(frozen=True)
class ScanTask:
    """Files of one partition, in offset order, read by one pass-1 task."""

    topic: str
    partition: int
    log_start_offset: int
    files: tuple[SegmentFile, ...]


@dataclass(frozen=True)
class OffsetMap:
    """Pass 1's result. `kept` (broadcast mode) holds each partition's winning offsets, sorted;
    `winners` (shuffle mode) is the (partition, offset) DataFrame, checkpointed. `errors` names
    the partitions that cannot be cleaned; `malformed` counts malformed version headers."""

    kept: dict[int, NDArray[np.int64]] | None
    winners: DataFrame | None
    errors: dict[int, str]
    malformed: dict[int, int]


def scan_tasks(topic: str, plans: Sequence[PartitionPlan], target_bytes: int) -> list[ScanTask]:
    """Each partition's files cut into consecutive runs of about `target_bytes`."""
    tasks: list[ScanTask] = []
    for plan in plans:
        run: list[SegmentFile] = []
        size = 0
        for file in (f for g in plan.groups for f in g.files):
            if run and size + file.size_bytes > target_bytes:
                tasks.append(ScanTask(topic, plan.partition, plan.log_start_offset, tuple(run)))
                run, size = [], 0
            run.append(file)
            size += file.size_bytes
        if run:
            tasks.append(ScanTask(topic, plan.partition, plan.log_start_offset, tuple(run)))
    return tasks


def scan(
    spec: StoreSpec, config: TopicConfig, errors: Collector, counters: Collector, task: ScanTask
) -> pa.Table | None:
    """One pass-1 task: the partial offset map of `task`'s files (partition, key, order
    columns…, offset); None when a file cannot be read (reported through `errors`) or the task
    has no record."""
    store = spec.open()
    prefix = partition_prefix(task.topic, task.partition)
    parts: list[pa.Table] = []
    malformed = 0
    for file in task.files:
        try:
            table = read_segment_file(
                store, prefix + file.path, columns=source_columns(config.compaction_strategy), expected=file
            )
        except (CorruptSegment, StorageError) as exc:  # the partition fails; the others go on
            errors.add(task.partition, str(exc))
            return None
        if file.base_offset < task.log_start_offset:
            table = table.filter(pc.greater_equal(table.column("offset"), task.log_start_offset))
        ordered, bad = order_table(table, config)
        parts.append(ordered)
        malformed += bad
    counters.add(task.partition, "malformed_headers", malformed)
    if not parts:
        return None
    winners = latest_per_key(pa.concat_tables(parts))
    return winners.add_column(0, "partition", pa.array(np.full(winners.num_rows, task.partition, np.int32)))


def _scan_rows(scan_task: Callable[[ScanTask], pa.Table | None], task: ScanTask) -> Iterator[pa.RecordBatch]:
    found = scan_task(task)
    if found is not None:
        yield from batches(found)


def _scan_offsets(scan_task: Callable[[ScanTask], pa.Table | None], task: ScanTask) -> pa.Table | None:
    found = scan_task(task)
    return None if found is None else found.select(["partition", "offset"])


def build_offset_map(
    spark: SparkSession,
    spec: StoreSpec,
    topic: str,
    config: TopicConfig,
    plans: Sequence[PartitionPlan],
    *,
    task_bytes: int,
    broadcast_max_offsets: int,
) -> OffsetMap:
    """Run pass 1 for `plans`. The winners are collected to the driver (to be broadcast) when
    the ranges hold at most `broadcast_max_offsets` records, else kept in Spark for a shuffle join.
    When every partition is read by one task and the winners are broadcast, the tasks' maps go
    straight to the driver (`collect_tasks`); otherwise they become a DataFrame."""
    errors, counters = Collector(spark), Collector(spark)
    strategy = config.compaction_strategy
    tasks = scan_tasks(topic, plans, task_bytes)
    scan_task = partial(scan, spec, config, errors, counters)
    broadcast = sum(p.record_count for p in plans) <= broadcast_max_offsets
    final = _one_task_per_partition(tasks)
    partitions = [p.partition for p in plans]
    spark.sparkContext.setJobDescription(f"lakecleaner pass 1 (offset map) of {topic}")
    kept, checkpointed = None, None
    if broadcast and final:
        found = [t for t in collect_tasks(spark, tasks, partial(_scan_offsets, scan_task)) if t is not None]
        kept = _collect(pa.concat_tables([_OFFSETS.empty_table(), *found]), partitions)
    else:
        schema = f"partition int, key binary, {_ORDER_DDL[strategy]}offset long"
        partials = map_tasks(spark, tasks, partial(_scan_rows, scan_task), schema)
        winners = partials.select("partition", "offset")
        if not final:
            order = order_columns(strategy)
            best = F.max(F.struct(*order, "offset")).getField("offset") if order else F.max("offset")
            winners = partials.groupBy("partition", "key").agg(best.alias("offset")).select("partition", "offset")
        if broadcast:
            kept = _collect(winners.toArrow(), partitions)
        else:
            checkpointed = winners.localCheckpoint(eager=True)
    malformed: dict[int, int] = {}
    for partition, _, count in counters.items:
        malformed[partition] = malformed.get(partition, 0) + int(count)
    failed: dict[int, str] = {}
    for partition, message in errors.items:
        failed.setdefault(partition, message)
    return OffsetMap(kept, checkpointed, failed, malformed)


def _one_task_per_partition(tasks: Sequence[ScanTask]) -> bool:
    """Whether each partition was read by a single task, whose partial map is then final."""
    partitions = [t.partition for t in tasks]
    return len(partitions) == len(set(partitions))


def _collect(table: pa.Table, partitions: Sequence[int]) -> dict[int, NDArray[np.int64]]:
    """Each partition's winning offsets, sorted."""
    part = table.column("partition").to_numpy()
    offsets = table.column("offset").to_numpy()
    order = np.lexsort((offsets, part))
    part, offsets = part[order], offsets[order]
    bounds = np.searchsorted(part, partitions), np.searchsorted(part, partitions, side="right")
    return {p: offsets[lo:hi] for p, lo, hi in zip(partitions, *bounds, strict=True)}
