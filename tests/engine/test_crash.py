"""The job killed at each step (a child process running lakecleaner/spark_jobs/compact_topic.py with
LAKECLEANER_CRASH_AT) leaves every log reading exactly as before or exactly as after, and the
next run (in-process, through the job's `main`) completes the compaction.

Each child is a whole Spark application, so the four crash points are split over the two
backends (two children at once per backend): each backend sees a crash that must leave the old
log and one at or after the commit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
import yaml
from pyspark.sql import SparkSession

from lakecleaner.clock import wall_clock_ms
from lakecleaner.config import LakeConfig
from lakecleaner.engine import CompactionRequest, EngineOptions, compact_topic
from lakecleaner.faults import CRASH_EXIT_STATUS, ENV_CRASH_AT, on_crash_point
from lakecleaner.lake import Lake, Topic
from lakecleaner.log.deletion_vectors import VECTOR_PATH
from lakecleaner.log.records import Record
from lakecleaner.log.segment_files import WHOLE_OBJECT_BYTES
from lakecleaner.retention import gc_topic
from lakecleaner.spark_jobs import compact_topic_path
from tests.engine.helpers import (
    compact,
    keyed,
    lake_through,
    new_topic,
    requests,
    rows,
    segment_file_names,
    unreferenced_files,
)
from tests.engine.reference_model import Expected, expected_pass
from tests.support.flaky_proxy import FlakyProxy, manifest_get, manifest_put, parquet_get_except, parquet_upload
from tests.support.fsyncs import record_fsyncs, synced_before_manifest
from tests.support.s3 import S3Endpoint

REPO = Path(__file__).resolve().parents[2]
JOB = compact_topic_path()
NOW = 500
#: Per backend: crash point → whether the log must read as after the compaction.
POINTS = {
    "local": {"engine.after_staging": False, "commit.after_manifest_write": True},
    "s3": {"engine.after_validation": False, "commit.before_manifest_write": False},
}


def _config_file(config: LakeConfig, path: Path) -> Path:
    storage: dict[str, Any] = {}
    s = config.storage
    if s.endpoint_url:
        storage = {
            "endpoint_url": s.endpoint_url,
            "region": s.region,
            "access_key_id": s.access_key_id,
            "secret_access_key": s.secret_access_key,
        }
    path.write_text(yaml.safe_dump({"lake": {"uri": config.lake_uri, "storage": storage}}))
    return path


def _dirty_topic(lake: Lake) -> Topic:
    topic = new_topic(lake)
    log = topic.partition(0)
    log.append(keyed({"a": "1", "b": "1", "c": None}), now_ms=100)
    log.roll(now_ms=100)
    log.append(keyed({"a": "2", "b": None}), now_ms=100)
    log.roll(now_ms=100)
    return topic


def _run_job(config_file: Path, topic: Topic, crash_at: str | None, spark_args: list[str]) -> subprocess.Popen[bytes]:
    env = {**os.environ, ENV_CRASH_AT: crash_at or ""}
    env.pop("LAKECLEANER_CONFIG", None)
    args = ["--config", str(config_file), "--topic", topic.name, "--now", str(NOW), *spark_args]
    return subprocess.Popen(
        [sys.executable, str(JOB), *args], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )


def test_a_crash_at_any_step_leaves_the_old_or_the_new_log(
    spark: SparkSession, lake: Lake, lake_config: LakeConfig, backend: str, tmp_path: Path, job_spark_args: list[str]
) -> None:
    points = POINTS[backend]
    config_file = _config_file(lake_config, tmp_path / "lakecleaner.yaml")
    topics = {point: _dirty_topic(lake) for point in points}
    before = {point: rows(t) for point, t in topics.items()}
    after = {}
    for point, t in topics.items():
        request = requests(t, NOW)[0]
        manifest = t.partition(0).manifest()
        after[point] = expected_pass(before[point], manifest, request.first_uncleanable_offset, t.config, NOW).rows
    children = {point: _run_job(config_file, t, point, job_spark_args) for point, t in topics.items()}
    for point, child in children.items():
        _, err = child.communicate(timeout=300)
        assert child.returncode == CRASH_EXIT_STATUS, f"{point}: {err.decode()[-2000:]}"
    for point, t in topics.items():
        assert rows(t) == (after[point] if points[point] else before[point]), point
        assert t.partition(0).manifest().problems() == []
    from lakecleaner.spark_jobs.compact_topic import main

    crashed = next(point for point, done in points.items() if not done)
    recovery = topics[crashed]
    assert main(["--config", str(config_file), "--topic", recovery.name, "--now", str(NOW)], spark=spark) == 0
    assert rows(recovery) == after[crashed]


def test_gc_run_during_a_compaction_with_now_days_ahead_deletes_none_of_its_files(
    spark: SparkSession, lake: Lake
) -> None:
    """Issue #14: the run's lease, not the files' age, protects what it has written but not committed."""
    topic = _dirty_topic(lake)
    before = rows(topic)
    request = requests(topic, NOW)[0]
    expected = expected_pass(before, topic.partition(0).manifest(), request.first_uncleanable_offset, topic.config, NOW)
    collected = []

    def gc_days_ahead() -> None:
        collected.append(gc_topic(lake, topic.name, wall_clock_ms() + 240 * 3_600_000))

    with on_crash_point("engine.after_staging", gc_days_ahead):
        report = compact(spark, lake, topic, NOW)
    (during,) = collected[0].partitions
    assert during.deleted_orphans == () and "hold a lease" in str(during.orphans_kept)
    assert report.partitions[0].status == "committed"
    assert rows(topic) == expected.rows


