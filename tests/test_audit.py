"""Erasure audits (issue #20): every stored copy of a key with the time by which it is gone, and a
partition's earliest deadline; on every backend (the local lake and both S3 servers)."""

from __future__ import annotations

import ast
import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lakecleaner.audit import audit_key, audit_topic, holds_no_records
from lakecleaner.config import TopicSpec
from lakecleaner.engine.offsets_file import WINNERS, offsets_path
from lakecleaner.engine.spill import spill_path, write_spill
from lakecleaner.iceberg.expiry import TABLE_FOLDERS
from lakecleaner.lake import Lake
from lakecleaner.log.commits import CommitRecord
from lakecleaner.log.layout import partition_prefix, topic_prefix
from lakecleaner.log.leases import lease_key
from lakecleaner.log.records import Record
from lakecleaner.log.segment_files import new_segment_path
from lakecleaner.policy.erasure import (
    BELOW_LOG_START,
    LIVE,
    SUPERSEDED,
    TOMBSTONE,
    UNREFERENCED,
    schedule_interval_ms,
)
from lakecleaner.policy.key_mentions import mentions_key
from lakecleaner.retention import trim_partition
from tests.support.backends import ALL_BACKENDS
from tests.support.cli_process import run_cli

pytestmark = pytest.mark.backends(*ALL_BACKENDS)

MINUTE, HOUR = 60_000, 3_600_000
T0 = 1_700_000_000_000
CONFIG = {
    "cleanup.policy": "compact",
    "max.compaction.lag.ms": HOUR,
    "delete.retention.ms": HOUR,
    "file.delete.delay.ms": MINUTE,
}


def scheduled(lake: Lake, name: str, schedule: str | None = "@hourly") -> Lake:
    """The lake with `name` declared in its config with a DAG schedule."""
    topics = {**lake.config.topics, name: TopicSpec(name, 1, schedule)}
    return Lake(lake.store, replace(lake.config, topics=topics))


def test_every_copy_of_a_key_is_listed_with_the_time_it_is_gone(lake: Lake) -> None:
    lake = scheduled(lake, "users")
    log = lake.create_topic("users", config=CONFIG, now_ms=T0).partition(0)
    log.append([Record(b"alice", b"v1", T0)], now_ms=T0)
    log.roll(now_ms=T0)
    log.append([Record(b"alice", b"v2", T0 + 10 * MINUTE), Record(b"bob", b"b1", T0 + 10 * MINUTE)], now_ms=T0)
    audit = audit_key(lake, "users", b"alice", T0 + 20 * MINUTE)
    assert [(c.offset, c.kind) for c in audit.copies] == [(0, SUPERSEDED), (1, LIVE)]
    superseded = audit.copies[0]
    # the later record's segment was first written at T0 + 10 min: cleaned by + max.compaction.lag.ms
    # + one schedule interval, then file.delete.delay.ms and the next run's physical deletion
    assert superseded.deadline is not None
    assert superseded.deadline.gone_by_ms == T0 + 10 * MINUTE + HOUR + HOUR + MINUTE + HOUR
    assert not audit.overdue
    late = audit_key(lake, "users", b"alice", T0 + 10 * HOUR)
    assert late.overdue and "deadline passed" in (late.copies[0].deadline.overdue or "")  # type: ignore[union-attr]
    assert [c.offset for c in audit_key(lake, "users", b"carol", T0).copies] == []


