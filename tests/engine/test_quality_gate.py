"""The quality gate stops a wrong staged output: the test tampers with a staged file at the
"engine.after_staging" crash point (before validation), or the store returns other bytes than were
written; the partition must fail the gate, keep its log as it was and lose its staged files, while
the other partition commits. A file changed after pass 2's task read it back is read back again by
the gate's own tasks."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from lakecleaner.config import LakeConfig
from lakecleaner.engine import EngineOptions
from lakecleaner.engine.gate_rows import Expectation, GateGroup, GateRules, GateTask, gate_check
from lakecleaner.engine.quality import CHECKS, READABLE_RULE
from lakecleaner.engine.report import COMMITTED, FAILED, FAILED_QUALITY
from lakecleaner.engine.storage import StoreSpec
from lakecleaner.faults import on_crash_point
from lakecleaner.lake import Lake, Topic
from lakecleaner.log.layout import partition_prefix
from lakecleaner.log.segment_files import FileMeta, encode_segment_file, read_file_meta, read_segment_file
from lakecleaner.runs.reports import load_report
from tests.engine.helpers import (
    compact,
    keyed,
    lake_through,
    new_topic,
    rows,
    sealed_two_partitions,
    segment_file_names,
    unreferenced_files,
)
from tests.support.flaky_proxy import FlakyProxy, parquet_get_except
from tests.support.s3 import S3Endpoint


def _change_a_value(table: pa.Table, superseded: pa.Table) -> pa.Table:
    values = table.column("value").to_pylist()
    values[0] = b"tampered"
    return table.set_column(table.schema.get_field_index("value"), "value", pa.array(values, pa.binary()))


def _resurrect_a_superseded_record(table: pa.Table, superseded: pa.Table) -> pa.Table:
    both = pa.concat_tables([table, superseded.slice(0, 1)])
    return both.take(pc.sort_indices(both, [("offset", "ascending")]))


def _drop_a_winner(table: pa.Table, superseded: pa.Table) -> pa.Table:
    return table.slice(1)


def _move_a_horizon(table: pa.Table, superseded: pa.Table) -> pa.Table:
    horizons = pa.array(range(len(table)), pa.int64())
    return table.set_column(table.schema.get_field_index("delete_horizon_ms"), "delete_horizon_ms", horizons)


Tamper = Callable[[pa.Table, pa.Table], pa.Table]
RULE = {check.column: check.rule for check in CHECKS}
#: The checks each tampering must break, at least.
BROKEN = {
    _change_a_value: {"unchanged"},
    _resurrect_a_superseded_record: {"unique_key", "is_winner", "entry_matches", "unchanged"},
    _drop_a_winner: {"winner_kept", "entry_matches", "unchanged"},
    _move_a_horizon: {"horizon_as_expected"},
}


def _tamper_with_staged_file(lake: Lake, topic: Topic, tamper: Tamper, original: pa.Table) -> Callable[[], None]:
    def hook() -> None:
        prefix = partition_prefix(topic.name, 0)
        (staged,) = [p for p in unreferenced_files(lake, topic, 0) if p.endswith(".parquet")]  # not its key index
        table = read_segment_file(lake.store, prefix + staged)
        superseded = original.filter(pc.invert(pc.is_in(original.column("offset"), table.column("offset"))))
        meta = read_file_meta(lake.store, prefix + staged)
        lake.store.write(prefix + staged, encode_segment_file(tamper(table, superseded), meta))

    return hook


@pytest.mark.parametrize(
    "options",
    [EngineOptions(), EngineOptions(dedupe_buffer_size=1024)],
    ids=["one-bucket", "key-buckets"],  # key-buckets: a gate task per bucket of pass 1's keys
)
@pytest.mark.parametrize("tamper", list(BROKEN), ids=["value", "superseded", "dropped", "horizon"])
def test_the_gate_stops_a_wrong_staged_output(
    spark: SparkSession, lake: Lake, tamper: Tamper, options: EngineOptions
) -> None:
    topic = sealed_two_partitions(lake, {"a": "1", "b": "1", "c": "1"}, {"a": "2", "b": "2"})
    before = rows(topic, 0)
    version = topic.partition(0).manifest().version
    original = topic.partition(0).read()
    with on_crash_point("engine.after_staging", _tamper_with_staged_file(lake, topic, tamper, original)):
        report = compact(spark, lake, topic, 500, options=options)
    failed, other = report.partition(0), report.partition(1)
    assert failed.status == FAILED_QUALITY
    assert other.status == COMMITTED, other.message
    assert failed.quality is not None and not failed.quality.success
    failures = failed.quality.failures
    assert failures and all("partition" in str(f.sample[0]) for f in failures if f.sample)
    assert "quality checks failed" in failed.message
    assert rows(topic, 0) == before and topic.partition(0).manifest().version == version
    assert unreferenced_files(lake, topic, 0) == []
    assert [r["value"] for r in rows(topic, 1)] == [b"1", b"2", b"2"]
    assert {RULE[check] for check in BROKEN[tamper]} <= {f.rule for f in failures}
    stored = load_report(lake.store, topic.name, report.run_id, "report")
    assert stored["failed"] is True and stored["partitions"][0]["status"] == FAILED_QUALITY
    assert json.dumps(stored)


def test_pass_2s_task_reads_its_output_back_and_stops_bytes_the_store_changed(
    spark: SparkSession, s3_endpoint: S3Endpoint, tmp_path: Path
) -> None:
    """A partition whose passes fit one task is read back for the gate by that task, straight after
    pass 2, and by no gate task after it: each staged file is read once, all before the run takes
    its verdicts ("engine.after_staging"). A store that returns other bytes than were written for
    partition 0's staged file fails that partition on the task's read-back (`unchanged`), and
    nothing of it is committed; partition 1 commits."""
    inputs: set[str] = set()
    staged_file = parquet_get_except(inputs)

    def change_a_value(method: str, path: str, body: bytes) -> bytes | None:
        if not (staged_file(method, path) and "/partition=0/" in unquote(path)):
            return None
        parquet = pq.ParquetFile(pa.BufferReader(body))
        meta = FileMeta.from_metadata(parquet.schema_arrow.metadata or {}, path)
        table = parquet.read()
        return encode_segment_file(_change_a_value(table, table), meta)

    with FlakyProxy(s3_endpoint.url, rewrite=change_a_value) as proxy:
        lake = lake_through(proxy, s3_endpoint, tmp_path, max_attempts=3)
        topic = sealed_two_partitions(lake, {"a": "1", "b": "1", "c": "1"}, {"a": "2", "b": "2"})
        inputs |= segment_file_names(topic)
        before = rows(topic, 0)
        verdicts: list[int] = []
        with on_crash_point("engine.after_staging", lambda: verdicts.append(len(proxy.seen))):
            report = compact(spark, lake, topic, 500)
        staged_reads = [path.split("?")[0] for method, path in proxy.seen if staged_file(method, path)]
        later = [path for method, path in proxy.seen[verdicts[0] :] if staged_file(method, path)]
    failed, other = report.partition(0), report.partition(1)
    assert failed.status == FAILED_QUALITY and other.status == COMMITTED, other.message
    assert failed.quality is not None and RULE["unchanged"] in {f.rule for f in failed.quality.failures}
    assert rows(topic, 0) == before and unreferenced_files(lake, topic, 0) == []
    assert [r["value"] for r in rows(topic, 1)] == [b"1", b"2", b"2"]
    assert len(staged_reads) == 2 and len(set(staged_reads)) == 2  # each partition's staged file, once
    assert later == []  # read back inside pass 2's tasks: no gate task read them again


def _in_row_groups_of_one(lake: Lake, key: str, table: pa.Table) -> None:
    """Store `table` at `key` as a segment file of one-record row groups, with the metadata of
    the file there now."""
    lake.store.write(key, encode_segment_file(table, read_file_meta(lake.store, key), row_group_size=1))


def test_input_files_of_many_row_groups_are_cleaned_a_row_group_at_a_time(spark: SparkSession, lake: Lake) -> None:
    """Pass 2 reads an input file a row group at a time, so that it holds no more of a large file
    than a row group: partition 0's input files, rewritten in one-record row groups, are cleaned
    as partition 1's are, and the result passes the gate."""
    topic = sealed_two_partitions(lake, {"a": "1", "b": "1", "c": "1"}, {"a": "2", "b": "2"})
    prefix = partition_prefix(topic.name, 0)
    for file in [f for s in topic.partition(0).manifest().segments for f in s.files]:
        _in_row_groups_of_one(lake, prefix + file.path, read_segment_file(lake.store, prefix + file.path))
    report = compact(spark, lake, topic, 500)
    assert [report.partition(p).status for p in (0, 1)] == [COMMITTED, COMMITTED], report.partition(0).message
    assert rows(topic, 0) == rows(topic, 1) and [r["value"] for r in rows(topic, 0)] == [b"1", b"2", b"2"]


