"""A missing or corrupt segment file makes its partition uncleanable for the run (Kafka's
uncleanable partitions), with the file and the reason; the other partitions still commit. A store
that fails is not the partition's fault: it fails the partition for the run."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from lakecleaner.audit import audit_key
from lakecleaner.engine.report import COMMITTED, FAILED, UNCLEANABLE
from lakecleaner.errors import CorruptSegment
from lakecleaner.lake import Lake
from lakecleaner.log.layout import partition_prefix
from lakecleaner.log.segment_files import read_file_meta
from lakecleaner.policy import plan_topic
from tests.engine.helpers import compact, lake_through, requests, rows, sealed_two_partitions, unreferenced_files
from tests.support.flaky_proxy import FlakyProxy
from tests.support.s3 import S3Endpoint


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


def test_a_store_that_fails_pass_1s_reads_fails_the_partition_not_marks_it_uncleanable(
    spark: SparkSession, s3_endpoint: S3Endpoint, tmp_path: Path
) -> None:
    """Segment files the store will not serve (every read failing past the retries) are the
    store's fault, not the partition's data: pass 1 fails the partition for the run (failed, the
    storage error named), as pass 2 does when its reads fail, and does not report it uncleanable,
    which Kafka keeps for data its cleaner cannot clean (an IOException marks the log directory
    offline instead, kafka-cleaner-semantics.md 1.15). The other partition commits (until
    2026-11-29 a failed fetch of the partition's small files, before pass 1, failed the Spark job
    and with it the whole run). Nor is it marked in the cleaner state: the next run plans it and,
    the store well again, commits it."""

    def refusing(method: str, path: str) -> bool:  # partition 0's segment files
        return method == "GET" and "/partition=0/" in unquote(path) and ".parquet" in path

    with FlakyProxy(s3_endpoint.url, 10_000, fail_when=refusing) as proxy:
        lake = lake_through(proxy, s3_endpoint, tmp_path, max_attempts=2)
        topic = sealed_two_partitions(lake, {"a": "1", "b": "1"}, {"a": "2"})
        manifest = topic.partition(0).manifest()
        report = compact(spark, lake, topic, 500)
        proxy.failures_left = 0
        broken, healthy = report.partition(0), report.partition(1)
        assert [p for m, p in proxy.seen if refusing(m, p)]
        assert broken.status == FAILED, broken.message
        assert "read" in broken.message and s3_endpoint.secret_key not in broken.message
        assert topic.partition(0).manifest() == manifest
        assert healthy.status == COMMITTED
        state = lake.cleaner_state.read(topic.name)
        assert state.uncleanable == {}  # not marked: the next run retries it
        plan = plan_topic(topic.name, topic.read_manifests().manifests, topic.config, {}, 600, cleaner=state)
        assert plan.partitions[0].compaction.uncleanable is None and plan.partitions[0].compaction.due
        again = compact(spark, lake, topic, 600)
    assert again.partition(0).status == COMMITTED, again.partition(0).message
    assert [(r["key"], r["value"]) for r in rows(topic, 0)] == [(b"b", b"1"), (b"a", b"2")]


def _lying(table: pa.Table, lie: str) -> pa.Table:
    """The segment's records with a schema that lies as named."""
    if lie == "column-dropped":
        return table.drop_columns(["headers"])
    if lie == "column-renamed":
        return table.rename_columns([("vaule" if n == "value" else n) for n in table.column_names])
    return table.set_column(table.schema.get_field_index("offset"), "offset", table.column("offset").cast(pa.string()))


@pytest.mark.parametrize("lie", ["column-dropped", "column-renamed", "offset-as-text"])
def test_a_segment_file_whose_schema_lies_makes_only_its_partition_uncleanable(
    spark: SparkSession, lake: Lake, lie: str
) -> None:
    """Issue #45: such a file used to end every run of the topic in a traceback, commit nothing,
    and never mark the partition. It is CorruptSegment, naming the file, for compaction (its
    partition uncleanable, the rest committed), for a consumer and for the key audit."""
    topic = sealed_two_partitions(lake, {"a": "1", "b": "1"}, {"a": "2"})
    manifest = topic.partition(0).manifest()
    path = manifest.segments[0].files[1].path
    victim = partition_prefix(topic.name, 0) + path
    meta = read_file_meta(lake.store, victim)
    table = pq.read_table(pa.BufferReader(lake.store.read(victim)))
    sink = pa.BufferOutputStream()
    pq.write_table(_lying(table, lie).replace_schema_metadata(meta.to_metadata()), sink)
    lake.store.write(victim, sink.getvalue().to_pybytes())
    report = compact(spark, lake, topic, 500)
    broken, healthy = report.partition(0), report.partition(1)
    assert broken.status == UNCLEANABLE and path in broken.message and "segment schema" in broken.message
    assert healthy.status == COMMITTED
    assert 0 in lake.cleaner_state.read(topic.name).uncleanable
    assert topic.partition(0).manifest() == manifest
    with pytest.raises(CorruptSegment, match="does not have the segment schema"):
        topic.partition(0).read()
    audit = audit_key(lake, topic.name, b"a", 500)
    assert "does not have the segment schema" in audit.unreadable[victim]


def test_a_failed_partition_stays_uncleanable_across_runs_until_it_is_cleared(spark: SparkSession, lake: Lake) -> None:
    """Kafka (`LogCleaner.CleanerThread.cleanFilthiestLog` → `markPartitionUncleanable`): a
    partition whose cleaning failed is skipped by later cleanings; here the mark is kept between
    runs with the reason, time and attempts, and lifted by a changed log or `uncleanable clear`."""
    topic = sealed_two_partitions(lake, {"a": "1", "b": "1"}, {"a": "2"})
    victim = partition_prefix(topic.name, 0) + topic.partition(0).manifest().segments[0].files[1].path
    good = lake.store.read(victim)
    lake.store.write(victim, b"not a parquet file")
    compact(spark, lake, topic, 500)
    state = lake.cleaner_state.read(topic.name)
    (entry,) = state.uncleanable.values()
    assert (entry.partition, entry.attempts, entry.first_failed_ms) == (0, 1, 500)
    assert "unreadable" in entry.reason
    assert state.last_run is not None and state.last_run.started_ms == 500

    plan = plan_topic(topic.name, topic.read_manifests().manifests, topic.config, {}, 600, cleaner=state)
    assert plan.partitions[0].compaction.uncleanable == entry and not plan.partitions[0].compaction.due
    assert plan.metrics.uncleanable_partitions_count == 1 and plan.metrics.uncleanable_bytes > 0
    assert requests(topic, 600) != []  # the requests alone would still compact it: the plan is what skips it

    lake.store.write(victim, good)  # repaired by hand: only `uncleanable clear` tells the cleaner
    assert lake.cleaner_state.clear(topic.name, [0]) == [0]
    assert lake.cleaner_state.read(topic.name).uncleanable == {}
    report = compact(spark, lake, topic, 700)
    assert report.partition(0).status == COMMITTED
    assert lake.cleaner_state.read(topic.name).uncleanable == {}