def test_a_tombstone_an_unreferenced_copy_and_a_leak_into_the_lakes_own_files_are_found(lake: Lake) -> None:
    lake = scheduled(lake, "users")
    log = lake.create_topic("users", config=CONFIG, now_ms=T0).partition(0)
    log.append([Record(b"alice", b"v1", T0), Record(b"alice", None, T0 + 1)], now_ms=T0)
    log.roll(now_ms=T0)
    segment = log.manifest().segments[0]
    prefix = partition_prefix("users", 0)
    copy = prefix + "segments/00000000000000000000-abandoned.parquet"
    lake.store.write(copy, lake.store.read(prefix + segment.files[0].path))  # a crashed run's output
    audit = audit_key(lake, "users", b"alice", T0 + MINUTE)
    kinds = {(c.object, c.offset): c.kind for c in audit.copies}
    assert kinds[(prefix + segment.files[0].path, 0)] == SUPERSEDED
    assert kinds[(prefix + segment.files[0].path, 1)] == TOMBSTONE
    assert kinds[(copy, 0)] == kinds[(copy, 1)] == UNREFERENCED
    tombstone = next(c for c in audit.copies if c.kind == TOMBSTONE)
    assert tombstone.deadline is not None and tombstone.deadline.gone_by_ms is not None
    assert not audit.overdue

    lake.store.write("_lakecleaner/runs/users/r1/report.json", json.dumps({"leak": "alice"}).encode())
    leaked = audit_key(lake, "users", b"alice", T0 + MINUTE)
    assert leaked.overdue
    (leak,) = [c for c in leaked.copies if c.partition is None]
    assert leak.object == "_lakecleaner/runs/users/r1/report.json" and "never hold a record's key" in (
        leak.deadline.overdue or ""  # type: ignore[union-attr]
    )
    assert "alice" not in json.dumps(leaked.to_dict())  # the audit's own report names no key

    for leak_key in ("_lakecleaner/report.html", "_lakecleaner/cleaner/users.json", "_consumer_offsets/g.json"):
        lake.store.write(leak_key, b"... alice ...")  # the lake's own objects, wherever they are
    lake.store.write("_lakecleaner/runs/orders/r2/report.json", b"... alice ...")  # another topic's run
    found = {c.object for c in audit_key(lake, "users", b"alice", T0 + MINUTE).copies if c.partition is None}
    assert found == {
        "_lakecleaner/runs/users/r1/report.json",
        "_lakecleaner/report.html",
        "_lakecleaner/cleaner/users.json",
        "_consumer_offsets/g.json",
    }  # other topics' run reports are not read: a lake of many topics keeps millions


@pytest.mark.parametrize(
    ("data", "key", "mentioned"),
    [
        (json.dumps({"adopted_ms": 1_733_450_000_100, "size": 100, "ratio": 100.0}).encode(), b"100", False),
        (json.dumps({"tag": '"100a5a8e59b0"', "run": "r-51001", "at": "00:19:50.1001Z"}).encode(), b"100", False),
        (json.dumps({"sample": ["100"]}).encode(), b"100", True),
        (json.dumps({"100": 1}).encode(), b"100", True),
        (json.dumps({"message": "key 100 failed expect_column_values_to_be_unique"}).encode(), b"100", True),
        (json.dumps({"who": "jos\u00e9"}).encode(), "jos\u00e9".encode(), True),  # an escape undone
        (json.dumps({"who": "joséphine"}).encode(), "josé".encode(), True),  # é is no ASCII letter
        (b"<td>1003</td><td>100%</td>", b"100", True),  # HTML: bytes, by the token rule
        (b"<td>1003</td><td>21100</td>", b"100", False),
        (b"... alice ...", b"alice", True),
        (json.dumps({"who": "malice"}).encode(), b"alice", False),
        (b"\x00\xff\x01", b"\xff", True),
    ],
)
def test_a_key_is_mentioned_where_it_stands_as_a_token_and_never_by_a_number(
    data: bytes, key: bytes, mentioned: bool
) -> None:
    assert mentions_key(data, key) is mentioned


def test_a_short_key_matching_numbers_ids_and_tags_of_the_lakes_own_files_is_no_leak(lake: Lake) -> None:
    log = scheduled(lake, "users").create_topic("users", config=CONFIG, now_ms=T0).partition(0)
    log.append([Record(b"100", b"v", T0)], now_ms=T0)
    lake.store.write(
        "_lakecleaner/runs/users/r100/report.json",
        json.dumps({"run": "r100", "records": 100, "at_ms": T0 + 100, "tag": "a100f"}).encode(),
    )
    assert [c.kind for c in audit_key(lake, "users", b"100", T0).copies] == [LIVE]
    lake.store.write("_lakecleaner/runs/users/r100/report.json", json.dumps({"keys": ["100"]}).encode())
    leak = [c for c in audit_key(lake, "users", b"100", T0).copies if c.partition is None]
    assert [c.object for c in leak] == ["_lakecleaner/runs/users/r100/report.json"]


def test_without_a_schedule_or_a_max_lag_nothing_promises_the_deletion(lake: Lake) -> None:
    unscheduled = scheduled(lake, "users", schedule=None)
    log = unscheduled.create_topic("users", config=CONFIG, now_ms=T0).partition(0)
    log.append([Record(b"alice", b"v1", T0), Record(b"alice", b"v2", T0)], now_ms=T0)
    audit = audit_key(unscheduled, "users", b"alice", T0)
    assert audit.overdue and "no schedule" in (audit.copies[0].deadline.overdue or "")  # type: ignore[union-attr]
    lake.alter_topic("users", {"max.compaction.lag.ms": None})
    no_lag = audit_key(scheduled(lake, "users"), "users", b"alice", T0)
    assert no_lag.overdue and "no deadline applies" in (no_lag.copies[0].deadline.overdue or "")  # type: ignore[union-attr]


