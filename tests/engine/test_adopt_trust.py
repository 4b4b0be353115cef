"""Archives adopted exactly (issue 75): Debezium deletes become tombstones, a sink file that changed
after adoption is never deleted (and adopted again only when it adds records), a tombstone file that
comes late still deletes its key, a file that fills an earlier gap late is reported and kept, files
that disagree at one offset hold their partition, a kill between the ledger and the append loses
and repeats nothing, and a bad file stops only its partition. On the local lake and SeaweedFS."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from lakecleaner.adopt.connect import APPEND_RECORDS, ConnectSource, adopt_connect
from lakecleaner.adopt.originals import adopted_sources
from lakecleaner.audit import audit_key
from lakecleaner.clock import wall_clock_ms
from lakecleaner.config import LakeConfig, parse_config
from lakecleaner.faults import CRASH_EXIT_STATUS, ENV_CRASH_AT
from lakecleaner.io import open_store
from lakecleaner.lake import Lake
from lakecleaner.policy.erasure import UNREFERENCED
from lakecleaner.retention.gc import gc_topic
from tests.engine.helpers import compact
from tests.engine.test_adopt_connect import consumed, sink_uri
from tests.support.bench_loader import bench_module
from tests.support.cli_process import run_cli
from tests.support.connect_sink import SinkConfig, SinkRecord, write_sink

pytestmark = pytest.mark.backends("local", "seaweedfs")
T0 = 1_790_000_000_000
DELAY = {"file.delete.delay.ms": 60_000}


def event(p: int, offset: int, key: int, op: str, *, schemas: bool = False) -> SinkRecord:
    """A Debezium change event (no key sidecar: keys come from the value)."""
    row = {"id": key, "email": f"c{key}-{offset}@example.com"}
    change = {"before": row if op == "d" else None, "after": None if op == "d" else row, "op": op, "ts_ms": T0 + offset}
    return SinkRecord(p, offset, None, {"schema": {"type": "struct"}, "payload": change} if schemas else change)


def stream(partitions: int = 2, count: int = 30, *, schemas: bool = False) -> list[SinkRecord]:
    """Creates, updates and deletes of 6 keys a partition (keys 1 and 4 deleted at offsets 13 and
    16); key 4 written again at the end."""
    out = []
    for p in range(partitions):
        for offset in range(count):
            key = offset % 6
            op = "c" if offset < 6 else ("d" if offset in (13, 16) else "u")
            out.append(event(p, offset, key, op, schemas=schemas))
        out.append(event(p, count, 4, "c", schemas=schemas))
    return out


def latest_live(records: list[SinkRecord], envelope: str = "") -> dict[tuple[int, bytes], bytes]:
    """What compaction must leave: each key's last event, when it is not a delete."""
    latest: dict[tuple[int, bytes], Any] = {}
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        change = r.value["payload"] if envelope else r.value
        row = change["after"] or change["before"]
        latest[(r.partition, str(row["id"]).encode())] = None if change["op"] == "d" else r.value
    return {k: json.dumps(v, separators=(",", ":")).encode() for k, v in latest.items() if v is not None}


def live(lake: Lake, topic: str) -> dict[tuple[int, bytes], bytes]:
    return {(p, k): v for log in lake.topic(topic).partition_logs() for p, _, k, v in _rows(log)}


def _rows(log: Any) -> list[tuple[int, int, bytes, bytes]]:
    return [
        (log.partition, r["offset"], r["key"], r["value"]) for r in log.read().to_pylist() if r["value"] is not None
    ]


def compacted_topic(lake: Lake, name: str, **config: Any) -> None:
    lake.create_topic(name, 2, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.01, **config})