@pytest.mark.parametrize("swap", [False, True], ids=["in-order", "swapped-across-row-groups"])
def test_the_gate_reads_a_staged_file_back_a_row_group_at_a_time(spark: SparkSession, lake: Lake, swap: bool) -> None:
    """The gate reads a staged file back a row group at a time: rewritten in one-record row groups
    it passes every check (and the commit then refuses it, as it is not the file staged: its size
    changed); with two records swapped across a row-group boundary, it fails `offset_increasing`."""
    topic = sealed_two_partitions(lake, {"a": "1", "b": "1", "c": "1"}, {"a": "2", "b": "2"})
    prefix = partition_prefix(topic.name, 0)

    def rewrite_staged() -> None:
        (staged,) = [p for p in unreferenced_files(lake, topic, 0) if p.endswith(".parquet")]  # not its key index
        table = read_segment_file(lake.store, prefix + staged)
        _in_row_groups_of_one(lake, prefix + staged, table.take([1, 0, 2]) if swap else table)

    before = rows(topic, 0)
    with on_crash_point("engine.after_staging", rewrite_staged):
        report = compact(spark, lake, topic, 500)
    gated = report.partition(0)
    assert report.partition(1).status == COMMITTED and rows(topic, 0) == before
    assert gated.quality is not None
    if swap:
        assert gated.status == FAILED_QUALITY
        assert RULE["offset_increasing"] in {f.rule for f in gated.quality.failures}
    else:
        assert gated.quality.success, gated.quality.failures
        assert "the gate validated" in gated.message, gated.message


