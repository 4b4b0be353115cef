"""Issue #14: storage that fails or lies. Each test names the damage; every record readable before
is still readable (or recoverable) after every command, and nothing is served or deleted wrongly.

Commits whose reply is lost: the proxy forwards a manifest write to the S3 server, which applies it,
then drops the reply; the SDK retries and meets its own manifest as a 412. The commit must read the
manifest back and see that it landed, not take it for a lost race (which would delete the data files
the landed manifest references and append again).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from lakecleaner.audit import audit_key, audit_topic
from lakecleaner.clock import wall_clock_ms
from lakecleaner.config import LakeConfig
from lakecleaner.errors import CorruptManifest, CorruptSegment, StorageError
from lakecleaner.faults import CRASH_EXIT_STATUS
from lakecleaner.lake import Lake, Topic
from lakecleaner.log.leases import LEASE_TTL_MS, RunLeases, live_leases
from lakecleaner.log.records import Record
from lakecleaner.log.repair import repair_partition
from lakecleaner.orchestration import tasks
from lakecleaner.policy.erasure import UNFINISHED
from lakecleaner.retention import gc_topic, retain_topic
from lakecleaner.retention.executor import trim_partition
from lakecleaner.retention.gc import GcRunReport
from lakecleaner.runs import outcome
from lakecleaner.summaries.facts import load_topic
from tests.support import lake_process
from tests.support.backends import ALL_BACKENDS
from tests.support.cli_process import run_cli
from tests.support.flaky_proxy import FlakyProxy, manifest_get, manifest_put, parquet_read
from tests.support.s3 import S3Endpoint

pytestmark = pytest.mark.backends(*ALL_BACKENDS)  # and the real object store, SeaweedFS

HOUR = 3_600_000
T0 = 1_772_323_200_000


@pytest.fixture
def lossy(s3_endpoint: S3Endpoint, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Lake, FlakyProxy]]:
    """A lake reached through a proxy that will drop the reply of the next manifest write it is
    told to (set `proxy.replies_to_lose`)."""
    with FlakyProxy(s3_endpoint.url, lose_when=manifest_put) as proxy:
        settings = s3_endpoint.settings(endpoint_url=proxy.url, max_attempts=4, backoff_base_ms=1, backoff_max_ms=5)
        prefix = tmp_path_factory.mktemp("lossy").name
        yield Lake.open(LakeConfig(f"s3://{s3_endpoint.bucket}/{prefix}", settings)), proxy


def records(lake: Lake, topic: str) -> list[tuple[int, bytes]]:
    table = lake.topic(topic).partition(0).read(columns=["offset", "key"])
    return list(zip(table.column("offset").to_pylist(), table.column("key").to_pylist(), strict=True))


def test_an_append_whose_reply_is_lost_lands_once(lossy: tuple[Lake, FlakyProxy]) -> None:
    lake, proxy = lossy
    log = lake.create_topic("events").partition(0)
    log.append([Record(b"a", b"1", T0)], now_ms=T0)
    proxy.replies_to_lose = 1
    result = log.append([Record(b"b", b"2", T0)], now_ms=T0)
    assert len(proxy.lost) == 1  # the write was applied, its reply dropped, the SDK retried
    assert (result.base_offset, result.next_offset) == (1, 2)
    assert records(lake, "events") == [(0, b"a"), (1, b"b")]  # once, and every file it names exists
    log.append([Record(b"c", b"3", T0)], now_ms=T0)
    assert records(lake, "events") == [(0, b"a"), (1, b"b"), (2, b"c")]


def test_retention_and_gc_through_a_flaky_store_succeed_and_count_their_retries(
    s3_endpoint: S3Endpoint, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Issue #14: transient errors are retried, never taken for damage, and counted in the reports."""
    with FlakyProxy(s3_endpoint.url, fail_when=manifest_get) as proxy:
        settings = s3_endpoint.settings(endpoint_url=proxy.url, max_attempts=4, backoff_base_ms=1, backoff_max_ms=5)
        lake = Lake.open(LakeConfig(f"s3://{s3_endpoint.bucket}/{tmp_path_factory.mktemp('flaky').name}", settings))
        log = lake.create_topic("events", config={"retention.ms": HOUR}).partition(0)
        log.append([Record(b"a", b"1", T0)], now_ms=T0)
        log.roll(now_ms=T0)
        log.append([Record(b"b", b"2", T0 + 2 * HOUR)], now_ms=T0 + 2 * HOUR)
        proxy.failures_left = 2
        retention = retain_topic(lake, "events", T0 + 2 * HOUR)
        proxy.failures_left = 3
        gc = gc_topic(lake, "events", T0 + 2 * HOUR)
        keys = [str(r.location).removeprefix(lake.store.root_uri + "/") for r in (retention, gc)]
        stored = [json.loads(lake.store.read(key)) for key in keys]
    assert retention.success and retention.partitions[0].status == "committed"
    assert [r.storage_retries for r in (retention, gc)] == [2, 3] and gc.failed == []
    assert [(d["storage_retries"], d["partitions_failed"]) for d in stored] == [(2, 0), (3, 0)]
    assert records(lake, "events") == [(1, b"b")]