@pytest.mark.parametrize("schemas", [False, True], ids=["plain", "schemas-enabled"])
def test_a_debezium_stream_with_deletes_adopts_and_compacts_to_the_latest_values(
    spark: SparkSession, lake_config: LakeConfig, tmp_path: Path, schemas: bool
) -> None:
    lake = Lake.open(lake_config)
    compacted_topic(lake, "customers")
    source = sink_uri(lake_config, tmp_path, "customers")
    records = stream(schemas=schemas)
    write_sink(
        open_store(source, lake.config.storage),
        "",
        "customers",
        records,
        SinkConfig("json", store_keys=False, flush_size=7),
    )
    field = "payload.after.id" if schemas else "after.id"
    dry = adopt_connect(lake, "customers", ConnectSource(source, key_field=field, settle_ms=0), dry_run=True)
    assert not dry.failures, dry.failures
    report = adopt_connect(lake, "customers", ConnectSource(source, key_field=field, timestamp_field=None, settle_ms=0))
    assert not report.failures and sum(a.records for a in report.partitions.values()) == len(records)
    deletes = [(p, o, k, v) for p, o, k, v in consumed(lake, "customers") if v is None]
    assert {(p, o, k) for p, o, k, _ in deletes} == {(p, o, str(o % 6).encode()) for p in (0, 1) for o in (13, 16)}
    compact(spark, lake, lake.topic("customers"), wall_clock_ms() + 3_600_000)
    assert live(lake, "customers") == latest_live(records, "payload" if schemas else "")


def test_deletes_keep_leaves_the_delete_events_as_values(lake_config: LakeConfig, tmp_path: Path) -> None:
    lake = Lake.open(lake_config)
    compacted_topic(lake, "kept")
    source = sink_uri(lake_config, tmp_path, "kept")
    write_sink(
        open_store(source, lake.config.storage),
        "",
        "kept",
        stream(1, 20),
        SinkConfig("json", store_keys=False, flush_size=50),
    )
    adopt_connect(lake, "kept", ConnectSource(source, key_field="after.id", settle_ms=0, deletes="keep"))
    rows = lake.topic("kept").partition(0).read().to_pylist()
    assert all(r["value"] is not None for r in rows)
    assert json.loads(rows[13]["value"])["op"] == "d" and rows[13]["key"] == b"1"


def test_a_rewritten_original_is_adopted_again_when_it_adds_records_and_kept_when_its_bytes_differ(
    lake_config: LakeConfig, tmp_path: Path
) -> None:
    lake = Lake.open(lake_config)
    lake.create_topic("orders", 1, {"cleanup.policy": "delete", **DELAY})
    source = sink_uri(lake_config, tmp_path, "orders")
    store = open_store(source, lake.config.storage)
    first = [event(0, o, o, "c") for o in range(10)]
    write_sink(store, "", "orders", first, SinkConfig("json", store_keys=False, flush_size=100))
    spec = ConnectSource(source, key_field="after.id", settle_ms=0)
    adopt_connect(lake, "orders", spec)

    # a re-delivery with other file boundaries rewrites the file: the same 10 records and 5 more
    write_sink(
        store,
        "",
        "orders",
        [event(0, o, o, "c") for o in range(15)],
        SinkConfig("json", store_keys=False, flush_size=100),
    )
    (name,) = [o.key for o in store.list("")]
    again = adopt_connect(lake, "orders", spec)
    assert name in again.plan.changed and not again.failures
    assert [r["offset"] for r in lake.topic("orders").partition(0).read().to_pylist()] == list(range(15))

    # the Kafka topic is created again and the sink writes new records under the old name
    write_sink(
        store,
        "",
        "orders",
        [event(0, o, 100 + o, "c") for o in range(20)],
        SinkConfig("json", store_keys=False, flush_size=100),
    )
    before = consumed(lake, "orders")
    refused = adopt_connect(lake, "orders", spec)
    assert f"{name} holds offset 0 with other bytes than the log" in refused.failures[0]
    assert consumed(lake, "orders") == before  # nothing mixed in
    swept = gc_topic(lake, "orders", wall_clock_ms() + 120_000)
    assert not swept.originals_deleted and any("changed after it was adopted" in w for w in swept.warnings)
    assert [o.key for o in store.list("")] == [name]  # never deleted
    audit = audit_key(lake, "orders", b"100", wall_clock_ms())  # a key only the changed file holds
    assert [(c.kind, "nothing deletes it" in (c.deadline.overdue or "")) for c in audit.copies] == [
        (UNREFERENCED, True)
    ]

    taken = adopt_connect(lake, "orders", spec, prefer=[name])  # the user's word: take it as it is now
    assert not taken.failures
    assert [r["offset"] for r in lake.topic("orders").partition(0).read().to_pylist()] == list(range(20))