def test_a_staged_file_that_cannot_be_read_back_fails_its_partition(spark: SparkSession, lake: Lake) -> None:
    topic = sealed_two_partitions(lake, {"a": "1", "b": "1"}, {"a": "2"})
    before = rows(topic, 0)

    def delete_the_staged_file() -> None:
        (staged,) = [p for p in unreferenced_files(lake, topic, 0) if p.endswith(".parquet")]  # not its key index
        lake.store.delete(partition_prefix(topic.name, 0) + staged)

    with on_crash_point("engine.after_staging", delete_the_staged_file):
        report = compact(spark, lake, topic, 500)
    failed = report.partition(0)
    assert failed.status == FAILED_QUALITY and report.partition(1).status == COMMITTED
    assert failed.quality is not None
    (unreadable,) = [f for f in failed.quality.failures if f.rule == READABLE_RULE]
    assert "missing" in str(unreadable.sample[0])
    assert rows(topic, 0) == before


def test_a_cleaner_checkpoint_over_uncleaned_records_fails_the_gate_and_is_reset(
    spark: SparkSession, lake: Lake
) -> None:
    """Pass 1 trusts the cleaned section below the cleaner checkpoint to hold each key once, as
    Kafka's cleaner does. A checkpoint moved over records never cleaned (here by hand) breaks that
    trust: the duplicated key reaches the staged output, and the gate, which checks the keys of
    the whole cleaned range, stops the commit. The run resets the checkpoint and nothing else, the
    other partition commits, and the next run cleans the partition from its log start."""
    topic = sealed_two_partitions(lake, {"a": "1", "b": "1"}, {"a": "2"})
    for p in range(2):
        topic.partition(p).append(keyed(dict.fromkeys("cdef", "3")), now_ms=100)  # dirty enough to clean
        topic.partition(p).roll(now_ms=100)
    log = topic.partition(0)
    uncleaned = log.manifest().segments[0].next_offset  # past both records of "a"
    log.commit(lambda m: m.next_version(100, cleaner_checkpoint=uncleaned))
    before, before_manifest = rows(topic, 0), log.manifest()
    version = before_manifest.version
    report = compact(spark, lake, topic, 500)
    failed = report.partition(0)
    assert failed.status == FAILED_QUALITY
    assert failed.quality is not None
    assert {RULE["unique_key"], RULE["clean_keys_once"]} <= {f.rule for f in failed.quality.failures}
    assert f"the cleaner checkpoint {uncleaned} was reset" in failed.message
    after = log.manifest()  # the run reset the checkpoint, and changed nothing else
    assert after.cleaner_checkpoint is None and after.version == version + 1
    assert after.segments == before_manifest.segments and rows(topic, 0) == before
    assert unreferenced_files(lake, topic, 0) == []
    assert report.partition(1).status == COMMITTED
    assert [r["value"] for r in rows(topic, 1)] == [b"1", b"2", b"3", b"3", b"3", b"3"]
    state = lake.cleaner_state.read(topic.name)
    assert 0 not in state.uncleanable  # not skipped: the next run cleans it from the log start
    again = compact(spark, lake, topic, 600)
    assert again.partition(0).status == COMMITTED, again.partition(0).message
    assert [r["value"] for r in rows(topic, 0)] == [b"1", b"2", b"3", b"3", b"3", b"3"]