def test_a_staged_file_deleted_after_the_gate_is_never_committed(spark: SparkSession, lake: Lake) -> None:
    topic = _dirty_topic(lake)
    before = rows(topic)

    def delete_staged() -> None:
        for path in unreferenced_files(lake, topic):
            if path.endswith(".parquet"):
                lake.store.delete(topic.partition(0).prefix + path)

    with on_crash_point("engine.after_validation", delete_staged):
        report = compact(spark, lake, topic, NOW)
    (partition,) = report.partitions
    assert partition.status == "failed" and "is missing; nothing was committed" in partition.message
    assert rows(topic) == before


def _request_and_expected(topic: Topic) -> tuple[CompactionRequest, Expected]:
    """The partition's compaction request now, and what the reference model says the pass leaves."""
    request = requests(topic, NOW)[0]
    manifest = topic.partition(0).manifest()
    return request, expected_pass(rows(topic), manifest, request.first_uncleanable_offset, topic.config, NOW)


def test_a_staged_file_replaced_after_the_gate_is_never_committed(spark: SparkSession, lake: Lake) -> None:
    """Issue #14: the commit checks the version of each staged file, not only its size: a file
    rewritten with the very same bytes after the gate read it is another object, and not committed."""
    topic = _dirty_topic(lake)
    before = rows(topic)

    def rewrite_staged() -> None:
        for path in unreferenced_files(lake, topic):
            if path.endswith(".parquet"):
                key = topic.partition(0).prefix + path
                data = lake.store.read(key)
                lake.store.delete(key)
                lake.store.write(key, data)

    with on_crash_point("engine.after_validation", rewrite_staged):
        report = compact(spark, lake, topic, NOW)
    (partition,) = report.partitions
    assert partition.status == "failed" and "was replaced after the gate validated it" in partition.message
    assert rows(topic) == before