def test_the_topic_audit_gives_each_partitions_earliest_deadline(lake: Lake) -> None:
    lake = scheduled(lake, "users")
    topic = lake.create_topic("users", partitions=2, config=CONFIG, now_ms=T0)
    log = topic.partition(0)
    log.append([Record(b"alice", b"v1", T0)], now_ms=T0)
    log.roll(now_ms=T0)
    partitions = audit_topic(lake, "users", T0 + MINUTE)
    assert [p.partition for p in partitions] == [0, 1]
    first = partitions[0]
    assert first.deadline is not None and first.deadline.gone_by_ms == T0 + HOUR + HOUR + MINUTE + HOUR
    assert not first.overdue and partitions[1].deadline is None
    assert audit_topic(lake, "users", T0 + 4 * HOUR)[0].overdue


def test_the_topic_audit_times_a_segment_without_timestamps_from_its_creation(lake: Lake) -> None:
    """Kafka's rolling timestamp: a segment whose records carry no timestamp (-1) is timed from its
    creation, so an older segment without timestamps comes before a newer one with them."""
    lake = scheduled(lake, "users")
    topic = lake.create_topic("users", partitions=1, config=CONFIG, now_ms=T0)
    log = topic.partition(0)
    log.append([Record(b"bob", b"v1", -1)], now_ms=T0 + MINUTE)
    log.roll(now_ms=T0 + MINUTE)
    log.append([Record(b"carol", b"v1", T0 + 30 * MINUTE)], now_ms=T0 + 30 * MINUTE)
    log.roll(now_ms=T0 + 30 * MINUTE)
    untimed, timed = log.manifest().segments[:2]
    assert untimed.first_batch_max_timestamp < 0 < untimed.created_ms < timed.first_batch_max_timestamp
    (partition,) = audit_topic(lake, "users", T0 + 31 * MINUTE)
    assert partition.what == f"records superseded in segment {untimed.id}"
    assert partition.deadline is not None
    assert partition.deadline.gone_by_ms == untimed.created_ms + HOUR + HOUR + MINUTE + HOUR


def test_schedule_intervals_of_presets_and_cron() -> None:
    assert schedule_interval_ms("@hourly", T0) == HOUR
    assert schedule_interval_ms("*/15 * * * *", T0) == 15 * MINUTE
    assert schedule_interval_ms("0 9 * * 1-5", T0) == 3 * 24 * HOUR  # Friday 9:00 to Monday 9:00
    assert schedule_interval_ms(None, T0) is None and schedule_interval_ms("@once", T0) is None


def test_copies_are_overdue_when_the_topics_dag_stopped_running(lake: Lake) -> None:
    """A paused DAG (or one failing before its report) keeps no promise: after two schedule
    intervals and an hour without a run, every copy with a deadline is overdue, and says why."""
    lake = scheduled(lake, "users")
    lake.create_topic("users", config={**CONFIG, "max.compaction.lag.ms": 10 * HOUR}, now_ms=T0)
    lake.topic("users").partition(0).append([Record(b"alice", b"v1", T0), Record(b"alice", b"v2", T0)], now_ms=T0)
    assert not audit_key(lake, "users", b"alice", T0 + 3 * HOUR).overdue  # since the topic's creation
    never = audit_key(lake, "users", b"alice", T0 + 3 * HOUR + 1)
    assert never.overdue and "has never run" in (never.copies[0].deadline.overdue or "")  # type: ignore[union-attr]
    lake.cleaner_state.update("users", lambda s: replace(s, last_dag_run_ms=T0 + 2 * HOUR))
    assert not audit_key(lake, "users", b"alice", T0 + 4 * HOUR).overdue
    stopped = audit_key(lake, "users", b"alice", T0 + 5 * HOUR + 1)
    (superseded, live) = stopped.copies
    assert live.deadline is None and superseded.deadline is not None
    assert superseded.deadline.gone_by_ms is not None and superseded.deadline.gone_by_ms > stopped.now_ms
    assert "last ran at" in (superseded.deadline.overdue or "") and stopped.overdue


