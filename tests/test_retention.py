"""Retention execution end to end on both backends: rules, consumed retention, trim, gc, safety."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping

import pytest

from lakecleaner.clock import wall_clock_ms
from lakecleaner.errors import OffsetOutOfRange
from lakecleaner.faults import CRASH_EXIT_STATUS, on_crash_point
from lakecleaner.io import ObjectInfo
from lakecleaner.lake import Lake
from lakecleaner.log.partition import PartitionLog
from lakecleaner.log.records import Record
from lakecleaner.offsets import group_key
from lakecleaner.retention import gc_topic, retain_topic, trim_partition
from lakecleaner.retention.gc import VersionedBucketError
from lakecleaner.runs.reports import expired_runs, report_key, runs_prefix, store_report

HOUR = 3_600_000
T0 = 1_700_000_000_000


def build(
    lake: Lake, name: str, config: Mapping[str, object], stamps: list[int], per_segment: int = 10, partitions: int = 1
) -> list[PartitionLog]:
    """A topic whose partitions each have one sealed segment per timestamp (records stamped with it),
    plus an active segment holding one record stamped with the last timestamp."""
    topic = lake.create_topic(name, partitions=partitions, config=dict(config))
    logs = topic.partition_logs()
    for log in logs:
        for i, ts in enumerate(stamps):
            log.append([Record(f"k{i}-{j}".encode(), f"v{i}-{j}".encode(), ts) for j in range(per_segment)], now_ms=T0)
            log.roll(now_ms=T0)
        log.append([Record(b"last", b"x", stamps[-1])], now_ms=T0)
    return logs


def bases(log: PartitionLog) -> list[int]:
    return [s.base_offset for s in log.manifest().segments]


def test_retention_ms_deletes_older_segments_and_keeps_the_one_exactly_at_the_limit(lake: Lake) -> None:
    (log,) = build(lake, "t", {"retention.ms": 10 * HOUR}, [T0, T0 + HOUR, T0 + 2 * HOUR])
    now = T0 + 11 * HOUR  # first segment is 11h old (> 10h), second exactly 10h old (kept)
    report = retain_topic(lake, "t", now)
    (result,) = report.partitions
    assert result.status == "committed" and result.quality is not None and result.quality.success
    assert bases(log) == [10, 20, 30]
    assert log.manifest().log_start_offset == 10
    assert report.to_dict()["partitions"][0]["deleted_by_rule"] == {
        "retention.ms": {"segments": 1, "bytes": result.plan.deletions[0].size_bytes, "records": 10}  # type: ignore[union-attr]
    }
    with pytest.raises(OffsetOutOfRange):
        log.read(5)
    assert report.location is not None and lake.store.exists(report.location.split(lake.uri + "/", 1)[1])


def test_expired_segment_behind_a_newer_one_survives(lake: Lake) -> None:
    (log,) = build(lake, "t", {"retention.ms": HOUR}, [T0 + 5 * HOUR, T0, T0])
    retain_topic(lake, "t", T0 + 3 * HOUR)  # the first segment is young: the scan stops there
    assert bases(log) == [0, 10, 20, 30]


def test_retention_bytes_stops_where_the_next_deletion_would_go_below_the_limit(lake: Lake) -> None:
    (log,) = build(lake, "t", {"retention.ms": -1}, [T0, T0, T0, T0])
    segments = log.manifest().segments
    total = sum(s.size_bytes for s in segments)
    # keep exactly the last two sealed segments and the active one: diff == first two segments' bytes
    limit = total - segments[0].size_bytes - segments[1].size_bytes
    lake.alter_topic("t", {"retention.bytes": limit + 1})  # one byte more: only one segment may go
    retain_topic(lake, "t", T0)
    assert bases(log) == [10, 20, 30, 40]
    lake.alter_topic("t", {"retention.bytes": limit})
    retain_topic(lake, "t", T0)
    assert bases(log) == [20, 30, 40]


def test_consumed_retention_deletes_only_what_every_group_consumed(lake: Lake) -> None:
    config = {"retention.ms": 100 * HOUR, "retention.commitoffset.ms": HOUR}
    (log,) = build(lake, "events", config, [T0, T0, T0, T0])
    lake.offsets.commit("fast", "events", {0: 35})
    lake.offsets.commit("slow", "events", {0: 20})  # segment [10, 20) consumed by both; [20, 30) not by slow
    report = retain_topic(lake, "events", T0 + 2 * HOUR)
    (result,) = report.partitions
    assert bases(log) == [20, 30, 40]
    assert [d.rule for d in result.plan.deletions] == ["consumed", "consumed"]  # type: ignore[union-attr]
    assert result.plan.held_back_by == ("slow",)  # type: ignore[union-attr]
    assert result.consumers_below_log_start == {}


def test_consumed_retention_respects_its_age_limit(lake: Lake) -> None:
    config = {"retention.ms": 100 * HOUR, "retention.commitoffset.ms": 5 * HOUR}
    (log,) = build(lake, "events", config, [T0, T0])
    lake.offsets.commit("g", "events", {0: 20})
    retain_topic(lake, "events", T0 + 5 * HOUR)  # exactly the limit: not older than it
    assert bases(log) == [0, 10, 20]
    retain_topic(lake, "events", T0 + 5 * HOUR + 1)
    assert bases(log) == [20]


def test_unreadable_group_stops_consumed_retention_but_not_forced_retention(lake: Lake) -> None:
    config = {"retention.ms": 10 * HOUR, "retention.commitoffset.ms": HOUR}
    (log,) = build(lake, "events", config, [T0, T0 + 5 * HOUR, T0 + 5 * HOUR])
    lake.offsets.commit("ok", "events", {0: 31})
    lake.offsets.commit("broken", "events", {0: 31})
    lake.store.write(group_key("broken"), b"{corrupt")
    report = retain_topic(lake, "events", T0 + 11 * HOUR)
    (result,) = report.partitions
    assert bases(log) == [10, 20, 30]  # retention.ms took the first; consumed retention did nothing more
    assert [d.rule for d in result.plan.deletions] == ["retention.ms"]  # type: ignore[union-attr]
    assert "broken" in (result.plan.consumed_skipped or "")  # type: ignore[union-attr]


def test_consumers_below_the_new_log_start_are_reported(lake: Lake) -> None:
    config = {"retention.ms": HOUR, "retention.commitoffset.ms": HOUR}
    build(lake, "events", config, [T0, T0 + 10 * HOUR])
    lake.offsets.commit("laggard", "events", {0: 3})
    (result,) = retain_topic(lake, "events", T0 + 2 * HOUR).partitions
    assert result.consumers_below_log_start == {"laggard": 3}


def test_compact_only_topic_deletes_only_below_the_log_start_offset(lake: Lake) -> None:
    (log,) = build(lake, "cdc", {"cleanup.policy": "compact", "retention.ms": 1}, [T0, T0, T0])
    retain_topic(lake, "cdc", T0 + 100 * HOUR)
    assert bases(log) == [0, 10, 20, 30]  # retention.ms does not apply to compact-only topics
    trim_partition(lake, "cdc", 0, 25, now_ms=T0)
    with pytest.raises(OffsetOutOfRange):
        log.read(24)
    assert log.read(25).column("offset").to_pylist()[0] == 25
    retain_topic(lake, "cdc", T0)
    assert bases(log) == [20, 30] and log.manifest().log_start_offset == 25


def test_trim_outside_the_log_is_an_error_not_a_clamp(lake: Lake) -> None:
    build(lake, "t", {}, [T0])
    with pytest.raises(OffsetOutOfRange, match="beyond the log end offset 11"):
        trim_partition(lake, "t", 0, 12)
    trim_partition(lake, "t", 0, 5)
    with pytest.raises(OffsetOutOfRange, match="below the log start offset 5"):
        trim_partition(lake, "t", 0, 4)


def test_deleting_everything_leaves_an_empty_log_that_accepts_appends_at_the_old_end(lake: Lake) -> None:
    (log,) = build(lake, "t", {"retention.ms": HOUR}, [T0, T0])
    retain_topic(lake, "t", T0 + 2 * HOUR)
    manifest = log.manifest()
    assert manifest.segments == () and manifest.log_start_offset == manifest.next_offset == 21
    assert log.read().num_rows == 0
    assert log.append([Record(b"new", b"1", T0)], now_ms=T0).base_offset == 21
    assert log.read().column("offset").to_pylist() == [21]


def test_dry_run_changes_nothing(lake: Lake) -> None:
    (log,) = build(lake, "t", {"retention.ms": HOUR}, [T0, T0])
    before = log.manifest()
    report = retain_topic(lake, "t", T0 + 2 * HOUR, dry_run=True)
    assert report.partitions[0].status == "dry-run" and len(report.partitions[0].plan.deletions) == 3  # type: ignore[union-attr]
    assert log.manifest() == before


def test_quality_gate_blocks_a_result_whose_remaining_segment_is_unreadable(lake: Lake) -> None:
    (log,) = build(lake, "t", {"retention.ms": HOUR}, [T0, T0 + 10 * HOUR])
    survivor = log.manifest().segments[1].files[0].path
    lake.store.delete(log.prefix + survivor)
    before = log.manifest()
    (result,) = retain_topic(lake, "t", T0 + 2 * HOUR).partitions
    assert result.status == "failed-quality"
    assert result.quality is not None and "still readable" in result.quality.summary()
    assert f"unreadable: {lake.store.location(log.prefix + survivor)} is missing" in str(result.error)
    assert log.manifest() == before


def test_partitions_are_checked_together_and_a_damaged_one_fails_alone(lake: Lake) -> None:
    """One validation for every partition's result; when it fails, halves are validated again down
    to the partition that fails on its own: that one keeps its log, the others commit."""
    logs = build(lake, "t", {"retention.ms": HOUR}, [T0, T0 + 10 * HOUR], partitions=8)
    damaged = logs[5]
    survivor = damaged.manifest().segments[1].files[0].path
    lake.store.delete(damaged.prefix + survivor)
    before = damaged.manifest()
    results = retain_topic(lake, "t", T0 + 2 * HOUR).partitions
    assert [r.status for r in results] == ["committed"] * 5 + ["failed-quality"] + ["committed"] * 2
    failed = results[5]
    assert failed.quality is not None and failed.quality.subject == "retention of t-5"
    assert "still readable" in failed.quality.summary()
    assert f"unreadable: {lake.store.location(damaged.prefix + survivor)} is missing" in str(failed.error)
    assert damaged.manifest() == before
    subjects = {r.partition: r.quality.subject for r in results if r.quality is not None and r.quality.success}
    assert subjects == {
        **dict.fromkeys(range(4), "retention of t partitions 0..3 (4 checked together)"),
        4: "retention of t-4",
        **dict.fromkeys((6, 7), "retention of t partitions 6..7 (2 checked together)"),
    }
    assert all(bases(log) == [10, 20] for i, log in enumerate(logs) if i != 5)


def test_a_commit_between_the_check_and_retentions_commit_makes_it_plan_and_check_again(lake: Lake) -> None:
    """Another writer commits to a partition after the checks: that partition's retention is
    planned and checked again, on its own, on what the writer left; nothing the writer wrote is lost."""
    logs = build(lake, "t", {"retention.ms": HOUR}, [T0, T0 + 10 * HOUR], partitions=2)

    def concurrent_append() -> None:
        logs[0].append([Record(b"late", b"y", T0 + 10 * HOUR)], now_ms=T0)

    with on_crash_point("retention.after_validation", concurrent_append):
        results = retain_topic(lake, "t", T0 + 2 * HOUR).partitions
    assert [r.status for r in results] == ["committed", "committed"]
    assert results[0].quality is not None and results[0].quality.subject == "retention of t-0"
    assert (
        results[1].quality is not None
        and results[1].quality.subject == "retention of t partitions 0..1 (2 checked together)"
    )
    assert all(r.quality is not None and r.quality.success for r in results)
    assert bases(logs[0]) == bases(logs[1]) == [10, 20]
    assert logs[0].read().column("key").to_pylist()[-2:] == [b"last", b"late"]


def test_a_crash_after_the_checks_commits_nothing_and_the_next_run_commits(lake: Lake) -> None:
    logs = build(lake, "t", {"retention.ms": HOUR}, [T0, T0 + 10 * HOUR], partitions=2)
    before = [log.manifest() for log in logs]

    def crash() -> None:
        raise RuntimeError("killed")

    with on_crash_point("retention.after_validation", crash), pytest.raises(RuntimeError):
        retain_topic(lake, "t", T0 + 2 * HOUR)
    assert [log.manifest() for log in logs] == before
    assert [r.status for r in retain_topic(lake, "t", T0 + 2 * HOUR).partitions] == ["committed", "committed"]
    assert all(bases(log) == [10, 20] for log in logs)


def test_reader_holding_the_old_manifest_reads_until_the_delete_delay_passes(lake: Lake) -> None:
    (log,) = build(lake, "t", {"retention.ms": HOUR, "file.delete.delay.ms": 60_000}, [T0, T0 + 10 * HOUR])
    snapshot = log.manifest()
    expected = log.read(manifest=snapshot)
    now = T0 + 2 * HOUR
    retain_topic(lake, "t", now)
    assert bases(log) == [10, 20]
    gc_topic(lake, "t", now + 59_999)  # delay not yet passed
    assert log.read(manifest=snapshot).equals(expected)
    report = gc_topic(lake, "t", now + 60_000)
    assert report.files_deleted == 1
    with pytest.raises(Exception, match="missing"):
        log.read(manifest=snapshot)
    assert log.manifest().pending_deletes == ()
    assert log.read().column("offset").to_pylist() == list(range(10, 21))


def _all_referenced_files_exist(lake: Lake, log: PartitionLog) -> bool:
    present = {o.key[len(log.prefix) :] for o in lake.store.list(log.prefix)}
    return {f.path for s in log.manifest().segments for f in s.files} <= present


@pytest.mark.parametrize("deleted_before_the_crash", [1, 2], ids=["part", "all"])
def test_crash_during_physical_deletion_is_finished_by_the_next_run(lake: Lake, deleted_before_the_crash: int) -> None:
    """gc deletes a partition's due files (in one request where the store can), then drops them
    from the manifest: a crash after some or all of the deletions, before the commit, is finished
    by the next run."""
    (log,) = build(lake, "t", {"retention.ms": HOUR, "file.delete.delay.ms": 0}, [T0, T0, T0 + 10 * HOUR])
    retain_topic(lake, "t", T0 + 2 * HOUR)
    pending = [p.path for p in log.manifest().pending_deletes]
    assert len(pending) == 2

    def crash() -> None:
        for path in pending[deleted_before_the_crash:]:  # a batch the store applied in part
            lake.store.write(log.prefix + path, b"not yet deleted")
        raise RuntimeError("killed")

    with on_crash_point("gc.before_manifest_commit", crash), pytest.raises(RuntimeError):
        gc_topic(lake, "t", T0 + 2 * HOUR)
    assert [p.path for p in log.manifest().pending_deletes] == pending
    assert [lake.store.exists(log.prefix + p) for p in pending] == [False] * deleted_before_the_crash + [True] * (
        2 - deleted_before_the_crash
    )
    assert _all_referenced_files_exist(lake, log)
    report = gc_topic(lake, "t", T0 + 2 * HOUR)
    assert sorted(report.partitions[0].deleted_pending) == sorted(pending)
    assert log.manifest().pending_deletes == ()
    for path in pending:
        assert not lake.store.exists(log.prefix + path)
    assert _all_referenced_files_exist(lake, log)


def test_crash_between_retention_commit_and_physical_deletion(lake: Lake) -> None:
    """The commit and the physical deletion are separate steps: a run that stops after the first
    leaves every removed file present and pending, and the next gc deletes them."""
    (log,) = build(lake, "t", {"retention.ms": HOUR, "file.delete.delay.ms": 0}, [T0, T0 + 10 * HOUR])
    retain_topic(lake, "t", T0 + 2 * HOUR)
    pending = [p.path for p in log.manifest().pending_deletes]
    assert all(lake.store.exists(log.prefix + p) for p in pending) and _all_referenced_files_exist(lake, log)
    gc_topic(lake, "t", T0 + 2 * HOUR)
    assert not any(lake.store.exists(log.prefix + p) for p in pending)


def test_gc_removes_old_orphans_but_not_young_ones_or_referenced_files(lake: Lake) -> None:
    (log,) = build(lake, "t", {"file.delete.delay.ms": 1000}, [T0])
    lake.store.write(log.prefix + "segments/00000000000000000099-orphan.parquet", b"left by a crash")
    lake.store.write(log.prefix + "_staging/run-1/00000000000000000000-x.parquet", b"left by a crashed run")
    wall = lake.store.stat(log.prefix + "segments/00000000000000000099-orphan.parquet").mtime_ms
    young = gc_topic(lake, "t", wall + 500, orphan_min_age_ms=0)
    assert young.files_deleted == 0
    old = gc_topic(lake, "t", wall + 10_000, orphan_min_age_ms=0)
    assert sorted(old.partitions[0].deleted_orphans) == [
        "_staging/run-1/00000000000000000000-x.parquet",
        "segments/00000000000000000099-orphan.parquet",
    ]
    assert _all_referenced_files_exist(lake, log) and log.read().num_rows == 11


def test_crash_orphan_from_an_append_is_collected(lake: Lake) -> None:
    from tests.support import lake_process

    (log,) = build(lake, "t", {"file.delete.delay.ms": 0}, [T0])
    proc = lake_process.start(
        lake.config,
        {"action": "append", "topic": "t", "partition": 0, "tag": "X", "batches": 1, "batch_size": 3},
        env={"LAKECLEANER_CRASH_AT": "append.after_data_write"},
    )
    proc.communicate(timeout=120)
    assert proc.returncode == CRASH_EXIT_STATUS
    report = gc_topic(lake, "t", T0 + 10**12, orphan_min_age_ms=0)
    assert len(report.partitions[0].deleted_orphans) == 1
    assert _all_referenced_files_exist(lake, log)


def test_versioned_bucket_refuses_physical_deletion_unless_configured(backend: str, s3_endpoint) -> None:  # type: ignore[no-untyped-def]
    if backend != "s3":
        pytest.skip("bucket versioning is an S3 concern")
    from lakecleaner.config import LakeConfig

    client = s3_endpoint.client()
    client.create_bucket(Bucket="versioned-lake")
    client.put_bucket_versioning(Bucket="versioned-lake", VersioningConfiguration={"Status": "Enabled"})
    lake = Lake.open(LakeConfig("s3://versioned-lake/v", s3_endpoint.settings()))
    (log,) = build(lake, "t", {"retention.ms": HOUR, "file.delete.delay.ms": 0}, [T0, T0 + 10 * HOUR])
    retain_topic(lake, "t", T0 + 2 * HOUR)
    with pytest.raises(VersionedBucketError, match="delete_all_versions"):
        gc_topic(lake, "t", T0 + 2 * HOUR)
    all_versions = Lake.open(LakeConfig("s3://versioned-lake/v", s3_endpoint.settings(delete_all_versions=True)))
    pending = [p.path for p in log.manifest().pending_deletes]
    gc_topic(all_versions, "t", T0 + 2 * HOUR)
    for path in pending:
        versions = client.list_object_versions(Bucket="versioned-lake", Prefix=f"v/{log.prefix}{path}")
        assert versions.get("Versions", []) == [] and versions.get("DeleteMarkers", []) == []


def test_gc_prunes_the_run_reports_older_than_their_retention_but_the_newest_run(lake: Lake) -> None:
    """lake.report_retention_days: gc deletes the folders of a topic's runs whose reports are all
    older than the retention, never the topic's newest run nor another topic's runs; a dry run
    counts them and deletes nothing; a `--now` ahead of the clock prunes nothing sooner."""
    build(lake, "t", {}, [T0])
    build(lake, "other", {}, [T0])
    for run_id in ("r1", "r2"):
        store_report(lake.store, "t", run_id, "report", {"run": run_id})
        store_report(lake.store, "t", run_id, "retention", {"run": run_id})
    store_report(lake.store, "other", "r1", "report", {})
    last_write = max(o.mtime_ms for o in lake.store.list(runs_prefix("t")))
    time.sleep(1.1)  # S3 keeps modification times to the second
    store_report(lake.store, "t", "r3", "report", {"run": "r3"})

    def aged() -> Lake:
        """A lake whose reports expire once as old as r1's and r2's are now (r3's are a second younger)."""
        return replace_config(lake, report_retention_ms=wall_clock_ms() - last_write)

    future = wall_clock_ms() + 365 * 24 * HOUR
    kept = gc_topic(replace_config(lake, report_retention_ms=400 * 24 * HOUR), "t", future)
    assert kept.run_reports_pruned == 0  # a year ahead by --now, but not by the clock
    dry = gc_topic(aged(), "t", future, dry_run=True)
    assert dry.run_reports_pruned == 2 and {"r1", "r2", "r3"} <= runs_of(lake, "t")
    report = gc_topic(aged(), "t", future)
    assert report.run_reports_pruned == 2 and report.to_dict()["run_reports_pruned"] == 2
    assert {"r1", "r2"}.isdisjoint(runs_of(lake, "t")) and "r3" in runs_of(lake, "t")
    assert [o.key for o in lake.store.list(runs_prefix("other"))] == [report_key("other", "r1", "report")]

    keep_all = gc_topic(replace_config(lake, report_retention_ms=None), "t", future)
    assert keep_all.run_reports_pruned == 0


def runs_of(lake: Lake, topic: str) -> set[str]:
    return {o.key[len(runs_prefix(topic)) :].split("/")[0] for o in lake.store.list(runs_prefix(topic))}


def replace_config(lake: Lake, **changes: object) -> Lake:
    return Lake.open(dataclasses.replace(lake.config, **changes))  # type: ignore[arg-type]


def test_expired_runs_is_the_runs_whose_every_report_is_older_than_the_retention() -> None:
    def obj(run: str, name: str, mtime: int) -> ObjectInfo:
        return ObjectInfo(report_key("t", run, name), 10, mtime)

    listing = [
        obj("old", "report", 100),
        obj("old", "gc", 200),
        obj("mixed", "report", 100),
        obj("mixed", "gc", 950),  # its newest report is young: the whole run stays
        obj("edge", "report", 900),  # exactly the retention old: goes
        obj("newest", "report", 960),
        ObjectInfo(f"{runs_prefix('t')}stray.json", 1, 0),  # not in a run folder
    ]
    assert expired_runs(listing, "t", now_ms=1000, retention_ms=100) == {
        "old": [report_key("t", "old", "report"), report_key("t", "old", "gc")],
        "edge": [report_key("t", "edge", "report")],
    }
    only = [obj("alone", "report", 0)]
    assert expired_runs(only, "t", now_ms=10**9, retention_ms=1) == {}  # the newest run stays, however old
