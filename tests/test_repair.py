"""`lakecleaner repair` keeps what commits acknowledged (issue #44), on every backend: a slow
committer's acknowledged append beats a later crashed writer's orphan of the same offsets, files no
record tells apart stop the repair until `--prefer` settles it, a live run's files are never adopted,
a writer whose files a repair adopted is told so, and a damaged topic.json or a manifest of any shape
is rebuilt."""

from __future__ import annotations

import json

import pytest

from lakecleaner.errors import AdoptedByRepair, CorruptManifest, TopicNotFound
from lakecleaner.faults import CRASH_EXIT_STATUS, on_crash_point
from lakecleaner.io import ObjectInfo
from lakecleaner.lake import Lake
from lakecleaner.log.commits import COMMITS, CommitRecord
from lakecleaner.log.layout import topic_metadata_key
from lakecleaner.log.leases import LEASE_TTL_MS, RunLeases, lease_expiry
from lakecleaner.log.partition import PartitionLog
from lakecleaner.log.records import Record
from lakecleaner.log.repair import RepairAmbiguous, repair_partition
from lakecleaner.log.segment_files import (
    KIND_COMPACTED,
    FileMeta,
    encode_segment_file,
    new_segment_path,
    read_file_meta,
    table_stats,
    write_segment_file,
)
from lakecleaner.log.source import KafkaSource
from lakecleaner.retention.gc import gc_topic
from tests.support import lake_process
from tests.support.backends import ALL_BACKENDS
from tests.support.fsyncs import record_fsyncs, synced_before_manifest

pytestmark = pytest.mark.backends(*ALL_BACKENDS)

NOW = 500_000
LATER = 10**13  # far past every file's delay: gc may delete whatever it would ever delete


def recs(n: int, prefix: str) -> list[Record]:
    return [Record(f"{prefix}{i}".encode(), f"{prefix}-value-{i}".encode(), NOW) for i in range(n)]


def segment_paths(lake: Lake, log: PartitionLog) -> list[str]:
    return sorted(o.key[len(log.prefix) :] for o in lake.store.list(log.prefix + "segments/"))


def slow_committer_and_crashed_orphan(lake: Lake) -> tuple[PartitionLog, str, str]:
    """Producer B writes its file and is slow to commit; producer A, started later, writes its file
    for the same offsets (a later written_ms) and crashes; B commits and is acknowledged. Returns
    the log, B's file and A's orphan."""
    log = lake.create_topic("t").partition(0)
    log.append(recs(3, "base"), now_ms=NOW)

    def crashed_writer() -> None:
        action = {"action": "append", "topic": "t", "partition": 0, "tag": "A", "batches": 1, "batch_size": 5}
        a = lake_process.start(lake.config, action, env={"LAKECLEANER_CRASH_AT": "append.after_data_write"})
        a.communicate(timeout=120)
        assert a.returncode == CRASH_EXIT_STATUS

    before = set(segment_paths(lake, log))
    with on_crash_point("append.after_data_write", crashed_writer):
        result = log.append(recs(5, "B"), now_ms=NOW)
    assert (result.base_offset, result.next_offset) == (3, 8)
    b_file = log.manifest().segments[-1].files[-1].path
    (a_file,) = set(segment_paths(lake, log)) - before - {b_file}
    a_meta, b_meta = read_file_meta(lake.store, log.prefix + a_file), read_file_meta(lake.store, log.prefix + b_file)
    # the case that fooled repair: same offsets, same intended version, the orphan written later
    assert (a_meta.stats.base_offset, a_meta.stats.next_offset) == (3, 8)
    assert a_meta.manifest_version == b_meta.manifest_version and a_meta.written_ms > b_meta.written_ms
    return log, b_file, a_file


@pytest.mark.parametrize("damage", ["corrupt", "missing", "readable"])
def test_repair_keeps_the_acknowledged_append_over_a_later_crashed_orphan(lake: Lake, damage: str) -> None:
    log, b_file, a_file = slow_committer_and_crashed_orphan(lake)
    acknowledged = log.read()
    assert acknowledged.column("key").to_pylist()[3:] == [f"B{i}".encode() for i in range(5)]
    if damage == "corrupt":
        lake.store.write(log.manifest_key, b'{"topic": "t", "segments": ["x"]')
    elif damage == "missing":
        lake.store.delete(log.manifest_key)
    report = repair_partition(lake.store, "t", 0, log.config, force=damage == "readable", now_ms=NOW)
    assert b_file in report.kept_files and a_file not in report.kept_files
    assert "superseded" in report.left_out[a_file]
    assert log.read().equals(acknowledged)
    gc_topic(lake, "t", LATER, orphan_min_age_ms=0)  # the left-out orphan goes; B's file never does
    assert segment_paths(lake, log).count(b_file) == 1 and a_file not in segment_paths(lake, log)
    assert log.read().equals(acknowledged)