def test_a_record_below_the_log_start_offset_is_gone_with_its_segment(lake: Lake) -> None:
    """After a trim (DeleteRecords), a record below the log start offset leaves with its segment:
    at the next run when the whole segment is below it, else when a cleaning rewrites its group."""
    lake = scheduled(lake, "users")
    log = lake.create_topic("users", config=CONFIG, now_ms=T0).partition(0)
    log.append([Record(b"alice", b"v1", T0), Record(b"bob", b"b1", T0)], now_ms=T0)
    log.roll(now_ms=T0)
    log.append([Record(b"alice", b"v2", T0 + MINUTE)], now_ms=T0 + MINUTE)
    log.roll(now_ms=T0 + MINUTE)
    trim_partition(lake, "users", 0, 1, now_ms=T0 + 2 * MINUTE)  # inside the first segment
    inside = audit_key(lake, "users", b"alice", T0 + 2 * MINUTE).copies
    assert [(c.offset, c.kind) for c in inside] == [(0, BELOW_LOG_START), (2, LIVE)]
    # the next cleaning is due by the dirty segment's first batch + max.compaction.lag.ms + one interval
    assert inside[0].deadline is not None and inside[0].deadline.gone_by_ms == T0 + HOUR + HOUR + MINUTE + HOUR
    trim_partition(lake, "users", 0, 2, now_ms=T0 + 3 * MINUTE)  # past the whole first segment
    below = audit_key(lake, "users", b"alice", T0 + 3 * MINUTE).copies[0]
    assert below.kind == BELOW_LOG_START and below.deadline is not None
    assert below.deadline.gone_by_ms == T0 + 3 * MINUTE + HOUR + MINUTE + HOUR  # the next run, then D and a run


def test_a_key_held_only_in_a_quality_gate_spill_is_found(lake: Lake) -> None:
    """A killed compaction can leave the gate's key spill (`_staging/<run>.gate-*.arrow`) as the
    only stored copy of a key: the audit must see it."""
    lake = scheduled(lake, "users")
    lake.create_topic("users", config=CONFIG, now_ms=T0)
    prefix = partition_prefix("users", 0)
    rows = pa.table({"key": pa.array([b"alice", b"bob"]), "offset": pa.array([7, 8], pa.int64())})
    path = spill_path("run-killed", "gate")
    lease = {"run_id": "run-killed", "expires_ms": T0, "holder": "killed"}  # as the run left it
    lake.store.write(lease_key(prefix, "run-killed"), json.dumps(lease).encode())
    write_spill(lake.store, prefix, path, rows, np.zeros(2, np.uint64), 1)
    audit = audit_key(lake, "users", b"alice", T0)
    assert [(c.object, c.offset, c.kind) for c in audit.copies] == [(prefix + path, 7, UNREFERENCED)]


def _object_writes() -> set[tuple[str, str]]:
    """(module, function) of every place in lib/ that writes an object to the lake: a call on a
    store (or its Arrow filesystem) that writes, or a call of one of the writers built on them."""
    writers = {"write_segment_file", "write_spill", "SpillWriter", "write_commit_records", "store_report"}
    root = Path(__file__).resolve().parent.parent / "lib" / "lakecleaner"
    found = set()
    for path in sorted(root.rglob("*.py")):
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, ast.FunctionDef):
                continue
            for node in ast.walk(fn):
                if not isinstance(node, ast.Call):
                    continue
                f = node.func
                name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
                on_store = isinstance(f, ast.Attribute) and re.search(r"store(\.arrow_fs)?$", ast.unparse(f.value))
                if name in writers or (on_store and name in {"write", "create", "replace", "open_output_stream"}):
                    found.add((str(path.relative_to(root)), fn.name))
    return found