def test_a_late_tombstone_file_deletes_its_key_unless_a_later_record_supersedes_it(
    spark: SparkSession, lake_config: LakeConfig, tmp_path: Path
) -> None:
    lake = Lake.open(lake_config)
    compacted_topic(lake, "users")
    source = sink_uri(lake_config, tmp_path, "users")
    store = open_store(source, lake.config.storage)
    keys = ["a", "b", "c", "d", "a", "b", "c", "d", "e", "f", "g", "h"]
    write_sink(
        store,
        "",
        "users",
        [SinkRecord(0, o, k, {"n": o}) for o, k in enumerate(keys)],
        SinkConfig("json", flush_size=100),
    )
    spec = ConnectSource(source, settle_ms=0)
    adopt_connect(lake, "users", spec)
    # the tombstone folder flushes later: a delete of a at offset 2 (a written again at 4), and of b at 6
    late = [SinkRecord(0, 2, "a", None), SinkRecord(0, 6, "b", None)]
    write_sink(store, "", "users", late, SinkConfig("json", write_tombstones=True, flush_size=1))
    report = adopt_connect(lake, "users", spec)
    done = report.partitions[0]
    assert (done.late_tombstones, done.superseded_tombstones) == (1, 1), report.to_dict()
    tail = lake.topic("users").partition(0).read().to_pylist()[-1]
    assert (tail["offset"], tail["key"], tail["value"]) == (12, b"b", None)
    assert adopt_connect(lake, "users", spec).partitions == {}  # adopted: not applied twice
    lake.topic("users").partition(0).roll()  # the active segment is never cleaned
    compact(spark, lake, lake.topic("users"), wall_clock_ms() + 3_600_000)
    assert {k for _, k in live(lake, "users")} == {b"a", b"c", b"d", b"e", b"f", b"g", b"h"}  # b's erasure holds


def test_a_file_that_fills_an_earlier_gap_late_is_reported_and_kept(lake_config: LakeConfig, tmp_path: Path) -> None:
    lake = Lake.open(lake_config)
    lake.create_topic("events", 1, {"cleanup.policy": "delete", **DELAY})
    source = sink_uri(lake_config, tmp_path, "events")
    store = open_store(source, lake.config.storage)
    records = [SinkRecord(0, o, f"k{o}", {"n": o}) for o in range(15)]
    write_sink(store, "", "events", records[:5] + records[10:], SinkConfig("json", flush_size=5))
    spec = ConnectSource(source, settle_ms=0)
    first = adopt_connect(lake, "events", spec)
    assert first.partitions[0].gaps == [(5, 9)]
    write_sink(store, "", "events", records[5:10], SinkConfig("json", flush_size=5))
    late = adopt_connect(lake, "events", spec)
    kept = late.partitions[0].late
    assert list(kept) == ["partition=0/events+0+0000000005.json"]
    assert (
        "arrived after its offsets were passed: offset 5 lies in the gap 5..9"
        in kept["partition=0/events+0+0000000005.json"]
    )
    assert [r["offset"] for r in lake.topic("events").partition(0).read().to_pylist()] == [*range(5), *range(10, 15)]
    gc_topic(lake, "events", wall_clock_ms() + 120_000)
    assert "partition=0/events+0+0000000005.json" in {o.key for o in store.list("")}  # kept


