"""Running the engine's tasks on Spark with the DataFrame API only, so that one engine serves a
classic session (local[*], spark-submit to a cluster) and a Spark Connect session alike: no
SparkContext, RDD, accumulator or broadcast.

`run_tasks` runs `fn(item)` for every item: a `spark.range` with one row per Spark task, mapped
with mapInArrow, each item's result returned pickled in one Arrow row. A Spark task costs 30-50 ms
before it does anything (measured on 2 cores: 200 empty tasks take 5.5 s, 4 take 0.3 s), so items
are packed into at most one task per core (two where they overlap, below), heaviest first onto
the least loaded task: the items' weights say what they cost, and a second wave of tasks cost more
than the unevenness it evened out (a compaction of 4 equal partitions on 2 cores: 4 tasks a step
took 0.2-0.4 s longer in pass 2 and again in the gate than 2 tasks, each task's start, unpickling
of every item and fresh memory paid twice). The items travel inside the mapped function (Spark
broadcasts a large one on a classic session), so they are kept small: file lists and compressed
offset sets, never records.

A task runs its items one after another, or, given an `Overlap` (a lake on S3: `Overlap.of`),
several at once on the worker's I/O pool (`io.concurrent.map_bounded`): a thousand small
partitions on a store 20 ms away spend their time waiting for replies, not computing, so their
requests overlap, under lake.storage.max_concurrency across the call's tasks and `OVERLAP_BYTES`
of input per task (a large item runs alone, in the task's thread, so a task's memory stays that
of its largest item and the item's own fan-out uses the pool). Items that overlap run as threads
of one Python worker and wait on its GIL as much as on their replies, so they get two
tasks per core (`_tasks_per_core`).
"""

from __future__ import annotations

import heapq
import pickle
import re
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import pyarrow as pa
from pyspark.sql import SparkSession

from lakecleaner.engine.memory import Growth, give_back
from lakecleaner.engine.profiling import profiled
from lakecleaner.engine.storage import StoreSpec
from lakecleaner.io.concurrent import map_bounded

T = TypeVar("T")
R = TypeVar("R")

_RESULT_SCHEMA = pa.schema([("index", pa.int64()), ("result", pa.large_binary())])

#: Input bytes one Spark task may be reading at once across the items it overlaps: a few
#: partitions of 16 MB (64 partitions of a 1 GB topic) overlap, which at 16 MiB ran one at a time
#: and waited out each one's requests in turn (pass 2 on a store 20 ms away: 11.8 → 8.5 s).
OVERLAP_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Overlap:
    """Items of a Spark task may run at once: their weights are the bytes they read, and at most
    `max_concurrency` (lake.storage.max_concurrency) run at once across the call's tasks."""

    max_concurrency: int

    @staticmethod
    def of(spec: StoreSpec) -> Overlap | None:
        """How the items of tasks on `spec`'s lake overlap: at most lake.storage.max_concurrency at
        once on a store whose requests wait on the network (S3), where overlapping hides the
        replies' latency; not at all on a local directory, whose reads are the CPU's: there
        overlapping only shared each worker's GIL among threads whose memory, in their own
        allocator heaps, the task's thread could not reuse (64 partitions of 156k records on 2
        cores: 2.4-3.0 s overlapped, 2.2-2.3 s one after another, the kernel's faulting memory in
        the difference: 120-190k page faults a run against none)."""
        return None if spec.local else Overlap(spec.settings.max_concurrency)


