"""Issue 79: a clean that removes few of a group's records writes a deletion vector beside each
file instead of rewriting the group (`lakecleaner.rewrite.dead.ratio`); what every reader reads is
what a rewrite would have left, the quality gate passes, a later clean grows the vector, a group
past the ratio or with a ratio of 0 is rewritten as before, the dirty section (new tombstones to
stamp) is rewritten apart from the cleaned groups that vector, and on a topic with a KIP-354
deadline a vector carries it and the group is rewritten once it passes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from lakecleaner.config import LakeConfig
from lakecleaner.engine.report import COMMITTED, UNCLEANABLE
from lakecleaner.extras import open_lake
from lakecleaner.lake import Lake, Topic
from lakecleaner.log.manifest import SegmentFile
from lakecleaner.policy.cleanable import VECTOR_ERASURE, assess_compaction
from tests.engine.helpers import compact, keyed
from tests.support.tables import assert_table_is_the_log, with_tables

pytestmark = pytest.mark.backends("local", "seaweedfs")

NOW = 10_000_000


def _topic(spark: SparkSession, lake: Lake, name: str, **config: Any) -> Topic:
    """A compacted topic of 100 keys, compacted once: one group of 100 live records."""
    topic = lake.create_topic(name, 1, {"cleanup.policy": "compact", "file.delete.delay.ms": 0, **config})
    log = topic.partition(0)
    log.append(keyed({f"k{i:03d}": f"v{i}" for i in range(100)}, 1000), now_ms=1000)
    log.roll(now_ms=1000)
    assert not compact(spark, lake, topic, NOW).failed
    return topic


def _updated(topic: Topic, keys: range, timestamp: int, tombstones: bool = False) -> None:
    """New values of `keys` (every fifth a tombstone, with `tombstones`), in a sealed segment."""
    log = topic.partition(0)
    values = {f"k{i:03d}": None if tombstones and i % 5 == 0 else f"w{i}" for i in keys}
    log.append(keyed(values, timestamp), now_ms=timestamp)
    log.roll(now_ms=timestamp)


def _files(topic: Topic) -> list[SegmentFile]:
    return [f for s in topic.partition(0).manifest().segments for f in s.files]


def _latest(topic: Topic) -> dict[bytes, bytes | None]:
    """Each key's last record as `consume` reads the log (the rows a rewrite would keep)."""
    out: dict[bytes, bytes | None] = {}
    for row in topic.partition(0).read(columns=["key", "value"]).to_pylist():
        assert row["key"] not in out  # a clean log holds each key once
        out[row["key"]] = row["value"]
    return out


def test_a_lightly_dirty_group_gets_a_vector_and_readers_see_what_a_rewrite_leaves(
    spark: SparkSession, lake: Lake
) -> None:
    topic = _topic(spark, lake, "cdc")
    (first,) = _files(topic)
    _updated(topic, range(0, 10), 2000)
    report = compact(spark, lake, topic, NOW + 1)
    stats = report.totals
    assert not report.failed and stats.groups_vectored == 1 and stats.records_superseded == 10
    old = next(f for f in _files(topic) if f.path == first.path)  # the file kept, 10 of its rows removed
    assert old.deletion_vector is not None and old.deletion_vector.cardinality == 10 and old.live_count == 90
    latest = _latest(topic)
    assert len(latest) == 100 and latest[b"k001"] == b"w1" and latest[b"k050"] == b"v50"

    _updated(topic, range(10, 20), 3000)  # a later clean: the vector grows, the file stays
    report = compact(spark, lake, topic, NOW + 2)
    grown = next(f for f in _files(topic) if f.path == first.path)
    assert grown.deletion_vector is not None and grown.deletion_vector.cardinality == 20
    assert grown.deletion_vector.path != old.deletion_vector.path
    assert old.deletion_vector.path in {p.path for p in topic.partition(0).manifest().pending_deletes}
    assert len(_latest(topic)) == 100 and _latest(topic)[b"k011"] == b"w11"


@pytest.mark.parametrize(
    ("config", "updated"),
    [
        ({}, range(0, 40)),  # 40 of the group's 100 records lost: past the default ratio of 0.3
        ({"lakecleaner.rewrite.dead.ratio": 0}, range(0, 10)),
        ({"min.cleanable.dirty.ratio": 0.05}, range(0, 10)),  # vectors never past the dirty ratio
        ({"max.compaction.lag.ms": 1_000_000}, range(0, 10)),  # KIP-354: the deadline has passed
    ],
)
def test_a_group_past_the_ratio_or_its_deadline_is_rewritten(
    spark: SparkSession, lake: Lake, config: dict[str, Any], updated: range
) -> None:
    topic = _topic(spark, lake, "cdc", **config)
    (first,) = _files(topic)
    _updated(topic, updated, 2000)
    report = compact(spark, lake, topic, NOW + 1)
    assert not report.failed and report.totals.groups_vectored == 0
    assert first.path not in {f.path for f in _files(topic)}
    assert all(f.deletion_vector is None for f in _files(topic)) and len(_latest(topic)) == 100


