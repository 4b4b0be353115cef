"""Logs whose offsets have gaps, as a topic mirrored from Kafka keeps them (issue #19): compaction,
reads, consumed retention and time retention work on the offsets the records carry."""

from __future__ import annotations

from pyspark.sql import SparkSession

from lakecleaner.engine.report import COMMITTED
from lakecleaner.lake import Lake
from lakecleaner.log.records import Record
from lakecleaner.retention import retain_topic
from tests.engine.helpers import compact, new_topic

HOUR = 3_600_000
T0 = 1_700_000_000_000


def mirrored(key: str, value: str | None, timestamp: int = T0) -> Record:
    return Record(key.encode(), None if value is None else value.encode(), timestamp)


def test_a_log_with_offset_gaps_compacts_reads_and_retains_by_its_own_offsets(spark: SparkSession, lake: Lake) -> None:
    """Kafka's cleaner keeps each retained record's offset and the log end offset across gaps
    (`LogCleanerTest.testCleaningBeyondMissingOffsets`); a fetch inside a gap returns the next
    record; consumed retention (KIP-68) deletes the segments below every group's committed offset."""
    topic = new_topic(lake, cleanup_policy="compact,delete", retention_ms=100 * HOUR, retention_commitoffset_ms=0)
    log = topic.partition(0)
    log.append([mirrored("a", "1"), mirrored("b", "1"), mirrored("a", "2")], offsets=[3, 7, 12], now_ms=T0)
    log.roll(now_ms=T0)
    log.append([mirrored("b", "2"), mirrored("c", "1")], offsets=[40, 41], now_ms=T0)
    log.roll(now_ms=T0)
    report = compact(spark, lake, topic, T0 + HOUR)
    assert report.partition(0).status == COMMITTED
    after = log.read()
    assert list(zip(after.column("offset").to_pylist(), after.column("value").to_pylist(), strict=True)) == [
        (12, b"2"),
        (40, b"2"),
        (41, b"1"),
    ]
    manifest = log.manifest()
    assert (manifest.log_start_offset, manifest.next_offset, manifest.cleaner_checkpoint) == (0, 42, 42)
    assert log.read(13).column("offset").to_pylist() == [40, 41]

    log.append([mirrored("d", "1", T0 + HOUR)], now_ms=T0 + HOUR)  # assigned from the log end, 42
    lake.offsets.commit("mirror-consumer", topic.name, {0: 42})
    retained = retain_topic(lake, topic.name, T0 + 2 * HOUR)
    assert [d.rule for d in retained.partitions[0].plan.deletions] == ["consumed"]  # type: ignore[union-attr]
    assert log.read().column("offset").to_pylist() == [42]
    assert log.manifest().log_start_offset == 42

    log.append([mirrored("e", "1", T0 + HOUR)], offsets=[90], now_ms=T0 + HOUR)
    log.roll(now_ms=T0 + HOUR)
    log.append([mirrored("f", "1", T0 + 300 * HOUR)], now_ms=T0 + 300 * HOUR)
    retain_topic(lake, topic.name, T0 + 200 * HOUR)  # retention.ms: the segment [42, 91) is 199 h old
    assert log.read().column("offset").to_pylist() == [91]


def test_a_log_spread_over_a_trillion_offsets_compacts_in_memory_per_record(spark: SparkSession, lake: Lake) -> None:
    """A compacted topic keeps its keys' latest records spread over every offset it ever had (a
    mirror of a topic cleaned for years: a few keys over a trillion offsets). Pass 1's winners,
    pass 2's shares of them and the gate's expected offsets hold memory per record, never per
    offset of the range (a byte per offset would be a terabyte here), on the first run and on the
    next, which streams the cleaned section past the new records' map."""
    topic = new_topic(lake)
    log = topic.partition(0)
    gap = 10**11
    log.append([mirrored(k, f"{k}1") for k in "abcab"], offsets=[i * gap for i in range(5)], now_ms=T0)
    log.roll(now_ms=T0)
    assert compact(spark, lake, topic, T0 + HOUR).partition(0).status == COMMITTED
    assert log.read().column("offset").to_pylist() == [2 * gap, 3 * gap, 4 * gap]

    log.append([mirrored("a", "a2"), mirrored("d", "d1")], offsets=[10 * gap, 10 * gap + 1], now_ms=T0 + HOUR)
    log.roll(now_ms=T0 + HOUR)
    assert compact(spark, lake, topic, T0 + 2 * HOUR).partition(0).status == COMMITTED
    after = log.read()
    assert list(zip(after.column("offset").to_pylist(), after.column("value").to_pylist(), strict=True)) == [
        (2 * gap, b"c1"),
        (4 * gap, b"b1"),
        (10 * gap, b"a2"),
        (10 * gap + 1, b"d1"),
    ]
