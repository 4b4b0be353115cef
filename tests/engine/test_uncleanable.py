"""A missing or corrupt segment file makes its partition uncleanable for the run (Kafka's
uncleanable partitions), with the file and the reason; the other partitions still commit."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from lakecleaner.engine.report import COMMITTED, UNCLEANABLE
from lakecleaner.lake import Lake
from lakecleaner.log.partition import partition_prefix
from tests.engine.helpers import compact, rows, sealed_two_partitions, unreferenced_files


@pytest.mark.parametrize("damage", ["garbage", "missing"])
def test_a_corrupt_segment_makes_only_its_partition_uncleanable(spark: SparkSession, lake: Lake, damage: str) -> None:
    topic = sealed_two_partitions(lake, {"a": "1", "b": "1"}, {"a": "2"})
    manifest = topic.partition(0).manifest()
    victim = partition_prefix(topic.name, 0) + manifest.segments[0].files[1].path
    if damage == "garbage":
        lake.store.write(victim, b"not a parquet file")
    else:
        lake.store.delete(victim)
    report = compact(spark, lake, topic, 500)
    broken, healthy = report.partition(0), report.partition(1)
    assert broken.status == UNCLEANABLE
    assert manifest.segments[0].files[1].path in broken.message
    assert ("missing" if damage == "missing" else "unreadable") in broken.message
    assert topic.partition(0).manifest() == manifest
    assert unreferenced_files(lake, topic, 0) == []
    assert healthy.status == COMMITTED
    assert [(r["key"], r["value"]) for r in rows(topic, 1)] == [(b"b", b"1"), (b"a", b"2")]
    assert report.failed