class _TaskRunner(Generic[T, R]):
    """The mapInArrow function: each input row names a Spark task, which runs its items."""

    def __init__(
        self,
        items: Sequence[T],
        fn: Callable[[T], R],
        packs: Sequence[Sequence[int]],
        weights: Sequence[int],
        overlap: Overlap | None,
    ) -> None:
        self.items = list(items)
        self.fn = fn
        self.packs = [list(p) for p in packs]
        self.weights = list(weights)
        self.overlap = overlap

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for task in batch.column(0).to_pylist():
                for index, value in self._results(self.packs[task]):
                    result = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
                    columns = [pa.array([index], pa.int64()), pa.array([result], pa.large_binary())]
                    yield pa.RecordBatch.from_arrays(columns, schema=_RESULT_SCHEMA)

    def _results(self, pack: list[int]) -> Iterator[tuple[int, R]]:
        """(index, result) of a task's items, in order or, when they overlap, as they finish. The
        worker gives back what its allocators keep (`engine.memory`) only once its memory has grown
        by `memory.GROWTH_SLACK_BYTES` past what it held after the task's first item
        (`memory.Growth`): the next item, and the next task or run this worker serves, reuse the
        rest rather than fault it in again (a give-back after every item made 4 partitions of 2.5M
        records 1.9-2.9 s against 1.7-2.0 s, the time following the kernel's for the faults, see
        `memory`). Items that overlap run on the I/O pool's threads, whose allocations stay in
        their threads' heaps where the next step's items, in the task's thread, cannot reuse them
        (pass 1's first key buckets began with 170-230 MB the scatter step's overlapping reads had
        left): a task whose items may overlap gives back once they all have. An item heavier than
        `OVERLAP_BYTES` runs alone, in the task's thread (`map_bounded`)."""
        growth, fn = Growth(), profiled(self.fn)
        if self.overlap is None:
            for index in pack:
                value = fn(self.items[index])
                growth.item_done()
                yield index, value
            return
        limit = max(1, self.overlap.max_concurrency // len(self.packs))
        items, weights = [self.items[i] for i in pack], [self.weights[i] for i in pack]
        for position, value in map_bounded(fn, items, weights, OVERLAP_BYTES, limit, self.overlap.max_concurrency):
            growth.item_done()
            yield pack[position], value
        if any(w <= OVERLAP_BYTES for w in weights):
            give_back()


def pack(weights: Sequence[int], tasks: int) -> list[list[int]]:
    """Item indices packed into at most `tasks` lists of about equal weight: heaviest first, each
    onto the lightest list (each list in item order)."""
    loads = [(0, t) for t in range(min(tasks, len(weights)))]
    packs: list[list[int]] = [[] for _ in loads]
    for index in sorted(range(len(weights)), key=lambda i: -weights[i]):
        load, task = heapq.heappop(loads)
        packs[task].append(index)
        heapq.heappush(loads, (load + max(weights[index], 1), task))
    return [sorted(p) for p in packs if p]


def run_tasks(
    spark: SparkSession,
    items: Sequence[T],
    fn: Callable[[T], R],
    description: str,
    weight: Callable[[T], int] | None = None,
    overlap: Overlap | None = None,
) -> list[R]:
    """`fn(item)` for every item, in Spark tasks of about equal `weight` (default: one each),
    returned to the driver in item order; with `overlap`, a task's items run at once (the
    weights are then the bytes each reads)."""
    if not items:
        return []
    describe(spark, description)
    weights = [weight(i) if weight else 1 for i in items]
    packs = pack(weights, _tasks_per_core(weights, overlap) * parallelism(spark))
    runner = _TaskRunner(items, fn, packs, weights, overlap)
    frame = spark.range(0, len(packs), 1, len(packs)).mapInArrow(runner, "index long, result binary")
    table = frame.toArrow()
    results: list[Any] = [None] * len(items)
    for index, blob in zip(table.column("index").to_pylist(), table.column("result").to_pylist(), strict=True):
        results[index] = pickle.loads(blob)
    return results


def _tasks_per_core(weights: Sequence[int], overlap: Overlap | None) -> int:
    """One Spark task per core, but two where most items are small enough to overlap inside a task
    (half of `OVERLAP_BYTES` or less): they run as threads of one Python worker, whose GIL their
    requests' signing and parsing share, and a second worker per core keeps the core busy (the
    compaction of 1,000 partitions of 60 records on a store 20 ms away: 28.3 s with two tasks per
    core, 30.1 s with one, medians of 4 and 3 runs)."""
    if overlap is None:
        return 1
    small = sum(1 for w in weights if w <= OVERLAP_BYTES // 2)
    return 2 if 2 * small > len(weights) else 1


def is_connect(spark: SparkSession) -> bool:
    """Whether `spark` is a Spark Connect session (a client of a remote server)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def session_kind(spark: SparkSession) -> str:
    """ "connect" for a Spark Connect client, else the classic session's master (no URL of a
    Connect server: it may hold a token)."""
    return "connect" if is_connect(spark) else str(spark.sparkContext.master)


def describe(spark: SparkSession, description: str | None) -> None:
    """Name the jobs that follow in Spark's UI (a classic session's job description; a Connect
    session has none to set)."""
    if not is_connect(spark):
        spark.sparkContext.setJobDescription(description)  # type: ignore[arg-type]


def parallelism(spark: SparkSession) -> int:
    """How many tasks the session runs at once: spark.default.parallelism when set, else the
    classic session's default parallelism, else (a Spark Connect client) the server's, which the
    client's own cores say nothing about: an Airflow worker of 2 cores in front of a cluster of
    64 would otherwise send 2 tasks at a time. The server's is the number of partitions it
    splits a range into (its default parallelism), read from the server's plan of a range
    (`_planned_splits`) or, should the plan not say, found by one small job
    (`_ranges_partitions`); once per session."""
    configured = spark.conf.get("spark.default.parallelism", None)
    if configured:
        return max(1, int(configured))
    if not is_connect(spark):
        return max(1, spark.sparkContext.defaultParallelism)
    if spark not in _SERVER_PARALLELISM:
        _SERVER_PARALLELISM[spark] = _planned_splits(spark) or _ranges_partitions(spark)
    return _SERVER_PARALLELISM[spark]


#: The default parallelism of each Spark Connect session's server, as `parallelism` found it.
_SERVER_PARALLELISM: weakref.WeakKeyDictionary[SparkSession, int] = weakref.WeakKeyDictionary()

#: The partitions of a range in a physical plan: Spark's `Range (0, 65536, step=1, splits=2)`.
_RANGE_SPLITS = re.compile(r"\bRange \(0, 65536, step=1, splits=(\d+)\)")


def _planned_splits(spark: SparkSession) -> int | None:
    """The partitions the server splits a range into, as its physical plan of one says: one
    request to plan, no job (16 ms against 0.29-0.32 s for `_ranges_partitions`, on a local
    server). None when the plan does not say (another Spark's format of it)."""
    explain = getattr(spark.range(0, 1 << 16), "_explain_string", None)
    if explain is None:
        return None
    found = _RANGE_SPLITS.search(explain(mode="simple"))
    return int(found.group(1)) if found else None


def _ranges_partitions(spark: SparkSession) -> int:
    """How many partitions the session splits a range into (a job of as many tiny tasks)."""
    from pyspark.sql import functions as F

    partitions = spark.range(0, 1 << 16).select(F.spark_partition_id().alias("p")).agg(F.max("p")).first()
    return 1 if partitions is None or partitions[0] is None else int(partitions[0]) + 1