@pytest.mark.classic_pass("it counts the store's GETs; the gate's key buckets run on Connect in test_against_duckdb.py")
def test_a_partition_checked_in_key_buckets_reads_each_output_file_back_once(
    spark: SparkSession, s3_endpoint: S3Endpoint, tmp_path: Path
) -> None:
    """A partition whose keys outgrow one offset map is checked in key buckets: one task reads back
    each output file and spills its keys by bucket, and each bucket's task reads its keys from the
    spills, so no output file is read once per bucket (a partition of 100M keys in 33 buckets
    would read its keys 33 times). The spills are gone after the run."""
    with FlakyProxy(s3_endpoint.url) as proxy:
        lake = lake_through(proxy, s3_endpoint, tmp_path, max_attempts=3)
        topic = new_topic(lake, segment_bytes=4096)  # a group a segment: several output files
        log = topic.partition(0)
        for batch in range(4):
            log.append(keyed({f"k{i:03d}": f"{batch}" for i in range(batch * 20, batch * 20 + 60)}), now_ms=100)
            log.roll(now_ms=100)
        gated: list[int] = []
        with on_crash_point("engine.after_staging", lambda: gated.append(len(proxy.seen))):
            report = compact(spark, lake, topic, 500, options=EngineOptions(dedupe_buffer_size=1024))
        reads = Counter(path.split("?")[0] for method, path in proxy.seen[gated[0] :] if method == "GET")
    partition = report.partition(0)
    assert partition.status == COMMITTED, partition.message
    assert partition.key_buckets > 2
    outputs = [f.path for s in log.manifest().segments for f in s.files]
    assert len(outputs) > 2
    assert [n for path, n in reads.items() if path.endswith(".parquet")] == [1] * len(outputs)
    assert sum(1 for path in reads if path.endswith(".arrow")) > 2  # each record task's spill, read by the key tasks
    assert unreferenced_files(lake, topic) == []
    assert {r["key"]: r["value"] for r in rows(topic)} == {
        f"k{i:03d}".encode(): str(min(i // 20, 3)).encode() for i in range(120)
    }


SPILL_REQUESTS = {"write": ("PUT", "POST"), "read": ("GET", "HEAD")}


def spilling_topic(lake: Lake) -> Topic:
    """Two sealed partitions: partition 0 of 120 keys in four overlapping batches, whose map
    outgrows a 1 KB dedupe buffer (pass 1 and the gate spill its keys) and whose output is several
    files; partition 1 of two keys, one task's."""
    topic = new_topic(lake, partitions=2, segment_bytes=4096)
    for batch in range(4):
        many = {f"k{i:03d}": f"{batch}" for i in range(batch * 20, batch * 20 + 60)}
        topic.partition(0).append(keyed(many), now_ms=100)
        topic.partition(1).append(keyed({"a": f"{batch}", "b": f"{batch}"}), now_ms=100)
    for p in range(2):
        topic.partition(p).roll(now_ms=100)
    return topic


ON_CLASSIC = pytest.mark.classic_pass("test_crash.py sends a storage outage of the gate's tasks through Connect")
ON_CLASSIC_MAP = pytest.mark.classic_pass(
    "test_uncleanable.py sends a storage failure of pass 1's tasks through Connect"
)


@pytest.mark.parametrize(
    ("step", "operation"),
    [
        pytest.param("gate", "write", marks=ON_CLASSIC),
        pytest.param("gate", "read", marks=ON_CLASSIC),
        pytest.param("map", "read", marks=ON_CLASSIC_MAP),
    ],
)
def test_a_spill_the_store_refuses_fails_its_partition_and_loses_nothing(
    spark: SparkSession, s3_endpoint: S3Endpoint, tmp_path: Path, step: str, operation: str
) -> None:
    """A partition whose keys outgrow one offset map spills between two steps: pass 1's scatter and
    map tasks (`map`), the gate's record and key tasks (`gate`). When the store refuses every write
    or every read of one step's spills, that partition fails — the gate (failed-quality) or pass 1
    (failed: the store failed, not the partition's data, and Kafka marks a log directory offline
    on an IOException, never the partition uncleanable), not the Spark job — with the
    storage error and the spill named, keeps its log as it was and is left with no staged file or
    spill; the other partition, small enough for one task, commits; the next run, the store well
    again, commits both."""
    refusing = lambda method, path: method in SPILL_REQUESTS[operation] and f".{step}-" in path  # noqa: E731
    with FlakyProxy(s3_endpoint.url, 10_000, fail_when=refusing) as proxy:
        lake = lake_through(proxy, s3_endpoint, tmp_path, max_attempts=2)
        topic = spilling_topic(lake)
        before, version = rows(topic, 0), topic.partition(0).manifest().version
        options = EngineOptions(dedupe_buffer_size=1024)
        report = compact(spark, lake, topic, 500, options=options)
        refused = [path for method, path in proxy.seen if refusing(method, path)]
        proxy.failures_left = 0
        failed = report.partition(0)
        assert refused
        if step == "gate":
            assert failed.key_buckets > 1
            assert failed.status == FAILED_QUALITY, failed.message
            assert failed.quality is not None
            (unreadable,) = [f for f in failed.quality.failures if f.rule == READABLE_RULE]
            reason = str(unreadable.sample[0])
        else:
            assert failed.status == FAILED, failed.message
            reason = failed.message
        assert f".{step}-" in reason and operation in reason and s3_endpoint.secret_key not in reason
        assert rows(topic, 0) == before and topic.partition(0).manifest().version == version
        assert unreferenced_files(lake, topic) == []
        assert report.partition(1).status == COMMITTED
        assert [r["value"] for r in rows(topic, 1)] == [b"3", b"3"]
        again = compact(spark, lake, topic, 600, options=options)
    assert again.partition(0).status == COMMITTED, again.partition(0).message
    assert {r["key"]: r["value"] for r in rows(topic, 0)} == {
        f"k{i:03d}".encode(): str(min(i // 20, 3)).encode() for i in range(120)
    }


def test_on_a_versioned_bucket_what_a_run_discards_leaves_no_old_version(
    spark: SparkSession, s3_endpoint: S3Endpoint
) -> None:
    """lake.storage.delete_all_versions on a versioned bucket (which keeps a deleted object's bytes
    as an old version): the staged output of a partition that fails the gate, pass 1's and the
    gate's key spills and the run's leases are deleted with every version, as gc deletes, so no
    copy of the records they held stays in the bucket."""
    client = s3_endpoint.client()
    bucket = f"versioned-run-{uuid.uuid4().hex[:8]}"
    client.create_bucket(Bucket=bucket)
    client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    lake = Lake.open(LakeConfig(f"s3://{bucket}/v", s3_endpoint.settings(delete_all_versions=True)))
    topic = spilling_topic(lake)
    prefix = partition_prefix(topic.name, 0)
    staged: list[str] = []

    def tamper() -> None:  # a value changed in one of the files partition 0 staged
        staged.extend(unreferenced_files(lake, topic, 0))
        table = read_segment_file(lake.store, prefix + staged[0])
        meta = read_file_meta(lake.store, prefix + staged[0])
        lake.store.write(prefix + staged[0], encode_segment_file(_change_a_value(table, table), meta))

    with on_crash_point("engine.after_staging", tamper):
        report = compact(spark, lake, topic, 500, options=EngineOptions(dedupe_buffer_size=1024))
    assert report.partition(0).status == FAILED_QUALITY and report.partition(1).status == COMMITTED
    assert report.partition(0).key_buckets > 1  # pass 1 and the gate spilled keys
    listed = client.list_object_versions(Bucket=bucket, Prefix="v/")
    data = ("/segments/", "/_staging/")
    old = [v["Key"] for v in listed.get("Versions", []) if not v["IsLatest"] and any(d in v["Key"] for d in data)]
    markers = [m["Key"] for m in listed.get("DeleteMarkers", []) if any(d in m["Key"] for d in data)]
    assert staged and old == [] and markers == []
    assert not any(v["Key"].endswith(tuple(staged)) for v in listed.get("Versions", []))


def test_a_kept_group_fails_the_gate_for_a_tombstone_without_a_horizon_or_one_past_it(
    spark: SparkSession, lake: Lake
) -> None:
    """A group that keeps its files (unchanged or vectored) is read back without its values: a
    horizon that has passed is a tombstone that should have gone (KIP-534), and its files must
    store a horizon for each tombstone the manifest counts."""
    topic = new_topic(lake)
    log = topic.partition(0)
    log.append(keyed({"a": "1", "b": None}), now_ms=100)  # b's tombstone, not stamped: an append
    log.roll(now_ms=100)
    (segment,) = log.manifest().segments
    group = GateGroup(segment.base_offset, segment.next_offset, segment.files, True, 1, Expectation())
    spec, prefix = StoreSpec.of(lake), partition_prefix(topic.name, 0)

    def checks(now_ms: int) -> set[str]:
        task = GateTask(0, prefix, (group,), segment.next_offset)
        outcome = gate_check(spec, GateRules(now_ms, now_ms + 1), task)
        assert outcome.unreadable is None
        return set(outcome.violations.column("check").to_pylist())

    assert checks(1_000) == {"horizon_as_expected"}
    assert compact(spark, lake, topic, 1_000).totals.tombstones_stamped == 1
    (segment,) = log.manifest().segments
    group = GateGroup(segment.base_offset, segment.next_offset, segment.files, True, 1, Expectation())
    horizon = 1_000 + topic.config.delete_retention_ms
    assert checks(horizon - 1) == set()
    assert checks(horizon) == {"is_winner"}
