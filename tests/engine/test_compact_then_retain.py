"""A `compact,delete` topic: compaction, then time retention (issue 5), on every backend.

Compaction keeps the latest value of every key; retention then deletes whole old segments. What
remains must hold, for every key present in it, exactly that key's latest value. And the other
order: a trim into a segment never cleaned, then compaction."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from lakecleaner.engine.report import COMMITTED
from lakecleaner.lake import Lake
from lakecleaner.log.records import Record
from lakecleaner.log.repair import repair_partition
from lakecleaner.retention import retain_topic, trim_partition
from tests.engine.helpers import compact, new_topic
from tests.support.backends import ALL_BACKENDS

pytestmark = pytest.mark.backends(*ALL_BACKENDS)  # and the real object store, SeaweedFS (issue #15)

HOUR = 3_600_000


def test_compacted_then_retained_keeps_the_latest_value_of_every_remaining_key(spark: SparkSession, lake: Lake) -> None:
    topic = new_topic(lake, cleanup_policy="compact,delete", retention_ms=10 * HOUR, segment_bytes=100)
    log = topic.partition(0)
    latest: dict[bytes, bytes] = {}
    for hour in range(6):  # six sealed segments, 4 h apart, each updating keys 0..9 and adding one new key
        ts = hour * 4 * HOUR
        batch = [Record(f"k{i}".encode(), f"v{hour}-{i}".encode(), ts) for i in range(10)]
        batch.append(Record(f"only{hour}".encode(), f"once-{hour}".encode(), ts))
        log.append(batch, now_ms=ts)
        log.roll(now_ms=ts)
        latest.update({r.key: r.value for r in batch if r.key is not None and r.value is not None})
    now = 20 * HOUR + 1
    report = compact(spark, lake, topic, now)
    assert report.partition(0).status == COMMITTED
    after_compaction = {r["key"]: r["value"] for r in log.read().to_pylist()}
    assert after_compaction == latest  # one record per key: its latest value

    retention = retain_topic(lake, topic.name, now)
    (result,) = retention.partitions
    assert result.status == "committed" and result.quality is not None and result.quality.success
    remaining = log.read().to_pylist()
    # segments written at hours 0, 4 and 8 are older than retention.ms (10 h) at 20 h: gone, with
    # the keys only they held; every key that remains holds its latest value, once
    keys = [r["key"] for r in remaining]
    assert sorted(keys) == sorted([f"k{i}".encode() for i in range(10)] + [b"only3", b"only4", b"only5"])
    for record in remaining:
        assert record["value"] == latest[record["key"]]


def test_a_compacted_segment_keeps_the_time_of_its_last_input_so_retention_is_not_extended(
    spark: SparkSession, lake: Lake
) -> None:
    """Kafka (`Cleaner.cleanSegments`): the cleaned segment's lastModified is set to that of the
    last segment of its group, and `LogSegment.largestTimestamp` falls back to lastModified for
    records without timestamps, so compaction never restarts retention.ms for them."""
    topic = new_topic(lake, cleanup_policy="compact,delete", retention_ms=10 * HOUR)
    log = topic.partition(0)
    for hour, value in ((0, b"1"), (2, b"2")):
        log.append([Record(b"k", value, -1), Record(b"other", value, -1)], now_ms=hour * HOUR)
        log.roll(now_ms=hour * HOUR)
    log.append([Record(b"new", b"x", 100 * HOUR)], now_ms=100 * HOUR)
    report = compact(spark, lake, topic, 9 * HOUR)
    assert report.partition(0).status == COMMITTED
    compacted = log.manifest().segments[0]
    assert (compacted.created_ms, compacted.modified_ms, compacted.max_timestamp) == (9 * HOUR, 2 * HOUR, -1)
    retain_topic(lake, topic.name, 12 * HOUR)  # 10 h after the last write into the inputs: not older
    assert [r["value"] for r in log.read().to_pylist()] == [b"2", b"2", b"x"]
    retain_topic(lake, topic.name, 12 * HOUR + 1)
    assert [r["key"] for r in log.read().to_pylist()] == [b"new"]


def test_repair_rebuilds_a_compacted_segment_with_the_times_the_commit_gave_it(spark: SparkSession, lake: Lake) -> None:
    """A compacted segment's largest timestamp and lastModified are its inputs' (not its records'
    nor the compaction's), and its file's footer carries them, so a repaired manifest neither
    shortens nor restarts time retention."""
    topic = new_topic(lake, cleanup_policy="compact,delete", retention_ms=10 * HOUR)
    log = topic.partition(0)
    log.append([Record(b"k", b"old", 8 * HOUR)], now_ms=HOUR)  # superseded, but the inputs' latest timestamp
    log.roll(now_ms=HOUR)
    log.append([Record(b"k", b"new", HOUR), Record(b"untimed", b"x", -1)], now_ms=2 * HOUR)
    log.roll(now_ms=2 * HOUR)
    log.append([Record(b"active", b"x", 100 * HOUR)], now_ms=100 * HOUR)
    assert compact(spark, lake, topic, 9 * HOUR).partition(0).status == COMMITTED
    committed = log.manifest().segments[0]
    assert (committed.max_timestamp, committed.modified_ms, committed.created_ms) == (8 * HOUR, 2 * HOUR, 9 * HOUR)
    repair_partition(lake.store, topic.name, 0, topic.config, force=True, now_ms=10 * HOUR)
    repaired = log.manifest().segments[0]
    times = ("base_offset", "next_offset", "first_batch_max_timestamp", "max_timestamp", "created_ms", "modified_ms")
    assert [getattr(repaired, t) for t in times] == [getattr(committed, t) for t in times]


def test_a_trim_into_a_segment_never_cleaned_leaves_it_dirty_and_the_next_clean_commits(
    spark: SparkSession, lake: Lake
) -> None:
    """A trim (or retention) that moves the log start into a segment the cleaner never reached
    resets the cleaner checkpoint to the log start (Kafka's `cleanableOffsets`); the records of
    that segment past the log start are then dirty, mapped as Kafka maps from its first dirty
    offset, not streamed past the map as if each key were once (which kept a superseded record,
    failed the gate's unique_key, and did so again at every run). The clean commits, keeping the
    latest record of each key at or after the log start."""
    topic = new_topic(lake, cleanup_policy="compact,delete", retention_ms=100 * HOUR)
    log = topic.partition(0)
    log.append([Record(b"a", b"0", 0), Record(b"b", b"1", 0)], now_ms=0)
    log.roll(now_ms=0)
    assert compact(spark, lake, topic, 1).partition(0).status == COMMITTED  # checkpoint 2
    log.append([Record(b"a", b"2", 0), Record(b"a", b"3", 0), Record(b"a", b"4", 0)], now_ms=1)
    log.roll(now_ms=1)  # [2, 5): never cleaned
    trim_partition(lake, topic.name, 0, 3, now_ms=2)  # the log start inside it
    retain_topic(lake, topic.name, 2)
    assert log.manifest().log_start_offset == 3
    log.append([Record(b"b", b"5", 0)], now_ms=3)
    log.roll(now_ms=3)
    report = compact(spark, lake, topic, 4)
    assert report.partition(0).status == COMMITTED, report.partition(0).message
    assert [(r["offset"], r["key"], r["value"]) for r in log.read().to_pylist()] == [(4, b"a", b"4"), (5, b"b", b"5")]
    assert log.manifest().cleaner_checkpoint == 6