#: Every place that writes an object, with a path it writes (relative to a partition, or to the
#: lake root for the lake's own folders) and how the key audit covers it: `records` objects are
#: searched as record files (`record_objects`), `metadata` ones hold no key by construction,
#: `lake` ones are searched byte for byte (`_lake_folder_hits`), and `table` ones as the Iceberg
#: tables' files (`table_files`: the folders of a topic's tables).
WRITERS = {
    ("engine/gate_rows.py", "gate_check"): ("records", spill_path("r", "gate")),
    ("engine/offset_map.py", "scatter"): ("records", spill_path("r", "map")),
    ("engine/spill.py", "write_spill"): ("records", spill_path("r", "any-step")),
    ("engine/spill.py", "_open_file"): ("records", spill_path("r", "any-step")),
    ("engine/offsets_file.py", "store_offsets"): ("metadata", offsets_path("r", WINNERS, 0, 3)),
    ("engine/writer.py", "_open_sink"): ("records", new_segment_path(0)),
    ("engine/writer.py", "close"): ("records", new_segment_path(0)),
    ("log/partition.py", "_append_table"): ("records", new_segment_path(0)),
    ("log/segment_files.py", "write_segment_file"): ("records", new_segment_path(0)),
    ("log/partition.py", "commit"): ("metadata", "manifest.json"),
    ("log/partition.py", "create"): ("metadata", "manifest.json"),
    ("log/repair.py", "repair_partition"): ("metadata", "manifest.json"),
    ("log/partition.py", "_acknowledged"): ("metadata", CommitRecord(new_segment_path(0), 3).name),
    ("log/commits.py", "write_commit_records"): ("metadata", CommitRecord(new_segment_path(0), 3).name),
    ("log/leases.py", "_write_all"): ("metadata", "_staging/r.lease"),
    ("log/deletion_vectors.py", "write_vector"): ("metadata", "segments/x.parquet.dv-3-0123456789ab.bin"),
    ("log/key_index.py", "write_key_index"): ("records", "segments/x.parquet.keys-0123456789ab.arrow"),
    ("lake.py", "_put_metadata"): ("lake", "topics/users/topic.json"),
    ("runs/reports.py", "store_report"): ("lake", "_lakecleaner/runs/users/r/report.json"),
    ("engine/report.py", "save"): ("lake", "_lakecleaner/runs/users/r/report.json"),
    ("orchestration/tasks.py", "summarise"): ("lake", "_lakecleaner/runs/users/r/summary.json"),
    ("orchestration/tasks.py", "mirror"): ("lake", "_lakecleaner/runs/users/r/mirror.json"),
    ("orchestration/tasks.py", "adopt"): ("lake", "_lakecleaner/runs/users/r/adopt.json"),
    ("retention/executor.py", "retain_topic"): ("lake", "_lakecleaner/runs/users/r/retention.json"),
    ("retention/gc.py", "gc_topic"): ("lake", "_lakecleaner/runs/users/r/gc.json"),
    ("cli/demo.py", "demo"): ("lake", "_lakecleaner/report.html"),
    ("demo.py", "mark_sample_topics"): ("lake", "_lakecleaner/demo.json"),
    ("iceberg/hidden_rows.py", "write_hidden_rows"): (
        "table",
        "topics/users/data/partition=0/x.below-3.deletes.parquet",
    ),
    ("lake_id.py", "lake_id_of"): ("lake", "_lakecleaner/lake-id"),
}


def test_every_writer_of_the_lake_is_covered_by_the_key_audit() -> None:
    """A new place that writes an object fails here until it is listed above with a path it
    writes, and that path is one the audit searches (or one that cannot hold a key)."""
    unlisted = _object_writes() - WRITERS.keys()
    assert not unlisted, f"writers the erasure audit does not know: {sorted(unlisted)}; list them in WRITERS"
    for (module, function), (kind, path) in WRITERS.items():
        if kind == "records":
            assert not holds_no_records(path), (module, function, path)
        elif kind == "metadata":
            assert holds_no_records(path), (module, function, path)
        elif kind == "table":
            assert path.startswith(tuple(topic_prefix("users") + folder for folder in TABLE_FOLDERS)), path
        else:  # the lake's own folders, or topic metadata outside every partition's folder
            assert path.startswith(("_lakecleaner/", "_consumer_offsets/", "topics/users/topic.json"))


def test_audit_key_takes_a_200_kb_key_from_a_file_and_from_stdin(tmp_path: Path) -> None:
    lake = Lake.open(f"file://{tmp_path / 'lake'}")
    key = b"k" * 200_000
    lake.create_topic("users").partition(0).append([Record(key, b"v")])
    (tmp_path / "key").write_bytes(key)
    base = ["--lake", f"file://{tmp_path / 'lake'}", "--json"]
    for args, stdin in ((["--key-file", str(tmp_path / "key")], None), (["--key-file", "-"], key)):
        proc = run_cli(*base, "audit", "key", "--topic", "users", *args, input=stdin)
        assert proc.returncode == 0, proc.stderr
        copies = json.loads(proc.stdout)["copies"]
        assert [(c["offset"], c["kind"]) for c in copies] == [(0, LIVE)]