def test_two_files_that_disagree_at_an_offset_hold_their_partition_and_are_both_kept(
    lake_config: LakeConfig, tmp_path: Path
) -> None:
    lake = Lake.open(lake_config)
    lake.create_topic("pay", 2, {"cleanup.policy": "delete"})
    source = sink_uri(lake_config, tmp_path, "pay")
    store = open_store(source, lake.config.storage)
    write_sink(
        store, "", "pay", [SinkRecord(0, o, f"k{o}", {"v": "a"}) for o in range(6)], SinkConfig("json", flush_size=10)
    )
    write_sink(
        store,
        "",
        "pay",
        [SinkRecord(0, o, f"k{o}", {"v": "b"}) for o in range(3, 8)],
        SinkConfig("json", flush_size=10),
    )
    write_sink(
        store, "", "pay", [SinkRecord(1, o, f"k{o}", {"v": "a"}) for o in range(4)], SinkConfig("json", flush_size=10)
    )
    report = adopt_connect(lake, "pay", ConnectSource(source, settle_ms=0))
    assert (
        "partition=0/pay+0+0000000000.json and partition=0/pay+0+0000000003.json both hold offset 3"
        in report.failures[0]
    )
    assert lake.topic("pay").partition(0).manifest().next_offset == 0 and report.partitions[1].records == 4
    assert not any(o.partition == 0 for a in adopted_sources(lake, "pay") for o in a.originals)


@pytest.mark.backends("local")
def test_files_that_disagree_across_a_commit_boundary_are_compared_too(lake_config: LakeConfig, tmp_path: Path) -> None:
    """A file large enough to fill a commit's chunk alone (APPEND_RECORDS records' worth of bytes),
    whose last records the next file re-delivers with other bytes: the two are still compared
    (the first is held back into the next chunk), so the conflict is reported and nothing of
    either is appended; with --prefer naming the later file, both are adopted once."""
    lake = Lake.open(lake_config)
    lake.create_topic("big", 1, {"cleanup.policy": "delete"})
    source = sink_uri(lake_config, tmp_path, "big")
    store = open_store(source, lake.config.storage)
    pad = "x" * 2000
    count = APPEND_RECORDS * 100 // 2000 + 10  # one file: more bytes than a chunk holds
    first = [SinkRecord(0, o, f"k{o}", {"v": "a", "pad": pad}) for o in range(count)]
    later = [SinkRecord(0, o, f"k{o}", {"v": "b", "pad": pad}) for o in range(count - 5, count + 5)]
    write_sink(store, "", "big", first, SinkConfig("json", flush_size=count))
    write_sink(store, "", "big", later, SinkConfig("json", flush_size=count))
    names = sorted(o.key for o in store.list("") if not o.key.endswith(".keys.json"))
    assert len(names) == 2 and len(store.read(names[0])) > APPEND_RECORDS * 100

    report = adopt_connect(lake, "big", ConnectSource(source, settle_ms=0))
    assert f"{names[0]} and {names[1]} both hold offset {count - 5}" in report.failures[0]
    assert lake.topic("big").partition(0).manifest().next_offset == 0

    chosen = adopt_connect(lake, "big", ConnectSource(source, settle_ms=0), prefer=[names[1]])
    assert not chosen.failures and chosen.partitions[0].records == count + 5
    values = [json.loads(r["value"])["v"] for r in lake.topic("big").partition(0).read().to_pylist()]
    assert values == ["a"] * (count - 5) + ["b"] * 10