def test_files_no_record_tells_apart_stop_the_repair_until_one_is_preferred(lake: Lake) -> None:
    """Without B's commit record (a lake written before records, or a crash right after the
    manifest write), nothing says which of the two files was acknowledged: repair writes and
    deletes nothing, names both, and `prefer` settles it."""
    log, b_file, a_file = slow_committer_and_crashed_orphan(lake)
    acknowledged = log.read()
    for obj in lake.store.list(log.prefix + COMMITS):
        record = CommitRecord.parse(obj.key[len(log.prefix) :])
        if record is not None and record.path == b_file:
            lake.store.delete(obj.key)
    damaged = b'{"topic": "t", "trunc'
    lake.store.write(log.manifest_key, damaged)
    with pytest.raises(RepairAmbiguous) as refused:
        repair_partition(lake.store, "t", 0, log.config, now_ms=NOW)
    message = str(refused.value)
    assert b_file in message and a_file in message and "--prefer" in message
    assert lake.store.read(log.manifest_key) == damaged
    assert {a_file, b_file} <= set(segment_paths(lake, log))
    report = repair_partition(lake.store, "t", 0, log.config, now_ms=NOW, prefer=[b_file])
    assert a_file in report.left_out and log.read().equals(acknowledged)


def _compacted_file(lake: Lake, log: PartitionLog, run_id: str) -> str:
    """A compaction's output over the whole log, as a run writes it before its commit."""
    table, manifest = log.read(), log.manifest()
    first = read_file_meta(lake.store, log.prefix + manifest.segments[0].files[0].path)
    stats = table_stats(table, 0, manifest.next_offset)
    meta = FileMeta(
        "t", 0, 0, KIND_COMPACTED, NOW, manifest.version + 1, first.first_batch_max_timestamp, stats, run_id=run_id
    )
    path = new_segment_path(0)
    write_segment_file(lake.store, log.prefix, path, encode_segment_file(table, meta), meta)
    return path


def test_repair_never_adopts_a_live_runs_files_and_leaves_a_dead_runs_output_out(lake: Lake) -> None:
    log = lake.create_topic("t").partition(0)
    log.append(recs(4, "k"), now_ms=NOW)
    log.roll(now_ms=NOW)
    expected = log.read()
    with RunLeases(lake.store, "run-1", [log.prefix], 1):
        staged = _compacted_file(lake, log, "run-1")
        report = repair_partition(lake.store, "t", 0, log.config, force=True, now_ms=NOW)
        assert staged in report.in_flight and "run-1" in report.in_flight[staged]
        assert staged not in log.manifest().referenced_paths()
    # the run died without committing (its lease is gone): its output covers offsets the
    # acknowledged files hold, so the old log stands and the output goes
    report = repair_partition(lake.store, "t", 0, log.config, force=True, now_ms=NOW)
    assert staged in report.left_out and log.read().equals(expected)


def test_a_writer_whose_files_a_repair_adopted_is_told_its_commit_did_not_land(lake: Lake) -> None:
    log = lake.create_topic("t").partition(0)
    log.append(recs(2, "k"), now_ms=NOW)

    def repair_meanwhile() -> None:
        repair_partition(lake.store, "t", 0, log.config, force=True, now_ms=NOW)

    with on_crash_point("append.after_data_write", repair_meanwhile), pytest.raises(AdoptedByRepair, match="repair"):
        log.append(recs(3, "late"), now_ms=NOW)
    # the repair took the file in: the records are in the log, once
    assert log.read().column("key").to_pylist() == [b"k0", b"k1", b"late0", b"late1", b"late2"]


@pytest.mark.parametrize(
    "content",
    [
        b'{"topic": "t", "partition": 0, "version": 3, "segments": ["x"]}',
        b'{"topic": "t", "partition": 0, "version": 3, "properties": [1, 2]}',
        b'{"topic": "t", "partition": 0, "version": 3, "log_start_offset": 1e999, "next_offset": 0}',
        b"[" * 200_000,
        bytes(range(256)),
    ],
    ids=["segments-of-strings", "properties-a-list", "offset-1e999", "deep-nesting", "random-bytes"],
)
@pytest.mark.backends("local", "seaweedfs")  # what is parsed is the same on every store
def test_repair_rebuilds_a_manifest_whatever_it_holds(lake: Lake, content: bytes) -> None:
    log = lake.create_topic("t").partition(0)
    log.append(recs(3, "k"), now_ms=NOW)
    expected = log.read()
    lake.store.write(log.manifest_key, content)
    report = repair_partition(lake.store, "t", 0, log.config, now_ms=NOW)
    assert report.previous_state.startswith("corrupt")
    assert log.read().equals(expected)