def _large_dirty_topic(lake: Lake) -> Topic:
    """A partition whose first file is past segment_files.WHOLE_OBJECT_BYTES (random values: 6 MB),
    which a reader without the task's prefetch reads by ranges, a GET per column chunk."""
    topic = new_topic(lake)
    log = topic.partition(0)
    log.append([Record(b"k%d" % (i % 1000), os.urandom(200), 100) for i in range(30_000)], now_ms=100)
    log.roll(now_ms=100)
    log.append(keyed({"k1": "2", "k2": None}), now_ms=100)
    log.roll(now_ms=100)
    return topic


@pytest.mark.parametrize("build", [_dirty_topic, _large_dirty_topic], ids=["small-files", "a-large-file"])
def test_a_partition_is_cleaned_with_one_get_of_each_input_file(
    spark: SparkSession, s3_endpoint: S3Endpoint, tmp_path: Path, build: Callable[[Lake], Topic]
) -> None:
    """Pass 1 and pass 2 of a partition whose map fits one task run in that task, which fetches
    the partition's files whole before pass 1 and keeps them for pass 2
    (`segment_files.FetchedFiles.prefetch`): each input file is fetched once in the whole run,
    with no HEAD and no ranged reads, a large one too (the gate reads back only the staged file).
    The output, a few records, is stored with one PUT, not a multipart upload, even where the
    input is large (`SegmentWriter`)."""
    with FlakyProxy(s3_endpoint.url) as proxy:
        lake = lake_through(proxy, s3_endpoint, tmp_path, max_attempts=4)
        topic = build(lake)
        request, expected = _request_and_expected(topic)
        inputs = [f for s in topic.partition(0).manifest().segments for f in s.files]
        proxy.seen.clear()
        report = compact_topic(spark, lake, topic.name, [request], NOW)
        seen = Counter((method, unquote(path.split("?")[0])) for method, path in proxy.seen)
    fetched = {f.path: sum(n for (m, key), n in seen.items() if key.endswith("/" + f.path)) for f in inputs}
    assert report.partitions[0].status == "committed" and rows(topic) == expected.rows
    assert len(inputs) == 2 and fetched == {f.path: 1 for f in inputs}, seen
    assert [key for (method, key) in seen if method == "POST"] == []  # no multipart upload
    assert max(f.size_bytes for f in inputs) > (WHOLE_OBJECT_BYTES if build is _large_dirty_topic else 0)


def test_a_compaction_through_a_flaky_store_counts_its_retries_in_the_run_report(
    spark: SparkSession, s3_endpoint: S3Endpoint, tmp_path: Path
) -> None:
    """Issue #14: every retry of the driver's storage operations is counted in the run report."""
    with FlakyProxy(s3_endpoint.url, fail_when=manifest_get) as proxy:
        lake = lake_through(proxy, s3_endpoint, tmp_path, max_attempts=4)
        topic = _dirty_topic(lake)
        request, expected = _request_and_expected(topic)
        proxy.failures_left = 2  # the run's own manifest reads (planning, gate, commit)
        report = compact_topic(spark, lake, topic.name, [request], NOW)
        stored = json.loads(lake.store.read(report.location.removeprefix(lake.store.root_uri + "/")))
    assert report.partitions[0].status == "committed" and rows(topic) == expected.rows
    assert report.storage_retries == 2 and stored["storage_retries"] == 2
    assert stored["statuses"] == {"committed": 1}


def test_an_upload_the_store_refuses_inside_a_spark_task_fails_its_partition_with_a_clear_message(
    spark: SparkSession, s3_endpoint: S3Endpoint, tmp_path: Path
) -> None:
    """Issue #14: the object store refuses the output's upload in pass 2: the partition fails with a
    one-line StorageError naming the file (no traceback from the Spark task), and its log is as it was."""

    with FlakyProxy(s3_endpoint.url, fail_when=parquet_upload) as proxy:
        lake = lake_through(proxy, s3_endpoint, tmp_path, max_attempts=2)
        topic = _dirty_topic(lake)
        before = rows(topic)
        proxy.failures_left = 10_000
        report = compact(spark, lake, topic, NOW)
    (partition,) = report.partitions
    assert partition.status == "failed" and "StorageError: write s3://" in partition.message
    assert "Traceback" not in partition.message and s3_endpoint.secret_key not in partition.message
    assert rows(topic) == before