@pytest.mark.parametrize("crash_at", ["adopt.after_ledger_write", "adopt.after_append"])
def test_a_kill_between_the_ledger_and_the_append_then_a_rerun_leaves_every_record_once(
    lake_config: LakeConfig, tmp_path: Path, crash_at: str
) -> None:
    storage = lake_config.storage
    reach = {
        "LAKECLEANER_S3_ENDPOINT_URL": storage.endpoint_url or "",
        "AWS_ACCESS_KEY_ID": storage.access_key_id or "",
        "AWS_SECRET_ACCESS_KEY": storage.secret_access_key or "",
        "AWS_REGION": "us-east-1",
    }
    environment = {**os.environ, **{k: v for k, v in reach.items() if v}}
    lake = Lake.open(lake_config)
    lake.create_topic("t", 1, {"cleanup.policy": "delete", "file.delete.delay.ms": 0})
    source = sink_uri(lake_config, tmp_path, "t")
    records = [SinkRecord(0, o, f"k{o}", {"n": o}) for o in range(12)]
    write_sink(open_store(source, lake.config.storage), "", "t", records, SinkConfig("json", flush_size=4))
    args = [
        "--lake",
        lake_config.lake_uri,
        "adopt",
        "connect",
        "--topic",
        "t",
        "--from",
        source,
        "--settle-seconds",
        "0",
    ]
    crashed = run_cli(*args, env={**environment, ENV_CRASH_AT: crash_at})
    assert crashed.returncode == CRASH_EXIT_STATUS, crashed.stderr
    assert not gc_topic(lake, "t", wall_clock_ms() + 1000).originals_deleted or crash_at == "adopt.after_append"
    done = run_cli(*args, env=environment)
    assert done.returncode == 0, done.stderr
    assert [r["offset"] for r in lake.topic("t").partition(0).read().to_pylist()] == list(range(12))
    gc_topic(lake, "t", wall_clock_ms() + 1000)
    assert open_store(source, lake.config.storage).list("") == []  # every original adopted, and deleted


def test_a_bad_file_stops_only_its_partition_naming_the_file_and_line(lake_config: LakeConfig, tmp_path: Path) -> None:
    lake = Lake.open(lake_config)
    lake.create_topic("m", 2, {"cleanup.policy": "delete"})
    source = sink_uri(lake_config, tmp_path, "m")
    store = open_store(source, lake.config.storage)
    write_sink(
        store,
        "",
        "m",
        [SinkRecord(p, o, f"k{o}", {"n": o}) for p in (0, 1) for o in range(6)],
        SinkConfig("json", flush_size=3),
    )
    store.write("partition=0/m+0+0000000003.json", b'{"n": 3}\n{"n": 4\n{"n": 5}\n')
    store.write("partition=7/m+7+0000000000.json", b'{"n": 0}\n')  # a partition the topic does not have
    dry = adopt_connect(lake, "m", ConnectSource(source, settle_ms=0, timestamp_field="n"), dry_run=True)
    assert "would stop" in dry.failures[0] and "line 2, column" in dry.failures[0]
    report = adopt_connect(lake, "m", ConnectSource(source, settle_ms=0))
    assert "partition=0/m+0+0000000003.json: line 2, column" in report.failures[0]
    assert "the sink wrote partition 7 but topic m has 2 partitions" in report.failures[7]
    assert lake.topic("m").partition(0).manifest().next_offset == 3 and report.partitions[1].records == 6
    files = {f["file"]: (f["status"], f["reason"]) for f in report.to_dict()["files"]["0"]}
    assert files["partition=0/m+0+0000000000.json"] == ("adopted", "")
    assert (
        files["partition=0/m+0+0000000003.json"][0] == "not adopted"
        and "line 2" in files["partition=0/m+0+0000000003.json"][1]
    )
    assert report.partitions[0].records == 3  # what the stopped partition adopted is in the report
    store.write("partition=1/m+1+0000000006.json", b'{"n": -5}\n{"n": 99999999999999999999}\n')
    store.write("partition=1/m+1+0000000006.keys.json", b'"k6"\n"k7"\n')
    stamps = adopt_connect(lake, "m", ConnectSource(source, settle_ms=0, timestamp_field="n"))
    assert "record 1: --timestamp-field n is -5" in stamps.failures[1]


@pytest.mark.backends("local")
@pytest.mark.parametrize("file_format", ["json", "parquet", "avro"])
def test_the_adoption_benchmark_runs(file_format: str, capsys: pytest.CaptureFixture[str]) -> None:
    """bench/adopt.py at a few files in each of the sink's formats, as a smoke check (no timing
    assertion): both readers take every record, and the table and ratio are printed."""
    module = bench_module("adopt")
    module.main(["--files", "8", "--records-per-file", "200", "--runs", "1", "--format", file_format])
    printed = capsys.readouterr().out
    assert "| lakecleaner adopt connect |" in printed and "adopt / floor records/s:" in printed


