"""Running the engine's tasks on Spark with the DataFrame API only, so that one engine serves a
classic session (local[*], spark-submit to a cluster) and a Spark Connect session alike: no
SparkContext, RDD, accumulator or broadcast.

`run_tasks` runs `fn(item)` for every item in its own Spark task: a `spark.range` with one row per
partition, mapped with mapInArrow, each task returning its result pickled in one Arrow row. The
items travel inside the mapped function (Spark broadcasts a large one on a classic session), so
they are kept small: file lists and compressed offset sets, never records.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Generic, TypeVar

import pyarrow as pa
from pyspark.sql import SparkSession

T = TypeVar("T")
R = TypeVar("R")

_RESULT_SCHEMA = pa.schema([("index", pa.int64()), ("result", pa.large_binary())])


class _TaskRunner(Generic[T, R]):
    """The mapInArrow function: each input row names the item its task runs."""

    def __init__(self, items: Sequence[T], fn: Callable[[T], R]) -> None:
        self.items = list(items)
        self.fn = fn

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for index in batch.column(0).to_pylist():
                result = pickle.dumps(self.fn(self.items[index]), protocol=pickle.HIGHEST_PROTOCOL)
                yield pa.RecordBatch.from_arrays(
                    [pa.array([index]), pa.array([result], pa.large_binary())], schema=_RESULT_SCHEMA
                )


def run_tasks(spark: SparkSession, items: Sequence[T], fn: Callable[[T], R], description: str) -> list[R]:
    """`fn(item)` for every item, one Spark task per item, returned to the driver in item order."""
    if not items:
        return []
    describe(spark, description)
    n = len(items)
    frame = spark.range(0, n, 1, n).mapInArrow(_TaskRunner(items, fn), "index long, result binary")
    table = frame.toArrow()
    results: list[Any] = [None] * n
    for index, blob in zip(table.column("index").to_pylist(), table.column("result").to_pylist(), strict=True):
        results[index] = pickle.loads(blob)
    return results


def is_connect(spark: SparkSession) -> bool:
    """Whether `spark` is a Spark Connect session (a client of a remote server)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def describe(spark: SparkSession, description: str | None) -> None:
    """Name the jobs that follow in Spark's UI (a classic session's job description; a Connect
    session has none to set)."""
    if not is_connect(spark):
        spark.sparkContext.setJobDescription(description)  # type: ignore[arg-type]


def parallelism(spark: SparkSession) -> int:
    """How many tasks the session runs at once: spark.default.parallelism when set, else the
    classic session's default parallelism, else this machine's cores."""
    configured = spark.conf.get("spark.default.parallelism", None)
    if configured:
        return max(1, int(configured))
    if not is_connect(spark):
        return max(1, spark.sparkContext.defaultParallelism)
    return os.cpu_count() or 1