@pytest.mark.parametrize(
    "options",
    [EngineOptions(), EngineOptions(dedupe_buffer_size=100)],
    ids=["in-pass-2s-task", "gate-tasks"],  # gate-tasks: key buckets, so the gate's own tasks read back
)
def test_a_storage_outage_during_the_gates_read_back_fails_its_partition_with_a_clear_message(
    spark: SparkSession, s3_endpoint: S3Endpoint, tmp_path: Path, options: EngineOptions
) -> None:
    """Issue #14: the store fails every read of the staged output: the gate's read-back inside the
    Spark task (pass 2's own, or the gate's) fails the partition with a one-line StorageError,
    nothing is committed."""
    inputs: set[str] = set()
    with FlakyProxy(s3_endpoint.url, 10_000, fail_when=parquet_get_except(inputs)) as proxy:
        lake = lake_through(proxy, s3_endpoint, tmp_path, max_attempts=2)
        topic = _dirty_topic(lake)
        inputs |= segment_file_names(topic)
        before = rows(topic)
        report = compact(spark, lake, topic, NOW, options=options)
        proxy.failures_left = 0
        (partition,) = report.partitions
        assert partition.status == "failed-quality" and "ServiceUnavailable" in partition.message
        assert "check that the storage endpoint is reachable" in partition.message
        assert "Traceback" not in partition.message and s3_endpoint.secret_key not in partition.message
        assert rows(topic) == before and unreferenced_files(lake, topic) == []


def test_a_compaction_whose_commit_reply_is_lost_commits_once_and_keeps_its_files(
    spark: SparkSession, s3_endpoint: S3Endpoint, tmp_path: Path
) -> None:
    """Issue #14: the manifest write of the commit is applied but its reply dropped; the retried
    write meets it as a 412. The run must see its own commit, not a lost race that discards the
    files the committed manifest now references."""

    with FlakyProxy(s3_endpoint.url, lose_when=manifest_put) as proxy:
        lake = lake_through(proxy, s3_endpoint, tmp_path, max_attempts=3)
        topic = _dirty_topic(lake)
        _, expected = _request_and_expected(topic)
        proxy.replies_to_lose = 1
        report = compact(spark, lake, topic, NOW)
        assert len(proxy.lost) == 1
    assert report.partitions[0].status == "committed"
    assert rows(topic) == expected.rows  # every file the manifest references is there


def _lightly_dirty_topic(spark: SparkSession, lake: Lake) -> Topic:
    """A topic compacted once (100 keys), then 10 of its keys updated: its next clean keeps the
    group's file and writes a deletion vector (issue 79)."""
    topic = new_topic(lake)
    log = topic.partition(0)
    log.append(keyed({f"k{i:03d}": "1" for i in range(100)}), now_ms=100)
    log.roll(now_ms=100)
    compact(spark, lake, topic, NOW - 100)
    log.append(keyed({f"k{i:03d}": "2" for i in range(10)}), now_ms=200)
    log.roll(now_ms=200)
    return topic