@pytest.mark.backends("local")
def test_one_debezium_stream_adopts_to_the_same_bytes_from_json_parquet_and_avro(tmp_path: Path) -> None:
    """The columnar readers (JSON's lines, Parquet's and Avro's rows written as JSON a column at a
    time) give every record the bytes the byte rule gives it: the same change events written by
    the sink as JSON, Parquet and Avro adopt to identical logs (offsets, keys, values, tombstones,
    timestamps), also when a column needs row-by-row writing (a non-ASCII name)."""
    module = bench_module("adopt")
    logs = {}
    for file_format in ("json", "parquet", "avro"):
        source = tmp_path / file_format / module.TOPIC
        assert module.write_archive(source, 8, 50, 30, file_format) == 400
        _rename_in_first_file(source, file_format, module)
        lake_dir = tmp_path / f"lake-{file_format}"
        assert module.adopted(source, lake_dir) == 400
        lake = Lake.open(parse_config({"lake": {"uri": f"file://{lake_dir}"}}))
        logs[file_format] = [log.read().to_pylist() for log in lake.topic(module.TOPIC).partition_logs()]
    json_log = logs["json"]
    assert sum(r["value"] is None for p in json_log for r in p) == 40  # one in ten a delete: a tombstone
    assert sum(b"custom\\u00e9r" in (r["value"] or b"") for r in json_log[0]) == 45
    assert logs["parquet"] == json_log and logs["avro"] == json_log


def _rename_in_first_file(source: Path, file_format: str, module: Any) -> None:
    """The first file of partition 0 written again with every `name` "customér": text JSON writes
    with a `\\u` escape, which the columnar writer leaves to the row-by-row one."""
    first = sorted((source / "partition=0").iterdir())[0]
    events = module._read(first).to_pylist()
    for event in events:
        for row in (event["before"], event["after"]):
            if row is not None:
                row["name"] = "customér"
    module._write_file(first, events, file_format)


@pytest.mark.backends("local")
@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(st.integers(-(2**40), 2**40), st.text(max_size=6)),
            st.sampled_from(["c", "u", "d"]),
            st.integers(0, 2**62),
            st.booleans(),
        ),
        min_size=1,
        max_size=25,
    ),
    st.booleans(),
)
def test_json_read_as_columns_equals_json_read_line_by_line(
    events: list[tuple[int | str, str, int, bool]], tombstones: bool
) -> None:
    """The columnar reader (pyarrow, an explicit schema of the fields it needs) and the line-by-line
    one give the same values, keys and timestamps for any file, whichever the columnar one falls back
    from (mixed key types, nulls)."""
    from lakecleaner.adopt.connect_names import parse_sink_key
    from lakecleaner.adopt.connect_read import ChangeEvents, _json_line, _json_values, _row_values

    lines = []
    for key, op, stamp, extra in events:
        row = {"id": key, **({"x": [1, {"y": None}]} if extra else {})}
        change = {"before": row if op == "d" else None, "after": None if op == "d" else row, "op": op, "ts_ms": stamp}
        lines.append(json.dumps(change, separators=(",", ":")).encode())
    data = b"\n".join(lines) + b"\n"
    sink_file = parse_sink_key("partition=0/t+0+0000000000.json", "t", len(data), 0)
    read = ChangeEvents("after.id", "ts_ms", tombstones=tombstones)
    fast = _json_values(data, sink_file, read)
    slow = _row_values([_json_line(line, n, sink_file) for n, line in enumerate(lines, 1)], sink_file, read)
    assert fast.values.to_pylist() == slow.values.to_pylist()
    assert fast.keys.to_pylist() == slow.keys.to_pylist()
    assert fast.timestamps is not None and slow.timestamps is not None
    assert fast.timestamps.to_pylist() == slow.timestamps.to_pylist()