def test_repair_rebuilds_a_damaged_or_missing_topic_json_from_the_partitions_in_storage(lake: Lake) -> None:
    topic = lake.create_topic("t", partitions=3, config={"retention.ms": 7200000})
    topic.partition(2).append(recs(2, "k"), now_ms=NOW)
    key = topic_metadata_key("t")
    lake.store.write(key, b'{"name": "t", "partitions": "three", "config": {"retention.ms": 7200000}}')
    with pytest.raises(CorruptManifest):
        lake.topic("t")
    rebuilt = lake.repair_metadata("t")
    assert rebuilt is not None and rebuilt.previous_state == "damaged" and rebuilt.overrides_kept
    assert lake.topic("t").partitions == 3 and lake.topic("t").config.retention_ms == 7200000
    assert lake.repair_metadata("t") is None  # readable: nothing to do
    lake.store.delete(key)
    rebuilt = lake.repair_metadata("t")
    assert rebuilt is not None and rebuilt.previous_state == "missing" and not rebuilt.overrides_kept
    assert lake.topic("t").partition(2).read().num_rows == 2
    with pytest.raises(TopicNotFound):
        lake.repair_metadata("never-created")


def test_a_rebuilt_topic_json_keeps_the_kafka_source_the_damaged_one_still_records(lake: Lake) -> None:
    """A mirrored topic's recorded source (issue 74) survives a repair when it can be read whole:
    without it the next mirror would take whatever Kafka topic now has the name."""
    topic = lake.create_topic("t", partitions=2)
    source = KafkaSource("main", "cluster-1", "src", "topic-id-1", NOW, 0)
    lake.record_source("t", source, None)
    key = topic_metadata_key("t")
    damaged = json.loads(lake.store.read(key))
    damaged["partitions"] = "two"
    lake.store.write(key, json.dumps(damaged).encode())
    rebuilt = lake.repair_metadata("t")
    assert rebuilt is not None and rebuilt.to_dict()["source"] == source.to_dict()
    assert lake.topic("t").metadata.source == source and topic.partitions == 2


def test_gc_removes_a_commit_record_once_its_file_is_gone(lake: Lake) -> None:
    topic = lake.create_topic("t")
    log = topic.partition(0)
    log.append(recs(2, "k"), now_ms=NOW)
    log.roll(now_ms=NOW)
    log.append(recs(2, "j"), now_ms=NOW)
    first = log.manifest().segments[0].files[0].path
    records = {CommitRecord.parse(o.key[len(log.prefix) :]) for o in lake.store.list(log.prefix + COMMITS)}
    assert {r.path for r in records if r is not None} == set(log.manifest().referenced_paths())
    topic.partition(0).commit(
        lambda m: m.next_version(
            NOW,
            log_start_offset=2,
            segments=m.segments[1:],
            pending_deletes=m.with_pending_deletes([first], NOW, "test"),
        )
    )
    gc_topic(lake, "t", LATER, orphan_min_age_ms=0)
    left = {CommitRecord.parse(o.key[len(log.prefix) :]) for o in lake.store.list(log.prefix + COMMITS)}
    assert {r.path for r in left if r is not None} == set(log.manifest().referenced_paths())
    assert first not in {r.path for r in left if r is not None}


def test_a_lease_whose_expiry_lies_past_its_ttl_is_damage_not_a_lock_for_ever() -> None:
    written = 1_000_000
    obj = ObjectInfo("topics/t/partition=0/_staging/r.lease", 10, written)
    far = json.dumps({"run_id": "r", "expires_ms": 99_999_999_999_999, "holder": "h"}).encode()
    assert lease_expiry(obj, far).expires_ms == written + LEASE_TTL_MS
    fair = json.dumps({"run_id": "r", "expires_ms": written + LEASE_TTL_MS, "holder": "h"}).encode()
    assert lease_expiry(obj, fair).expires_ms == written + LEASE_TTL_MS
    for bad in (b"{", b'{"run_id": "r", "expires_ms": 1e999}', b'{"run_id": "r", "expires_ms": true}'):
        assert lease_expiry(obj, bad).expires_ms == written + LEASE_TTL_MS


@pytest.mark.backends("local")
def test_on_a_local_lake_repair_fsyncs_every_file_it_names_before_the_manifest(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crashed run's staged files are written unsynced (`ObjectStore.write(synced=False)`); a
    repair that adopts them fsyncs each file its manifest names before it writes the manifest."""
    log = lake.create_topic("t").partition(0)
    log.append(recs(3, "a"), now_ms=NOW)
    log.append(recs(2, "b"), now_ms=NOW)
    lake.store.delete(log.manifest_key)
    synced = record_fsyncs(monkeypatch)
    report = repair_partition(lake.store, "t", 0, log.config, now_ms=NOW)
    folder = f"{lake.store.root}/{log.prefix}"  # type: ignore[attr-defined]
    named = {folder + path for path in report.manifest.live_paths()}
    assert len(named) == 2 and named <= synced_before_manifest(synced, folder)