def test_gc_on_a_store_that_cannot_list_unfinished_uploads_does_the_rest_and_says_so(
    s3_endpoint: S3Endpoint, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """An S3-compatible store that fails ListMultipartUploads (unsupported, or down): gc still
    deletes what is due and reports, as a warning, that it discarded no unfinished write; the
    audits cannot prove such writes gone, so they call the partition overdue and say why."""

    def lists_uploads(method: str, path: str) -> bool:
        return method == "GET" and "uploads" in path.partition("?")[2].split("&")

    with FlakyProxy(s3_endpoint.url, failures=10**6, fail_when=lists_uploads) as proxy:
        settings = s3_endpoint.settings(endpoint_url=proxy.url, max_attempts=2, backoff_base_ms=1, backoff_max_ms=5)
        lake = Lake.open(LakeConfig(f"s3://{s3_endpoint.bucket}/{tmp_path_factory.mktemp('nouploads').name}", settings))
        log = lake.create_topic("events", config={"retention.ms": HOUR, "file.delete.delay.ms": 0}).partition(0)
        log.append([Record(b"a", b"1", T0)], now_ms=T0)
        log.roll(now_ms=T0)
        log.append([Record(b"b", b"2", T0 + 2 * HOUR)], now_ms=T0 + 2 * HOUR)
        assert retain_topic(lake, "events", T0 + 2 * HOUR).success
        (gone,) = [p.path for p in log.manifest().pending_deletes]
        gc = gc_topic(lake, "events", T0 + 2 * HOUR)
        assert any(lists_uploads(method, path) for method, path in proxy.seen)
        (erasure,) = audit_topic(lake, "events", T0 + 2 * HOUR)  # nothing proves them gone: overdue
        key_audit = audit_key(lake, "events", b"b", T0 + 2 * HOUR)
    assert erasure.overdue and erasure.what == "unfinished writes, which could not be listed"
    assert key_audit.overdue and "the unfinished writes could not be listed" in key_audit.unreadable["topics/events/"]
    assert gc.failed == [] and gc.partitions[0].deleted_pending == (gone,)
    (warning,) = gc.warnings
    assert warning.startswith("unfinished writes were not listed, so none was discarded: ")
    assert json.loads(lake.store.read(str(gc.location).removeprefix(lake.store.root_uri + "/")))["warnings"] == [
        warning
    ]


def test_a_roll_a_trim_and_a_retention_whose_replies_are_lost_each_land_once(lossy: tuple[Lake, FlakyProxy]) -> None:
    lake, proxy = lossy
    topic = lake.create_topic("views", config={"retention.ms": 10 * HOUR, "file.delete.delay.ms": 0})
    log = topic.partition(0)
    for i in range(3):
        log.append([Record(f"k{i}".encode(), b"v", T0 - (20 - i) * HOUR)], now_ms=T0)
        proxy.replies_to_lose = 1
        log.roll(now_ms=T0)
    assert len(proxy.lost) == 3 and [s.sealed for s in log.manifest().segments] == [True] * 3

    proxy.replies_to_lose = 1
    trim_partition(lake, "views", 0, 1, now_ms=T0)
    assert len(proxy.lost) == 4 and log.manifest().log_start_offset == 1
    assert records(lake, "views") == [(1, b"k1"), (2, b"k2")]

    log.append([Record(b"new", b"v", T0)], now_ms=T0)
    proxy.replies_to_lose = 1
    report = retain_topic(lake, "views", T0)
    assert len(proxy.lost) == 5
    assert [p.status for p in report.partitions] == ["committed"]
    assert records(lake, "views") == [(3, b"new")]


# -- physical deletion never guesses ------------------------------------------------------------
def three_partitions(lake: Lake) -> Topic:
    """A topic of three partitions, each with two sealed segments, whose first segment's file
    left the log long ago (a pending delete past its delay) on partition 2 only."""
    topic = lake.create_topic("cdc", partitions=3, config={"cleanup.policy": "compact", "file.delete.delay.ms": 0})
    for p in range(3):
        log = topic.partition(p)
        for i in range(2):
            log.append([Record(f"k{p}-{i}".encode(), b"v", T0)], now_ms=T0)
            log.roll(now_ms=T0)
    return topic


def edit_manifest(lake: Lake, topic: Topic, partition: int, edit: Callable[[dict[str, Any]], None]) -> None:
    """Change a partition's manifest.json in place, as damage (or an attacker) would."""
    key = topic.partition(partition).manifest_key
    raw = json.loads(lake.store.read(key))
    edit(raw)
    lake.store.write(key, json.dumps(raw).encode())


def files_of(lake: Lake, topic: Topic, partition: int) -> dict[str, int]:
    prefix = topic.partition(partition).prefix
    return {o.key[len(prefix) :]: o.size for o in lake.store.list(prefix)}


def gc_far_ahead(lake: Lake, topic: Topic) -> GcRunReport:
    """gc as if ten days had passed: every delay and the orphan age are over."""
    return gc_topic(lake, topic.name, wall_clock_ms() + 240 * HOUR)


def test_a_pending_delete_naming_the_manifest_stops_that_partition_and_deletes_nothing(lake: Lake) -> None:
    topic = three_partitions(lake)
    edit_manifest(lake, topic, 1, lambda m: m["pending_deletes"].append(pending("manifest.json")))
    before = files_of(lake, topic, 1)
    report = gc_far_ahead(lake, topic)
    (failed,) = report.failed
    assert failed.partition == 1 and "pending delete 'manifest.json' is not a file in segments/" in failed.error
    assert "lakecleaner repair" in failed.error
    assert files_of(lake, topic, 1) == before
    assert [p.error for p in report.partitions if p.partition != 1] == [None, None]


def test_a_pending_delete_naming_a_live_file_is_corruption(lake: Lake) -> None:
    topic = three_partitions(lake)
    live = topic.partition(1).manifest().segments[0].files[0].path
    edit_manifest(lake, topic, 1, lambda m: m["pending_deletes"].append(pending(live)))
    (failed,) = gc_far_ahead(lake, topic).failed
    assert f"pending delete {live} is a file of a live segment" in str(failed.error)
    assert live in files_of(lake, topic, 1)


def test_a_manifest_entry_renamed_to_a_missing_file_keeps_the_real_file(lake: Lake) -> None:
    topic = three_partitions(lake)
    real = topic.partition(1).manifest().segments[0].files[0].path
    renamed = "segments/00000000000000000000-0000000000000000.parquet"

    def rename(m: dict[str, Any]) -> None:
        m["segments"][0]["files"][0]["path"] = renamed

    edit_manifest(lake, topic, 1, rename)
    (failed,) = gc_far_ahead(lake, topic).failed
    assert f"(first: {renamed}); nothing was deleted" in str(failed.error)
    assert real in files_of(lake, topic, 1)  # it is unreferenced now, but gc does not guess


@pytest.mark.parametrize("path", ["segments/../../partition=0/segments/x.parquet", "/etc/passwd", "manifest.json"])
def test_a_segment_path_outside_segments_is_a_corrupt_manifest_for_that_partition_only(lake: Lake, path: str) -> None:
    topic = three_partitions(lake)

    def escape(m: dict[str, Any]) -> None:
        m["segments"][0]["files"][0]["path"] = path

    edit_manifest(lake, topic, 1, escape)
    before = {p: files_of(lake, topic, p) for p in range(3)}
    with pytest.raises(CorruptManifest, match="is not a file in segments/"):
        topic.partition(1).manifest()
    assert [p.partition for p in gc_far_ahead(lake, topic).failed] == [1]
    assert {p: files_of(lake, topic, p) for p in range(3)} == before


def test_a_manifest_of_invalid_json_stops_only_its_partition(lake: Lake) -> None:
    topic = three_partitions(lake)
    lake.store.write(topic.partition(1).manifest_key, b"{not json")
    report = gc_far_ahead(lake, topic)
    assert [(p.partition, "is corrupt" in str(p.error)) for p in report.failed] == [(1, True)]


def test_gc_leaves_a_running_compactions_files_alone_whatever_now_it_is_given(lake: Lake) -> None:
    topic = three_partitions(lake)
    log = topic.partition(0)
    staged = "segments/00000000000000000000-feedfacecafebeef.parquet"
    lake.store.write(log.prefix + staged, b"a staged output file")
    with RunLeases(lake.store, "run-1", [topic.partition(p).prefix for p in range(3)], max_workers=4):
        assert all(any(k.endswith("run-1.lease") for k in files_of(lake, topic, p)) for p in range(3))
        held = gc_far_ahead(lake, topic)
        assert staged in files_of(lake, topic, 0)
        assert "run(s) run-1 hold a lease" in str(held.partitions[0].orphans_kept)
    assert not [k for p in range(3) for k in files_of(lake, topic, p) if k.endswith(".lease")]  # released
    assert staged in gc_far_ahead(lake, topic).partitions[0].deleted_orphans  # an orphan once the run ended


def test_gc_dry_run_lists_and_deletes_nothing(lake: Lake) -> None:
    topic = three_partitions(lake)
    log = topic.partition(0)
    orphan = "segments/00000000000000000000-0123456789abcdef.parquet"
    lake.store.write(log.prefix + orphan, b"left by a crashed append")
    before = files_of(lake, topic, 0)
    report = gc_topic(lake, topic.name, wall_clock_ms() + 240 * HOUR, dry_run=True)
    assert report.partitions[0].deleted_orphans == (orphan,) and report.dry_run
    assert files_of(lake, topic, 0) == before


def test_a_writer_killed_mid_write_leaves_an_unfinished_write_the_audits_count_and_gc_discards(
    lake: Lake, lake_config: LakeConfig
) -> None:
    """A writer killed in the middle of a write (a local temporary file before its rename; an S3
    multipart upload of pyarrow's output stream, as a large compacted file is written) leaves
    bytes no listing shows: the audits count them as a copy that may hold any key of the
    partition, and gc discards them once as old as an orphan must be, never sooner."""
    topic = lake.create_topic("plain", config={"retention.ms": -1})  # nothing else awaits erasure
    log = topic.partition(0)
    log.append([Record(b"k", b"v", T0)], now_ms=T0)
    path = "segments/00000000000000000001-00000000deadbeef.parquet"
    before = files_of(lake, topic, 0)
    child = lake_process.start(
        lake_config,
        {"action": "abandon-write", "topic": topic.name, "partition": 0, "path": path, "bytes": 12 * 1024 * 1024},
        env={"LAKECLEANER_CRASH_AT": "local_store.before_rename"},
    )
    _, err = child.communicate(timeout=120)
    assert child.returncode == CRASH_EXIT_STATUS, err.decode()
    assert files_of(lake, topic, 0) == before  # no listing shows it
    (unfinished,) = lake.store.list_unfinished(log.prefix)
    assert unfinished.key == log.prefix + path

    now = wall_clock_ms()
    (erasure,) = audit_topic(lake, topic.name, now)
    assert (erasure.unfinished_writes, erasure.what) == (1, f"{path} (an unfinished write)")
    copies = [c for c in audit_key(lake, topic.name, b"k", now).copies if c.kind == UNFINISHED]
    assert [(c.partition, c.object, c.offset) for c in copies] == [(0, log.prefix + path, None)]

    with RunLeases(lake.store, "run-1", [log.prefix], max_workers=1):  # a run's uploads are under its lease
        held = gc_far_ahead(lake, topic)
        assert held.partitions[0].discarded_unfinished == () and "run-1" in str(held.partitions[0].orphans_kept)
    if unfinished.started_ms > now - HOUR:  # moto's server says every upload began in 2010 (its responses.py)
        young = gc_topic(lake, topic.name, now)  # started just now: may still be under way
        assert young.partitions[0].discarded_unfinished == ()
    assert len(lake.store.list_unfinished(log.prefix)) == 1
    dry = gc_topic(lake, topic.name, now + 240 * HOUR, dry_run=True)
    assert dry.partitions[0].discarded_unfinished == (path,) and len(lake.store.list_unfinished(log.prefix)) == 1
    assert gc_far_ahead(lake, topic).partitions[0].discarded_unfinished == (path,)
    assert lake.store.list_unfinished(log.prefix) == ()
    lake.store.discard_unfinished(unfinished)  # discarding again is no error
    assert audit_topic(lake, topic.name, now)[0].unfinished_writes == 0
    assert records(lake, topic.name) == [(0, b"k")]  # the log is as it was


def pending(path: str) -> dict[str, Any]:
    return {"path": path, "delete_after_ms": 0, "reason": "damage"}


# -- transient is not corrupt -------------------------------------------------------------------
def test_repair_during_an_outage_of_parquet_reads_fails_and_keeps_every_file(
    s3_endpoint: S3Endpoint, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """S3 answers 503 to every Parquet read: repair must fail, not class the good files as unreadable
    (it used to keep 0 of 2 files, commit an empty manifest and schedule both for deletion)."""
    with FlakyProxy(s3_endpoint.url, fail_when=parquet_read) as proxy:
        settings = s3_endpoint.settings(endpoint_url=proxy.url, max_attempts=2, backoff_base_ms=1, backoff_max_ms=5)
        lake = Lake.open(LakeConfig(f"s3://{s3_endpoint.bucket}/{tmp_path_factory.mktemp('outage').name}", settings))
        log = lake.create_topic("cdc", config={"cleanup.policy": "compact"}).partition(0)
        for i in range(2):
            log.append([Record(f"k{i}".encode(), b"v", T0)], now_ms=T0)
            log.roll(now_ms=T0)
        before = records(lake, "cdc")
        manifest = lake.store.read(log.manifest_key)
        proxy.failures_left = 10_000
        with pytest.raises(StorageError, match="check that the storage endpoint is reachable"):
            repair_partition(lake.store, "cdc", 0, log.config, force=True)
        assert lake.store.read(log.manifest_key) == manifest  # nothing committed
        proxy.failures_left = 0
        report = repair_partition(lake.store, "cdc", 0, log.config, force=True)
        assert len(report.kept_files) == 2 and report.left_out == {}
        assert records(lake, "cdc") == before


# -- a damaged partition is reported, the others proceed ------------------------------------------
def test_status_plan_and_gc_report_the_damaged_partition_and_carry_on(tmp_path: Path) -> None:
    lake = Lake.open(f"file://{tmp_path / 'lake'}")
    topic = three_partitions(lake)
    lake.store.write(topic.partition(1).manifest_key, b"{not json")
    status = run_cli_lake(lake, "--json", "status", "--topic", "cdc")
    assert status.returncode == 1
    rows = {r["partition"]: r for r in json.loads(status.stdout)["cdc"]}
    assert rows[0]["records"] == rows[2]["records"] == 2 and "is corrupt" in rows[1]["error"]
    assert "cdc-1: FAILED: manifest" in status.stderr and "lakecleaner repair" in status.stderr

    plan = run_cli_lake(lake, "--json", "plan", "--topic", "cdc", "--force")
    assert plan.returncode == 1 and "cdc-1: FAILED" in plan.stderr
    planned = json.loads(plan.stdout)
    assert [p["partition"] for p in planned["partitions"]] == [0, 2] and list(planned["unreadable"]) == ["1"]

    gc = run_cli_lake(lake, "gc", "--topic", "cdc")
    assert gc.returncode == 1 and "cdc-1: FAILED: manifest" in gc.stderr


def test_the_dags_assessment_plans_the_readable_partitions_and_names_the_damaged_one(lake: Lake) -> None:
    topic = three_partitions(lake)
    lake.store.write(topic.partition(1).manifest_key, b"[]")
    assessment = tasks.assess(lake.config, "cdc", T0, {"force": True})
    assert assessment["selected"] == [0, 2] and list(assessment["unreadable"]) == ["1"]
    failures = outcome.failures({"assess": assessment})
    assert failures == [f"partition 1 could not be read: {assessment['unreadable']['1']}"]
    state = load_topic(lake, "cdc", T0)  # the dashboard
    assert sorted(state.manifests) == [0, 2] and "is corrupt" in state.unreadable[1]


def test_a_segment_file_swapped_for_another_of_the_partition_is_never_served(lake: Lake) -> None:
    topic = three_partitions(lake)
    log = topic.partition(1)
    first, second = (s.files[0].path for s in log.manifest().segments)
    lake.store.write(log.prefix + first, lake.store.read(log.prefix + second))
    with pytest.raises(CorruptSegment, match=r"is not the file its manifest entry describes.*offsets \[1, 2\)"):
        log.read()
    assert records(lake, "cdc") == [(0, b"k0-0"), (1, b"k0-1")]  # partition 0 is served as before


# -- consumer offsets --------------------------------------------------------------------------
def views_with_groups(lake: Lake) -> Topic:
    """A delete topic with consumed retention: segment 0 is past retention.ms, segment 1 only
    consumed by both groups; a third segment nobody has consumed."""
    config = {"retention.ms": 48 * HOUR, "retention.commitoffset.ms": HOUR, "file.delete.delay.ms": 0}
    topic = lake.create_topic("views", config=config)
    log = topic.partition(0)
    for age_h in (72, 24, 1):
        log.append([Record(b"k", b"v", T0 - age_h * HOUR)], now_ms=T0)
        log.roll(now_ms=T0)
    for group in ("analytics", "billing"):
        lake.offsets.commit(group, "views", {0: 2}, now_ms=T0)
    return topic


@pytest.mark.parametrize(
    ("key", "body", "reason"),
    [
        ("_consumer_offsets/sub/evil.json", b"{}", "is not a consumer group's offsets file"),
        ("_consumer_offsets/rogue.json", b'{"group": "billing", "topics": {}}', "name the group 'billing'"),
        (
            "_consumer_offsets/minus.json",
            b'{"group": "minus", "topics": {"views": {"0": {"offset": -4}}}}',
            "offset is -4, outside",
        ),
    ],
)
def test_a_bad_object_under_consumer_offsets_holds_back_consumed_retention_only(
    lake: Lake, key: str, body: bytes, reason: str
) -> None:
    views_with_groups(lake)
    lake.store.write(key, body)
    (position,) = lake.offsets.consumed_positions("views", [0]).values()
    assert position.offset is None and reason in str(position.reason)
    report = retain_topic(lake, "views", T0)
    (partition,) = report.partitions
    assert [d.base_offset for d in partition.plan.deletions] == [0]  # retention.ms still applies
    assert records(lake, "views") == [(1, b"k"), (2, b"k")]  # consumed retention held segment 1 back
    listed = run_cli_lake(lake, "offsets", "list")
    assert listed.returncode == 1 and reason in listed.stderr and "analytics" in listed.stdout


def test_a_negative_offset_is_rejected_at_commit(lake: Lake) -> None:
    views_with_groups(lake)
    with pytest.raises(ValueError, match="must be a non-negative integer"):
        lake.offsets.commit("billing", "views", {0: -1})


def run_cli_lake(lake: Lake, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI on `lake` (its storage settings through the environment, as a user would set them)."""
    s = lake.config.storage
    env = {**os.environ, "LAKECLEANER_S3_ENDPOINT_URL": s.endpoint_url or ""}
    if s.access_key_id:
        env.update(AWS_ACCESS_KEY_ID=s.access_key_id, AWS_SECRET_ACCESS_KEY=s.secret_access_key or "")
    return run_cli("--lake", lake.uri, *args, env={k: v for k, v in env.items() if v})


@pytest.mark.parametrize("body", [b"{not json", b'{"name": "other", "partitions": 3}', b'{"partitions": 3}'])
def test_a_damaged_topic_json_is_a_clear_error_naming_the_file(lake: Lake, body: bytes) -> None:
    three_partitions(lake)
    lake.store.write("topics/cdc/topic.json", body)
    with pytest.raises(CorruptManifest, match=r"topic metadata .*topics/cdc/topic.json"):
        lake.topic("cdc")


def test_a_repair_whose_reply_is_lost_reports_what_it_wrote(lossy: tuple[Lake, FlakyProxy]) -> None:
    lake, proxy = lossy
    log = lake.create_topic("cdc", config={"cleanup.policy": "compact"}).partition(0)
    for i in range(2):
        log.append([Record(f"k{i}".encode(), b"v", T0)], now_ms=T0)
        log.roll(now_ms=T0)
    lake.store.write(log.manifest_key, b"{not json")
    proxy.replies_to_lose = 1
    report = repair_partition(lake.store, "cdc", 0, log.config)
    assert len(proxy.lost) == 1 and len(report.kept_files) == 2
    assert records(lake, "cdc") == [(0, b"k0"), (1, b"k1")]


#: Issue #45's objects whose JSON types lie, each as a partition's manifest holds it.
LYING_MANIFESTS = {
    "segments-of-strings": {"segments": ["x"]},
    "properties-a-list": {"properties": [1]},
    "log-start-1e999": {"log_start_offset": 1e999},
    "pending-delete-minus-1e999": {"pending_deletes": [{"path": "segments/x.parquet", "delete_after_ms": -1e999}]},
    "sealed-as-text": {"sealed": "false"},
    "negative-offsets": {"log_start_offset": -5, "next_offset": -1},
    "version-minus-5": {"version": -5},
}


@pytest.mark.backends("local", "seaweedfs")  # what is parsed is the same on every store
@pytest.mark.parametrize("lie", list(LYING_MANIFESTS))
def test_a_manifest_whose_types_lie_is_one_line_and_repair_rebuilds_it(lake: Lake, lie: str) -> None:
    """Every lake-wide reader reports the partition in one line and goes on with the others; repair
    rebuilds it; nothing is deleted meanwhile."""
    topic = three_partitions(lake)
    expected = topic.partition(1).read()
    change = LYING_MANIFESTS[lie]

    def lie_about(m: dict[str, Any]) -> None:
        if "sealed" in change:
            m["segments"][0]["sealed"] = change["sealed"]
        else:
            m.update(change)

    edit_manifest(lake, topic, 1, lie_about)
    before = {p: files_of(lake, topic, p) for p in range(3)}
    read = topic.read_manifests()
    assert sorted(read.manifests) == [0, 2] and "lakecleaner repair" in read.failures[1]
    assert [p.partition for p in gc_far_ahead(lake, topic).failed] == [1]
    assert [p.partition for p in retain_topic(lake, topic.name, T0).partitions if p.status == "failed"] == [1]
    erasures = {p.partition: p for p in audit_topic(lake, topic.name, T0)}
    assert erasures[1].error is not None and erasures[0].error is None
    assert files_of(lake, topic, 1) == before[1]
    report = repair_partition(lake.store, topic.name, 1, topic.config, now_ms=T0)
    assert report.previous_state.startswith("corrupt") and topic.partition(1).read().equals(expected)


@pytest.mark.parametrize(
    ("key", "content"),
    [
        ("topics/cdc/topic.json", b'{"name": "cdc", "partitions": 1e999}'),
        ("topics/cdc/topic.json", b'{"name": "cdc", "partitions": 1000000000}'),
        ("topics/cdc/topic.json", b"[" * 200_000),
    ],
    ids=["partitions-1e999", "a-billion-partitions", "deep-nesting"],
)
def test_a_damaged_topic_json_is_one_line_for_lake_wide_readers_and_repair_rebuilds_it(
    lake: Lake, key: str, content: bytes
) -> None:
    topic = three_partitions(lake)
    other = lake.create_topic("other")
    other.partition(0).append([Record(b"k", b"v", T0)], now_ms=T0)
    lake.store.write(key, content)
    opened, unopened = lake.read_topics(lake.list_topics())
    assert list(opened) == ["other"] and "repair --topic cdc" in unopened["cdc"]
    rebuilt = lake.repair_metadata("cdc")
    assert rebuilt is not None and rebuilt.metadata.partitions == 3
    assert lake.topic("cdc").partition(2).read().num_rows == topic.partition(2).read().num_rows


def test_damaged_cleaner_state_offsets_and_leases_hold_back_only_what_they_describe(lake: Lake) -> None:
    topic = three_partitions(lake)
    lake.store.write("_lakecleaner/cleaner/cdc.json", b'{"topic": "cdc", "uncleanable": [], "last_dag_run_ms": 1e999}')
    assert lake.cleaner_state.read("cdc").uncleanable == {}  # read as empty, and logged: every partition retried
    lake.store.write("_consumer_offsets/g.json", b'{"group": "g", "topics": {"cdc": {"0": {"offset": true}}}}')
    positions = lake.offsets.consumed_positions("cdc", [0, 1, 2], lake.offsets.read_all_groups())
    assert "field topics.cdc.0.offset is a JSON bool" in positions[0].reason and positions[0].offset is None
    lease = {"run_id": "r", "expires_ms": 99_999_999_999_999, "holder": "far future"}  # the year 5138
    key = f"{topic.partition(0).prefix}_staging/r.lease"
    lake.store.write(key, json.dumps(lease).encode())
    (obj,) = [o for o in lake.store.list(topic.partition(0).prefix + "_staging/") if o.key == key]
    assert [x.run_id for x in live_leases(lake.store, [obj], wall_now_ms=obj.mtime_ms + 1)] == ["r"]
    assert live_leases(lake.store, [obj], wall_now_ms=obj.mtime_ms + LEASE_TTL_MS + 1) == []  # not until 5138


def test_a_topic_json_naming_partitions_storage_lacks_reads_only_those_found_and_says_so_once(lake: Lake) -> None:
    three_partitions(lake)
    stored = json.loads(lake.store.read("topics/cdc/topic.json"))
    lake.store.write("topics/cdc/topic.json", json.dumps({**stored, "partitions": 300}).encode())
    read = lake.topic("cdc").read_manifests()
    assert sorted(read.manifests) == [0, 1, 2] and sorted(read.failures) == list(range(3, 300))
    assert len({id(reason) for reason in read.failures.values()}) == 1  # one shared line, not 297
    assert "topics create cdc --if-not-exists" in read.failures[3]
    assessment = tasks.assess(lake.config, "cdc", T0, {"force": True})
    assert list(assessment["unreadable"]) == ["3..299"], assessment
    assert assessment["selected"] == [0, 1, 2], assessment["reasons"]
    assert outcome.failures({"assess": assessment})[0].startswith("partitions 3..299 could not be read")
    status = run_cli_lake(lake, "status", "--topic", "cdc")
    assert status.returncode == 1 and status.stderr.count("FAILED") == 1 and "cdc-3..299: FAILED" in status.stderr
    lake.create_topic("cdc", exist_ok=True)  # the fix the line names
    assert not lake.topic("cdc").read_manifests().failures