def test_a_crash_between_a_deletion_vector_and_its_commit_leaves_the_old_or_the_new_log(
    spark: SparkSession, lake: Lake, lake_config: LakeConfig, backend: str, tmp_path: Path, job_spark_args: list[str]
) -> None:
    points = POINTS[backend]
    config_file = _config_file(lake_config, tmp_path / "lakecleaner.yaml")
    topics = {point: _lightly_dirty_topic(spark, lake) for point in points}
    before = {point: rows(t) for point, t in topics.items()}
    children = {point: _run_job(config_file, t, point, job_spark_args) for point, t in topics.items()}
    for point, child in children.items():
        _, err = child.communicate(timeout=300)
        assert child.returncode == CRASH_EXIT_STATUS, f"{point}: {err.decode()[-2000:]}"
    for point, t in topics.items():
        vectors = [f.deletion_vector for s in t.partition(0).manifest().segments for f in s.files if f.deletion_vector]
        assert len(vectors) == (1 if points[point] else 0), point  # the new log, or the old one: never a mix
        latest = {r["key"]: r["value"] for r in rows(t)}
        assert len(rows(t)) == (100 if points[point] else 110) and latest[b"k001"] == b"2", point
    from lakecleaner.spark_jobs.compact_topic import main

    crashed = next(point for point, done in points.items() if not done)
    recovery = topics[crashed]
    assert main(["--config", str(config_file), "--topic", recovery.name, "--now", str(NOW)], spark=spark) == 0
    assert len(rows(recovery)) == 100 and rows(recovery) != before[crashed]
    log = recovery.partition(0)
    stored = {o.key[len(log.prefix) :] for o in lake.store.list(log.prefix + "segments/")}
    orphans = {p for p in stored if VECTOR_PATH.match(p)} - log.manifest().referenced_paths()
    assert len(orphans) == 1  # the crashed run's vector, referenced by nothing: gc's, by its age


def _streamed_and_vectored_topic(spark: SparkSession, lake: Lake) -> Topic:
    """Partition 0 compacted once, then a tenth of its keys updated: its next clean writes a
    deletion vector. Partition 1: 30k keys of 200 random bytes, a few updated: its output (6 MB)
    is past WHOLE_OBJECT_BYTES, which pyarrow streams to its place rather than `store.write`."""
    topic = new_topic(lake, partitions=2)
    vectored, streamed = topic.partition(0), topic.partition(1)
    vectored.append(keyed({f"k{i:03d}": "1" for i in range(100)}), now_ms=100)
    vectored.roll(now_ms=100)
    streamed.append([Record(b"k%05d" % i, os.urandom(200), 100) for i in range(30_000)], now_ms=100)
    streamed.roll(now_ms=100)
    compact(spark, lake, topic, NOW - 100)
    vectored.append(keyed({f"k{i:03d}": "2" for i in range(10)}), now_ms=200)
    streamed.append(keyed({"k00001": "2", "k00002": None}), now_ms=200)
    for log in (vectored, streamed):
        log.roll(now_ms=200)
    return topic


@pytest.mark.backends("local")
def test_on_a_local_lake_every_file_a_commit_names_is_fsynced_before_its_manifest(
    spark: SparkSession, lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tasks write their staged files unsynced (`ObjectStore.write(synced=False)`); the run
    fsyncs each file its commit will name (a group's new file, a deletion vector, a key index) in
    the driver before it writes the manifest (`_Run.staged_files`): after a crash of the machine a
    manifest never names a file the disk does not hold. Checked on the fsyncs this process makes: a
    vectored group, and an output large enough that pyarrow streamed it to its place."""
    topic = _streamed_and_vectored_topic(spark, lake)
    before = {p: topic.partition(p).manifest().live_paths() for p in range(2)}
    synced = record_fsyncs(monkeypatch)
    report = compact(spark, lake, topic, NOW + 100)
    monkeypatch.undo()
    assert [p.status for p in report.partitions] == ["committed", "committed"]
    for partition in range(2):
        log = topic.partition(partition)
        folder = f"{lake.store.root}/{log.prefix}"  # type: ignore[attr-defined]
        new = {folder + p for p in log.manifest().live_paths() - before[partition]}
        named = synced_before_manifest(synced, folder)
        assert new and new <= named, (partition, sorted(new - named))
    files = [f for s in topic.partition(0).manifest().segments for f in s.files]
    assert any(f.deletion_vector is not None for f in files)
    assert max(f.size_bytes for s in topic.partition(1).manifest().segments for f in s.files) > WHOLE_OBJECT_BYTES