def test_new_tombstones_are_stamped_by_rewriting_the_dirty_section_apart_from_the_vectored_group(
    spark: SparkSession, lake: Lake
) -> None:
    """KIP-534: a new tombstone's horizon is written into its file; the cleaned group that lost
    the tombstones' keys is not grouped with the dirty section, and keeps its file."""
    topic = _topic(spark, lake, "cdc")
    (first,) = _files(topic)
    _updated(topic, range(0, 10), 2000, tombstones=True)
    report = compact(spark, lake, topic, NOW + 1)
    stats = report.totals
    assert not report.failed and (stats.groups_vectored, stats.groups_rewritten) == (1, 1)
    kept = next(f for f in _files(topic) if f.path == first.path)
    assert kept.deletion_vector is not None and kept.deletion_vector.cardinality == 10
    rows = topic.partition(0).read(columns=["key", "value", "delete_horizon_ms"]).to_pylist()
    tombstones = [r for r in rows if r["value"] is None]
    assert len(rows) == 100 and {r["key"] for r in tombstones} == {b"k000", b"k005"}
    assert {r["delete_horizon_ms"] for r in tombstones} == {NOW + 1 + topic.config.delete_retention_ms}


def test_a_vector_carries_its_records_deadline_and_the_group_is_rewritten_when_it_passes(
    spark: SparkSession, lake: Lake
) -> None:
    """KIP-354 with vectors: a clean ahead of the deadline writes a vector that carries it
    (the dirty segment's first batch + max.compaction.lag.ms); the plan shows it; once it has
    passed the partition is due (`vector_erasure`) and the group is rewritten without the rows."""
    lag = 100_000_000
    topic = _topic(spark, lake, "gdpr", **{"max.compaction.lag.ms": lag})
    (first,) = _files(topic)
    _updated(topic, range(0, 10), 2000)
    assert compact(spark, lake, topic, NOW + 1).totals.groups_vectored == 1
    vector = next(f for f in _files(topic) if f.path == first.path).deletion_vector
    assert vector is not None and vector.erase_by_ms == 2000 + lag
    log = topic.partition(0)
    before = assess_compaction(log.manifest(), lake.topic("gdpr").config, 2000 + lag - 1)
    assert not before.due and before.range is not None and before.range.dead_bytes > 0
    due = assess_compaction(log.manifest(), lake.topic("gdpr").config, 2000 + lag)
    assert due.due and due.triggers == (VECTOR_ERASURE,)
    report = compact(spark, lake, topic, 2000 + lag)
    assert not report.failed and report.totals.groups_rewritten == 1
    assert first.path not in {f.path for f in _files(topic)}
    assert all(f.deletion_vector is None for f in _files(topic)) and len(_latest(topic)) == 100


def test_the_log_table_reads_what_consume_reads_after_a_vectored_clean(
    spark: SparkSession, lake_config: LakeConfig, tmp_path: Path
) -> None:
    lake = open_lake(with_tables(lake_config, tmp_path))
    topic = _topic(spark, lake, "orders")
    _updated(topic, range(0, 10), 2000)
    assert compact(spark, lake, topic, NOW + 1).totals.groups_vectored == 1
    assert_table_is_the_log(lake, "orders")


def test_a_missing_vector_stops_its_partition_in_one_line_and_the_others_are_cleaned(
    spark: SparkSession, lake: Lake
) -> None:
    topic = lake.create_topic("cdc", 2, {"cleanup.policy": "compact", "file.delete.delay.ms": 0})
    for p in range(2):
        topic.partition(p).append(keyed({f"k{i:03d}": f"v{i}" for i in range(100)}, 1000), now_ms=1000)
        topic.partition(p).roll(now_ms=1000)
    compact(spark, lake, topic, NOW)
    for p in range(2):
        log = topic.partition(p)
        log.append(keyed({f"k{i:03d}": f"w{i}" for i in range(10)}, 2000), now_ms=2000)
        log.roll(now_ms=2000)
    assert compact(spark, lake, topic, NOW + 1).totals.groups_vectored == 2
    damaged = topic.partition(1)
    (vector,) = [f.deletion_vector for s in damaged.manifest().segments for f in s.files if f.deletion_vector]
    lake.store.delete(damaged.prefix + vector.path)
    for p in range(2):
        topic.partition(p).append(keyed({f"k{i:03d}": f"x{i}" for i in range(10, 20)}, 3000), now_ms=3000)
        topic.partition(p).roll(now_ms=3000)
    report = compact(spark, lake, topic, NOW + 2)
    by_partition = {r.partition: r for r in report.partitions}
    assert by_partition[0].status == COMMITTED and len(_latest(topic)) == 100
    assert by_partition[1].status == UNCLEANABLE
    assert "deletion vector" in by_partition[1].message and "is missing" in by_partition[1].message
    assert "\n" not in by_partition[1].message