def test_a_headers_sidecar_that_arrives_after_its_file_was_adopted_is_reported_and_kept(
    lake_config: LakeConfig, tmp_path: Path
) -> None:
    lake = Lake.open(lake_config)
    lake.create_topic("h", 1, {"cleanup.policy": "delete", "file.delete.delay.ms": 0})
    source = sink_uri(lake_config, tmp_path, "h")
    store = open_store(source, lake.config.storage)
    records = [SinkRecord(0, o, f"k{o}", {"n": o}) for o in range(4)]
    write_sink(store, "", "h", records, SinkConfig("json", flush_size=10))
    spec = ConnectSource(source, settle_ms=0)
    adopt_connect(lake, "h", spec)
    sidecar = "partition=0/h+0+0000000000.headers.json"  # the sink's headers, flushed after the file was adopted
    store.write(sidecar, b"".join(b'{"headers":[{"key":"trace","value":"t%d"}]}\n' % o for o in range(4)))
    report = adopt_connect(lake, "h", spec)
    assert "arrived after the records of its file were adopted without it" in report.plan.late[sidecar]
    gc_topic(lake, "h", wall_clock_ms() + 1000)
    assert {o.key for o in store.list("")} == {sidecar}  # the adopted files went; the late one is kept


@pytest.mark.backends("local")
def test_the_counts_adopt_prints_are_the_ledgers(tmp_path: Path) -> None:
    """What `adopt connect` prints (its table and its `--json`), run after run, is what its ledger
    holds: the files each partition adopted are the ledger's entries for them, with the records
    they supplied; the files "adopted by earlier runs" are the ledger's entries from before; a
    partition stopped by a bad file prints what it adopted before it."""
    lake_uri = f"file://{tmp_path / 'lake'}"
    config = tmp_path / "lakecleaner.yaml"
    config.write_text(json.dumps({"lake": {"uri": lake_uri}}))
    source = f"file://{tmp_path / 'sink' / 'topics' / 'pay'}"
    store = open_store(source)
    sink = SinkConfig("json", flush_size=3)
    write_sink(store, "", "pay", [SinkRecord(p, o, f"k{o}", {"v": o}) for p in (0, 1) for o in range(6)], sink)

    def adopt(*extra: str) -> subprocess.CompletedProcess[str]:
        return run_cli("--config", str(config), "adopt", "connect", "--topic", "pay", "--from", source,
                       "--settle-seconds", "0", *extra)  # fmt: skip

    def ledger() -> dict[int, list[Any]]:
        lake = Lake.open(LakeConfig(lake_uri))
        out: dict[int, list[Any]] = {0: [], 1: []}
        for original in (o for a in adopted_sources(lake, "pay") for o in a.originals):
            if ".keys." not in original.key:
                out[original.partition].append(original)
        return out

    first = adopt("--json")
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    held = ledger()
    for p in (0, 1):
        printed = report["partitions"][str(p)]
        mine = held[p]
        assert printed["files"] == len(mine) == 2
        assert printed["records"] == sum(o.last_offset - o.first_offset + 1 for o in mine) == 6
        assert sorted(f["file"] for f in report["files"][str(p)] if f["status"] == "adopted") == sorted(
            o.key for o in mine
        )

    write_sink(store, "", "pay", [SinkRecord(0, o, f"k{o}", {"v": o}) for o in range(6, 9)], sink)
    store.write("partition=1/pay+1+0000000006.json", b'{"v": 6}\n{"v": \n')
    store.write("partition=1/pay+1+0000000006.keys.json", b'"k6"\n"k7"\n')
    second = adopt()
    assert second.returncode == 1
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]] for line in
            second.stdout.splitlines() if line.startswith("│") and line.split("│")[1].strip().isdigit()}  # fmt: skip
    now = ledger()
    assert rows["0"][:2] == [str(len(now[0]) - len(held[0])), "3"]  # files, records this run
    assert rows["1"][:2] == ["0", "0"] and "line 2" in second.stdout
    before = sum(len(entries) for entries in held.values())
    assert f"files adopted by earlier runs, not read again: {before}" in second.stdout
