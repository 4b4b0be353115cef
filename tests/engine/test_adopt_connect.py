"""Adopting Kafka Connect S3 sink output (issue 49): sink files written here exactly as the
connector names and writes them (`tests/support/connect_sink.py`) become a topic whose `consume` is the
records the files hold, in offset order, once each; compacted, it equals DuckDB's latest value
per key over the same files. On the local lake and SeaweedFS."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml
from pyspark.sql import SparkSession

from lakecleaner.adopt.connect import ConnectSource, adopt_connect
from lakecleaner.adopt.connect_names import NotASinkFile, SinkFile, parse_sink_key
from lakecleaner.adopt.connect_plan import interleaved_windows, plan_adoption, record_offsets
from lakecleaner.adopt.originals import originals_key
from lakecleaner.audit import audit_key
from lakecleaner.clock import wall_clock_ms
from lakecleaner.config import LakeConfig
from lakecleaner.errors import LakeCleanerError
from lakecleaner.io import open_store
from lakecleaner.lake import Lake
from lakecleaner.policy.erasure import LEFT_THE_LOG, UNREFERENCED
from lakecleaner.retention.gc import gc_topic
from tests.engine.helpers import compact
from tests.support.cli_process import run_cli
from tests.support.connect_sink import SinkConfig, SinkRecord, write_sink

pytestmark = pytest.mark.backends("local", "seaweedfs")

ORDER_SCHEMA = {
    "type": "record",
    "name": "Order",
    "fields": [{"name": "id", "type": "long"}, {"name": "status", "type": "string"}],
}


def sink_uri(lake_config: LakeConfig, tmp_path: Path, topic: str) -> str:
    """A folder beside the lake, on the same store, where the sink wrote `topic`."""
    if lake_config.lake_uri.startswith("file://"):
        return f"file://{tmp_path / 'sink' / 'topics' / topic}"
    return f"{lake_config.lake_uri}-sink-{uuid.uuid4().hex[:6]}/topics/{topic}"


def orders(count: int, partitions: int = 2, keys: int = 5, tombstone_every: int = 0) -> list[SinkRecord]:
    """Updates of `keys` orders per partition, a tombstone every `tombstone_every` records."""
    out = []
    for p in range(partitions):
        for offset in range(count):
            key = f"order-{offset % keys}"
            tombstone = tombstone_every and offset % tombstone_every == tombstone_every - 1
            value = None if tombstone else {"id": offset, "status": f"s{offset}-p{p}"}
            out.append(
                SinkRecord(p, offset, key, value, (("trace", f"t{offset}"),), 1_790_000_000_000 + offset * 600_000)
            )
    return out


def consumed(lake: Lake, topic: str) -> list[tuple[int, int, bytes | None, Any]]:
    """(partition, offset, key, value as JSON) of every record `consume` reads."""
    out = []
    for log in lake.topic(topic).partition_logs():
        for row in log.read().to_pylist():
            value = None if row["value"] is None else json.loads(row["value"])
            out.append((log.partition, row["offset"], row["key"], value))
    return out


def held(records: list[SinkRecord], with_tombstones: bool = True) -> list[tuple[int, int, bytes | None, Any]]:
    return [
        (r.partition, r.offset, json.dumps(r.key).encode() if not isinstance(r.key, str) else r.key.encode(), r.value)
        for r in sorted(records, key=lambda r: (r.partition, r.offset))
        if with_tombstones or r.value is not None
    ]


def duckdb_latest(store_root: Path) -> set[tuple[int, bytes, int]]:
    """(partition, key, offset) of each key's latest live record, by DuckDB over the sink's
    Parquet files: offsets from the file names (start + row number), keys from the sidecars."""
    con = duckdb.connect()
    keys = con.sql(
        f"""SELECT regexp_extract(filename, '\\+(\\d+)\\+', 1)::INT AS p,
                   regexp_extract(filename, '\\+\\d+\\+(\\d+)', 1)::BIGINT + file_row_number AS o,
                   filename LIKE '%/tombstone/%' AS t, key
            FROM read_parquet('{store_root}/**/*.keys.snappy.parquet', filename = true, file_row_number = true)"""
    ).fetchall()
    latest: dict[tuple[int, str], tuple[int, bool]] = {}
    for p, o, tombstone, key in keys:
        if (p, key) not in latest or latest[(p, key)][0] < o:
            latest[(p, key)] = (o, tombstone)
    return {(p, k.encode(), o) for (p, k), (o, tombstone) in latest.items() if not tombstone}


def live_after_compaction(lake: Lake, topic: str) -> set[tuple[int, bytes, int]]:
    return {(p, k, o) for p, o, k, v in consumed(lake, topic) if v is not None}


def test_parquet_with_key_and_header_sidecars_in_a_time_based_layout_adopts_and_compacts_as_duckdb_says(
    spark: SparkSession, lake_config: LakeConfig, tmp_path: Path
) -> None:
    lake = Lake.open(lake_config)
    source = sink_uri(lake_config, tmp_path, "orders")
    records = orders(40)
    config = SinkConfig("parquet", ORDER_SCHEMA, store_headers=True, time_based=True, flush_size=7)
    write_sink(open_store(source, lake.config.storage), "", "orders", records, config)
    assert any(k.startswith("year=") and ".headers." in k for k in config.written)

    report = adopt_connect(lake, "orders", ConnectSource(source, settle_ms=0))
    assert consumed(lake, "orders") == held(records)  # every record, at its own offset, once
    assert report.partitions[0].records == 40 and report.partitions[0].next_offset == 40
    row = lake.topic("orders").partition(1).read().to_pylist()[3]
    assert row["headers"] == [{"key": "trace", "value": b"t3"}] and row["key"] == b"order-3"

    lake.alter_topic("orders", {"cleanup.policy": "compact"})
    for log in lake.topic("orders").partition_logs():
        log.roll()
    compact(spark, lake, lake.topic("orders"), now=wall_clock_ms())
    if lake_config.lake_uri.startswith("file://"):  # DuckDB reads the sink's files where they are
        assert live_after_compaction(lake, "orders") == duckdb_latest(tmp_path / "sink" / "topics" / "orders")
    expected = {(r.partition, r.key.encode(), r.offset) for r in records if r.offset >= 35}
    assert live_after_compaction(lake, "orders") == expected


def test_avro_with_a_tombstone_folder_keeps_the_tombstones_and_compaction_erases_their_keys(
    spark: SparkSession, lake_config: LakeConfig, tmp_path: Path
) -> None:
    lake = Lake.open(lake_config)
    lake.create_topic("orders", 2, {"cleanup.policy": "compact", "delete.retention.ms": 0})
    source = sink_uri(lake_config, tmp_path, "orders")
    records = []
    for p in range(2):  # ten orders updated; four of them deleted; the others updated again
        for offset in range(40):
            key, value = f"order-{offset % 10}", {"id": offset, "status": f"s{offset}-p{p}"}
            if 20 <= offset < 24:
                key, value = f"order-{offset - 20}", None
            elif offset >= 24:
                key = f"order-{4 + offset % 6}"
            records.append(SinkRecord(p, offset, key, value))
    config = SinkConfig("avro", ORDER_SCHEMA, write_tombstones=True, flush_size=15)
    write_sink(open_store(source, lake.config.storage), "", "orders", records, config)
    assert any(k.startswith("tombstone/") and k.endswith(".keys.avro") for k in config.written)

    report = adopt_connect(lake, "orders", ConnectSource(source, settle_ms=0))
    assert report.partitions[0].interleaved_windows == 1  # the tombstones were written beside values
    read = consumed(lake, "orders")
    assert sorted((p, k, v is None) for p, _, k, v in read) == sorted((p, k, v is None) for p, _, k, v in held(records))
    assert [o for p, o, _, _ in read if p == 0] == list(range(40))  # every offset once, no gap

    for log in lake.topic("orders").partition_logs():
        log.roll()
    compact(spark, lake, lake.topic("orders"), now=wall_clock_ms())
    compact(spark, lake, lake.topic("orders"), now=wall_clock_ms() + 1)  # the tombstones' horizon passed
    truth: dict[tuple[int, str], dict[str, Any] | None] = {}
    for r in records:
        truth[(r.partition, r.key)] = r.value
    live = {(p, k.decode(), json.dumps(v)) for p, _, k, v in consumed(lake, "orders") if v is not None}
    assert live == {(p, k, json.dumps(v)) for (p, k), v in truth.items() if v is not None}
    assert not any(k.startswith(b"order-") and int(k[6:]) < 4 for _, _, k, _ in consumed(lake, "orders"))


def test_json_gzip_debezium_values_take_keys_from_a_field_and_later_runs_adopt_only_new_files(
    lake_config: LakeConfig, tmp_path: Path
) -> None:
    lake = Lake.open(lake_config)
    source = sink_uri(lake_config, tmp_path, "customers")
    store = open_store(source, lake.config.storage)

    def change(p: int, offset: int) -> SinkRecord:
        row = {"id": offset % 4, "email": f"c{offset}@example.com"}
        return SinkRecord(
            p, offset, None, {"before": None, "after": row, "op": "u", "ts_ms": 1_790_000_000_000 + offset}
        )

    first = [change(0, o) for o in range(10)]
    config = SinkConfig("json", store_keys=False, gzip=True, flush_size=4)
    write_sink(store, "", "customers", first, config)
    assert all(k.endswith(".json.gz") for k in config.written)
    spec = ConnectSource(source, key_field="after.id", timestamp_field="ts_ms", settle_ms=0)
    adopt_connect(lake, "customers", spec)
    rows = lake.topic("customers").partition(0).read().to_pylist()
    assert [(r["offset"], r["key"], r["timestamp"]) for r in rows] == [
        (o, str(o % 4).encode(), 1_790_000_000_000 + o) for o in range(10)
    ]
    assert json.loads(rows[0]["value"])["after"] == {"id": 0, "email": "c0@example.com"}

    # The connector goes on (and re-delivers offsets 8.. after a restart with another flush.size).
    later = [change(0, o) for o in range(8, 20)]
    write_sink(store, "", "customers", later, SinkConfig("json", store_keys=False, gzip=True, flush_size=5))
    dry = adopt_connect(lake, "customers", spec, dry_run=True)
    assert dry.partitions == {} and lake.topic("customers").partition(0).manifest().next_offset == 10
    again = adopt_connect(lake, "customers", spec)
    assert again.plan.already_adopted >= 1  # the files adopted before are not read again
    offsets = [r["offset"] for r in lake.topic("customers").partition(0).read().to_pylist()]
    assert offsets == list(range(20))  # offsets 8 and 9, written twice, are adopted once

    young = [change(0, o) for o in range(20, 23)]
    write_sink(store, "", "customers", young, SinkConfig("json", store_keys=False, gzip=True, flush_size=5))
    settled = adopt_connect(lake, "customers", ConnectSource(source, key_field="after.id", settle_ms=3_600_000))
    assert settled.plan.unsettled and lake.topic("customers").partition(0).manifest().next_offset == 20


def test_a_compacted_topic_without_keys_is_refused_and_nothing_is_written(
    lake_config: LakeConfig, tmp_path: Path
) -> None:
    lake = Lake.open(lake_config)
    lake.create_topic("orders", 2, {"cleanup.policy": "compact"})
    source = sink_uri(lake_config, tmp_path, "orders")
    write_sink(
        open_store(source, lake.config.storage),
        "",
        "orders",
        orders(6),
        SinkConfig("avro", ORDER_SCHEMA, store_keys=False),
    )
    with pytest.raises(LakeCleanerError, match=r"store\.kafka\.keys=true"):
        adopt_connect(lake, "orders", ConnectSource(source, settle_ms=0))
    assert lake.topic("orders").partition(0).manifest().next_offset == 0


def test_adopt_connect_from_the_cli_dry_run_then_adopt(tmp_path: Path) -> None:
    lake_uri = f"file://{tmp_path / 'lake'}"
    config = tmp_path / "lakecleaner.yaml"
    config.write_text(yaml.safe_dump({"lake": {"uri": lake_uri}}))
    source = f"file://{tmp_path / 'sink' / 'topics' / 'orders'}"
    write_sink(open_store(source), "", "orders", orders(9, partitions=1), SinkConfig("parquet", ORDER_SCHEMA))

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return run_cli("--config", str(config), *args)

    dry = cli("adopt", "connect", "--topic", "orders", "--from", source, "--settle-seconds", "0", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["plan"]["partitions"]["0"] and json.loads(dry.stdout)["dry_run"]
    done = cli("adopt", "connect", "--topic", "orders", "--from", source, "--settle-seconds", "0")
    assert done.returncode == 0 and "adopted orders" in done.stdout, done.stderr
    consumed_rows = cli("consume", "--topic", "orders", "--partition", "0", "--json")
    assert consumed_rows.returncode == 0, consumed_rows.stderr


def offsets_of(files: list[tuple[int, bool, int, int | None]], previous: int = -1) -> list[list[int]]:
    return [a.tolist() for a in record_offsets(files, previous)]


def test_record_offsets_follow_the_files_drop_re_deliveries_and_merge_tombstones() -> None:
    # contiguous files: start + i
    assert offsets_of([(0, False, 3, 3), (3, False, 2, None)]) == [[0, 1, 2], [3, 4]]
    # a file re-delivered from offset 2 on: the first file's records from 2 on are the second's
    assert offsets_of([(0, False, 4, 2), (2, False, 3, None)]) == [[0, 1, -1, -1], [2, 3, 4]]
    # a gap stays a gap
    assert offsets_of([(0, False, 2, 5), (5, False, 1, None)]) == [[0, 1], [5]]
    # a tombstone file written beside a value file: its records after the values of the window
    assert offsets_of([(0, False, 3, None), (1, True, 2, None)]) == [[0, 1, 2], [3, 4]]
    assert interleaved_windows([(0, False, 3, None), (1, True, 2, None)]) == 1
    assert interleaved_windows([(0, False, 3, 3), (3, True, 2, None)]) == 0
    # after a previous offset (the runs of one adoption)
    assert offsets_of([(10, False, 2, None)], previous=10) == [[11, 12]]


def test_a_corrupt_file_stops_its_partition_at_the_file_before_and_the_others_proceed(
    lake_config: LakeConfig, tmp_path: Path
) -> None:
    lake = Lake.open(lake_config)
    source = sink_uri(lake_config, tmp_path, "orders")
    store = open_store(source, lake.config.storage)
    config = SinkConfig("avro", ORDER_SCHEMA, flush_size=4)
    write_sink(store, "", "orders", orders(12), config)
    damaged = "partition=1/orders+1+0000000004.avro"
    good = store.read(damaged)
    store.write(damaged, b"Obj\x01 not avro")

    report = adopt_connect(lake, "orders", ConnectSource(source, settle_ms=0))
    assert set(report.failures) == {1} and damaged in report.failures[1]
    assert lake.topic("orders").partition(0).manifest().next_offset == 12
    assert lake.topic("orders").partition(1).manifest().next_offset == 4  # the file before it
    store.write(damaged, good)  # the file put right: the next run goes on from there
    again = adopt_connect(lake, "orders", ConnectSource(source, settle_ms=0))
    assert not again.failures and consumed(lake, "orders") == held(orders(12))


def test_gc_deletes_the_sinks_files_once_adopted_and_the_delay_passed_unless_kept(
    lake_config: LakeConfig, tmp_path: Path
) -> None:
    lake = Lake.open(lake_config)
    lake.create_topic("orders", 2, {"file.delete.delay.ms": 60_000})
    source = sink_uri(lake_config, tmp_path, "orders")
    store = open_store(source, lake.config.storage)
    write_sink(store, "", "orders", orders(8), SinkConfig("parquet", ORDER_SCHEMA, flush_size=4))
    sink_files = {obj.key for obj in store.list("")}
    adopted_at = wall_clock_ms()
    adopt_connect(lake, "orders", ConnectSource(source, settle_ms=0))
    later = [SinkRecord(0, 8, "order-x", {"id": 8, "status": "new"})]
    write_sink(store, "", "orders", later, SinkConfig("parquet", ORDER_SCHEMA))  # not adopted yet

    def sink_copies_of(key: bytes) -> list[tuple[str, str, str | None]]:
        audit = audit_key(lake, "orders", key, wall_clock_ms())
        assert not audit.unreadable, audit.unreadable
        found = [c for c in audit.copies if "sink" in c.object]
        return sorted((c.object.rsplit("/", 1)[-1], c.kind, c.deadline and c.deadline.overdue) for c in found)

    # The erasure audit finds the key in the sink's files too (order-1 is in every file of both
    # partitions, value and keys), as files that left the log: gc deletes them after the delay.
    found = sink_copies_of(b"order-1")
    assert len(found) == 8 and {kind for _, kind, _ in found} == {LEFT_THE_LOG}
    assert not gc_topic(lake, "orders", adopted_at + 30_000).originals_deleted  # the delay has not passed
    assert sink_files <= {obj.key for obj in store.list("")}
    report = gc_topic(lake, "orders", wall_clock_ms() + 60_000)
    assert len(report.originals_deleted) == len(sink_files)
    assert {obj.key for obj in store.list("")} == {
        "partition=0/orders+0+0000000008.snappy.parquet",
        "partition=0/orders+0+0000000008.keys.snappy.parquet",
    }
    assert consumed(lake, "orders") == held(orders(8))  # the log holds what the files held
    assert sink_copies_of(b"order-1") == []  # gone from the sink's files
    not_adopted = sink_copies_of(b"order-x")  # nothing deletes a file not adopted yet
    assert [(k, "nothing deletes it" in (why or "")) for _, k, why in not_adopted] == [(UNREFERENCED, True)] * 2

    adopt_connect(lake, "orders", ConnectSource(source, settle_ms=0, keep_originals=True))
    assert not gc_topic(lake, "orders", wall_clock_ms() + 120_000).originals_deleted
    assert len(store.list("")) == 2

    lake.store.write(originals_key("orders"), b'{"sources": [{"uri": 3}]}')  # damaged: nothing is deleted
    damaged = gc_topic(lake, "orders", wall_clock_ms() + 120_000)
    assert not damaged.originals_deleted and any("adopted originals" in w for w in damaged.warnings)


def test_the_plan_reads_a_start_offset_written_twice_once_and_stops_a_partition_at_an_unsettled_file() -> None:
    def sink(key: str, mtime: int) -> SinkFile:
        return parse_sink_key(key, "orders", 100, mtime)

    files = [
        sink("year=2026/month=11/day=27/hour=10/orders+0+0000000000.avro", 1000),
        sink("year=2026/month=11/day=27/hour=10/orders+0+0000000000.keys.avro", 1000),
        sink("year=2026/month=11/day=27/hour=11/orders+0+0000000000.avro", 2000),  # re-delivered an hour later
        sink("year=2026/month=11/day=27/hour=11/orders+0+0000000000.keys.avro", 2000),
        sink("year=2026/month=11/day=27/hour=11/orders+0+0000000005.avro", 3000),  # its keys not written yet
        sink("year=2026/month=11/day=27/hour=11/orders+0+0000000009.avro", 3000),
        sink("year=2026/month=11/day=27/hour=11/orders+0+0000000009.keys.avro", 3000),
        sink("partition=1/orders+1+0000000000.avro", 1000),
        sink("partition=1/orders+1+0000000000.keys.avro", 1000),
    ]
    plan = plan_adoption(files, {}, now_ms=10_000, settle_ms=500, keys_from_sidecars=True)
    assert [b.main.key for b in plan.partitions[0]] == ["year=2026/month=11/day=27/hour=11/orders+0+0000000000.avro"]
    assert plan.re_delivered == [(files[2].key, files[0].key)]
    assert "keys sidecar is missing" in plan.unsettled[files[4].key]
    assert "not settled" in plan.unsettled[files[5].key]  # nothing after it, or offsets 5.. were lost for good
    assert [b.main.key for b in plan.partitions[1]] == ["partition=1/orders+1+0000000000.avro"]
    again = plan_adoption(files, {0: 5, 1: 3}, now_ms=10_000, settle_ms=500, keys_from_sidecars=True)
    # The last file starting below the position is read again (its records from there on are new).
    assert [b.start for b in again.partitions[0]] == [0] and again.already_adopted == 0
    with pytest.raises(NotASinkFile):
        sink("partition=0/other+0+0000000000.avro", 1)
