"""Topics as Iceberg tables (issue 48), read by pyiceberg, a client no one here wrote: after each
kind of commit the table's current snapshot is the committed log, registered in place; a table
that missed commits (a crash between the manifest's commit and the table's) is caught up by
`iceberg sync`; `iceberg status` says how to reach it, secrets masked."""

from __future__ import annotations

import dataclasses
import io
import json
import shutil
import struct
import subprocess
import time
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from pyiceberg.catalog import load_catalog
from pyiceberg.manifest import ManifestContent
from pyspark.sql import SparkSession

from lakecleaner.audit import audit_key
from lakecleaner.clock import wall_clock_ms
from lakecleaner.config import LakeConfig, TopicSpec, parse_config
from lakecleaner.extras import open_lake
from lakecleaner.faults import CRASH_EXIT_STATUS, ENV_CRASH_AT
from lakecleaner.iceberg.catalog import CATALOG_NAME, catalog_properties, open_catalog
from lakecleaner.iceberg.entries import partition_files
from lakecleaner.iceberg.follow import sync_topic
from lakecleaner.iceberg.naming import table_name
from lakecleaner.iceberg.shown import shown
from lakecleaner.iceberg.snapshots import EXPIRED_PER_SYNC, snapshot_releases
from lakecleaner.iceberg.spark_catalog import NoSparkEquivalent, spark_catalog_conf
from lakecleaner.iceberg.table_status import LatestFiles, table_status
from lakecleaner.iceberg.transactions import open_transaction
from lakecleaner.lake import Lake
from lakecleaner.log.layout import topic_metadata_key
from lakecleaner.log.repair import repair_partition
from lakecleaner.policy.erasure import HIDDEN, LEFT_THE_LOG, LIVE, UNREFERENCED
from lakecleaner.policy.table_maintenance import DEAD_SHARE, MAX_FILES
from lakecleaner.retention import retain_topic
from lakecleaner.retention.executor import trim_partition
from lakecleaner.retention.gc import gc_topic
from tests.engine.helpers import compact, keyed
from tests.support import lake_process
from tests.support.cli_process import run_cli
from tests.support.spark_iceberg_reader import spark_read
from tests.support.tables import (
    assert_table_is_the_log,
    latest_of_the_log,
    latest_rows,
    log_rows,
    table_rows,
    with_tables,
)

pytestmark = pytest.mark.backends("local", "seaweedfs")

HOUR = 3_600_000


@pytest.mark.classic_pass(
    "the table after each kind of commit; test_vectored_clean.py reads the log table after a clean on Connect"
)
def test_the_table_is_the_committed_log_after_every_kind_of_commit(
    spark: SparkSession, lake_config: LakeConfig, tmp_path: Path
) -> None:
    lake = open_lake(with_tables(lake_config, tmp_path))
    topic = lake.create_topic(
        "orders.v1",
        2,
        {"cleanup.policy": "compact,delete", "segment.bytes": 700, "retention.ms": 10 * HOUR},
    )
    for round_ in range(4):
        for p in range(2):
            batch = keyed({f"k{i}": None if (round_, i) == (3, 1) else f"v{round_}-{i}" for i in range(6)}, 1000)
            topic.partition(p).append(batch, now_ms=1000 + round_)
    topic.partition(0).append(
        pa.table({"key": [b"h"], "value": [b"x"], "timestamp": [1500], "headers": [[{"key": "a", "value": None}]]}),
        now_ms=1500,
    )
    assert_table_is_the_log(lake, "orders.v1")  # appends, and the rolls inside them

    for p in range(2):
        topic.partition(p).roll(now_ms=2000)
    compact(spark, lake, topic, now=2 * HOUR)
    assert_table_is_the_log(lake, "orders.v1")  # compaction's rewrite

    log = lake.topic("orders.v1").partition(1)
    boundary = log.manifest().segments[1].base_offset
    trim_partition(lake, "orders.v1", 1, boundary, now_ms=3 * HOUR)
    retain_topic(lake, "orders.v1", 3 * HOUR)
    assert log.manifest().segments[0].base_offset == boundary
    assert_table_is_the_log(lake, "orders.v1")  # trim then retention

    lake.store.write(log.prefix + "manifest.json", b"{ damaged")
    repair_partition(lake.store, "orders.v1", 1, topic.config, force=True)
    sync_topic(lake, "orders.v1")  # what `lakecleaner repair` runs after it
    assert_table_is_the_log(lake, "orders.v1")  # a repaired manifest

    topic.partition(0).append(keyed({"late": "1"}, 20 * HOUR), now_ms=20 * HOUR)
    retain_topic(lake, "orders.v1", 20 * HOUR)  # retention.ms: every segment but the active one goes
    gc_topic(lake, "orders.v1", 40 * HOUR)
    assert_table_is_the_log(lake, "orders.v1")
    assert_spark_reads_the_log(lake, "orders.v1")


def assert_spark_reads_the_log(lake: Lake, topic: str) -> None:
    """Spark with Apache Iceberg's runtime, configured as `iceberg status` says, reads both
    tables as pyiceberg does: the committed log, and each live key's latest value."""
    name = f"lakecleaner.{table_name(topic)}"
    read = spark_read(catalog_properties(lake.config, lake.store.root_uri), [name, name + "_latest"])
    by_offset = sorted(read[name], key=lambda r: (r["partition"], r["offset"]))
    partitions = range(lake.topic(topic).partitions)
    assert by_offset == [{"partition": p, **row} for p in partitions for row in log_rows(lake, topic, p)] and by_offset
    latest = sorted(read[name + "_latest"], key=lambda r: (r["partition"], r["key"]))
    assert latest == latest_of_the_log(lake, topic) and latest


@pytest.mark.classic_pass(
    "the table's position deletes; test_vectored_clean.py reads the log table after a clean on Connect"
)
def test_a_trim_inside_a_file_is_a_position_delete_file_and_the_table_holds_no_copy_of_records(
    spark: SparkSession, lake_config: LakeConfig, tmp_path: Path
) -> None:
    lake = open_lake(with_tables(lake_config, tmp_path))
    delay_ms = 2000
    topic = lake.create_topic("accounts", 1, {"cleanup.policy": "compact", "file.delete.delay.ms": delay_ms})
    log = topic.partition(0)
    log.append(keyed({f"k{i}": f"v{i}" for i in range(8)}, 1000), now_ms=wall_clock_ms())
    (cut,) = log.manifest().segments[0].files
    source = lake.store.location(log.prefix + cut.path)
    catalog = load_catalog(CATALOG_NAME, **catalog_properties(lake.config, lake.store.root_uri))

    def files() -> tuple[list[str], dict[str, list[tuple[str, int]]]]:
        """The log table's data files, and each delete file's rows, in its current snapshot."""
        table = catalog.load_table(("lakecleaner", "accounts"))
        held = partition_files(table, 0)
        deletes = {}
        for file in held.deletes:
            with table.io.new_input(file.file_path).open() as stream:
                deletes[file.file_path] = [(r["file_path"], r["pos"]) for r in pq.read_table(stream).to_pylist()]
        return [f.file_path for f in held.data], deletes

    def table_folder_objects() -> set[str]:
        return {obj.key for obj in lake.store.list("topics/accounts/data/")}

    trim_partition(lake, "accounts", 0, 3, now_ms=wall_clock_ms())
    assert_table_is_the_log(lake, "accounts")  # offsets 3.. in the table, k0..k2 in no table
    data, deletes = files()
    assert data == [source]  # registered in place: no copy of its records
    ((first, rows),) = deletes.items()
    assert rows == [(source, 0), (source, 1), (source, 2)] and first.endswith(".below-3.deletes.parquet")
    # The log table's folders hold positions only: k5's record is stored in the log's segment file
    # (and its value in the latest-values table), never in the log table's `data/`.
    audit = audit_key(lake, "accounts", b"k5", wall_clock_ms())
    assert sorted((c.kind, c.object.split("/")[2]) for c in audit.copies) == [(LIVE, "latest"), (LIVE, "partition=0")]
    assert sync_topic(lake, "accounts").log.snapshot_id is None  # idempotent: nothing to change

    trim_partition(lake, "accounts", 0, 5, now_ms=wall_clock_ms())
    assert_table_is_the_log(lake, "accounts")
    data, deletes = files()
    ((second, rows),) = deletes.items()
    assert data == [source] and second != first and [pos for _, pos in rows] == [0, 1, 2, 3, 4]
    assert {lake.store.location(k) for k in table_folder_objects()} == {first, second}  # old readers read the first

    log.append(keyed({"k6": None, "k9": "v9"}, 2000), now_ms=wall_clock_ms())
    log.roll(now_ms=wall_clock_ms())
    compact(spark, lake, topic, now=wall_clock_ms())  # the cut file is rewritten: its delete file leaves the table
    assert_table_is_the_log(lake, "accounts")
    assert files()[1] == {}
    time.sleep(delay_ms / 1000 + 0.5)
    gc_topic(lake, "accounts", wall_clock_ms())
    reached = _files_of_every_snapshot(catalog, "accounts")
    assert first not in {lake.store.location(k) for k in table_folder_objects()}
    assert {lake.store.location(key) for key in table_folder_objects()} <= reached  # the unreachable ones are gone
    assert_table_is_the_log(lake, "accounts")


def test_a_table_that_missed_commits_is_caught_up_by_sync_and_status_says_so(
    lake_config: LakeConfig, tmp_path: Path
) -> None:
    tabled = open_lake(with_tables(lake_config, tmp_path))
    topic = tabled.create_topic("events", 2, {"cleanup.policy": "compact"})
    topic.partition(0).append(keyed({"a": "1"}), now_ms=1000)
    # Commits the table does not see: as after a crash between a manifest's commit and the table's.
    blind = open_lake(lake_config)
    for p in range(2):
        blind.topic("events").partition(p).append(keyed({"b": "2", "c": "3"}), now_ms=2000)
        blind.topic("events").partition(p).roll(now_ms=2000)
    status = table_status(tabled, "events")
    assert not status.in_step and status.missing == 2 and status.extra == 0
    first = sync_topic(tabled, "events")
    assert (first.log.added, first.log.removed, first.latest_partitions) == (2, 0, 2)
    assert first.log.snapshot_id is not None
    again = sync_topic(tabled, "events")
    assert (again.log.added, again.log.removed, again.log.snapshot_id, again.latest_partitions) == (0, 0, None, 0)
    assert_table_is_the_log(tabled, "events")


def test_iceberg_status_and_sync_from_the_cli_mask_secrets(tmp_path: Path) -> None:
    config = tmp_path / "lakecleaner.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "lake": {"uri": f"file://{tmp_path / 'lake'}"},
                "iceberg": {
                    "enabled": True,
                    "catalog": {
                        "type": "sql",
                        "uri": f"sqlite:///{tmp_path / 'cat.db'}",
                        "s3.secret-access-key": "hunter2",
                    },
                },
                "topics": {
                    "clicks": {"partitions": 1},
                    "carts": {"partitions": 1, "config": {"cleanup.policy": "compact"}},
                },
            }
        )
    )

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return run_cli("--config", str(config), *args)

    assert cli("topics", "create", "clicks").returncode == 0
    produced = run_cli("--config", str(config), "produce", "--topic", "clicks", input='{"key": "k", "value": "v"}\n')
    assert produced.returncode == 0, produced.stderr
    status = cli("iceberg", "status", "--json")
    assert status.returncode == 0, status.stderr
    assert "hunter2" not in status.stdout + status.stderr
    shown = json.loads(status.stdout)["topics"][0]
    assert shown["topic"] == "clicks" and shown["tables"] == ["lakecleaner.clicks"] and shown["in_step"]
    assert shown["catalog"]["name"] == "lakecleaner" and shown["catalog"]["s3.secret-access-key"] == "***"
    spark_conf = shown["spark"]["conf"]
    assert spark_conf["spark.sql.catalog.lakecleaner.uri"] == f"jdbc:sqlite:{tmp_path / 'cat.db'}"
    assert spark_conf["spark.sql.catalog.lakecleaner.s3.secret-access-key"] == "***"
    assert any("iceberg-spark-runtime" in p for p in shown["spark"]["packages"])
    synced = cli("iceberg", "sync", "--topic", "clicks")
    assert synced.returncode == 0 and "in step" in synced.stdout, synced.stderr
    refused = cli("iceberg", "sync", "--topic", "nope")
    assert refused.returncode == 2 and "nope" in refused.stderr

    assert cli("topics", "create", "carts").returncode == 0
    for value in ("v", "w"):  # the second hides the first's row: half the rows dead, a major rewrite due
        line = f'{{"key": "k", "value": "{value}"}}\n'
        assert run_cli("--config", str(config), "produce", "--topic", "carts", input=line).returncode == 0
    compacted = cli("iceberg", "compact", "--topic", "carts", "--json")
    assert compacted.returncode == 0, compacted.stderr
    [rewrite] = json.loads(compacted.stdout)["topics"]["carts"]
    assert (rewrite["kind"], rewrite["files_removed"], rewrite["rows_written"]) == ("major", 3, 1)
    again = cli("iceberg", "compact", "--topic", "carts")
    assert again.returncode == 0 and "carts: nothing due" in again.stdout, again.stderr


def test_topic_names_iceberg_catalogs_refuse_are_mapped() -> None:
    assert table_name("Orders.v1-eu") == "orders_v1_eu"


def test_spark_is_told_the_catalog_pyiceberg_reads_with_secrets_masked_in_status() -> None:
    on_postgres = spark_catalog_conf(
        {
            "type": "sql",
            "uri": "postgresql+psycopg://lake%40ops:s%3Acret@db.internal:5433/iceberg",
            "warehouse": "s3://bucket/lake",
            "s3.endpoint": "http://minio:9000",
            "s3.region": "eu-west-1",
        }
    )
    prefix = "spark.sql.catalog.lakecleaner"
    assert on_postgres[prefix] == "org.apache.iceberg.spark.SparkCatalog"
    assert on_postgres[f"{prefix}.type"] == "jdbc"
    assert on_postgres[f"{prefix}.uri"] == "jdbc:postgresql://db.internal:5433/iceberg"
    assert (on_postgres[f"{prefix}.jdbc.user"], on_postgres[f"{prefix}.jdbc.password"]) == ("lake@ops", "s:cret")
    assert on_postgres[f"{prefix}.io-impl"] == "org.apache.iceberg.aws.s3.S3FileIO"
    assert on_postgres[f"{prefix}.client.region"] == "eu-west-1" and f"{prefix}.s3.region" not in on_postgres
    assert on_postgres[f"{prefix}.s3.path-style-access"] == "true"
    assert shown(on_postgres)[f"{prefix}.jdbc.password"] == "***"
    rest = spark_catalog_conf({"type": "rest", "uri": "https://catalog:8181", "credential": "id:secret"})
    assert (rest[f"{prefix}.type"], rest[f"{prefix}.uri"]) == ("rest", "https://catalog:8181")
    assert shown(rest)[f"{prefix}.credential"] == "***"
    with pytest.raises(NoSparkEquivalent, match="oracle"):
        spark_catalog_conf({"type": "sql", "uri": "oracle://db/x"})


def test_a_catalog_is_opened_once_per_process_and_again_when_its_file_was_made_anew(tmp_path: Path) -> None:
    config = with_tables(parse_config({"lake": {"uri": f"file://{tmp_path / 'lake'}"}}, "<test>"), tmp_path)
    lake = open_lake(config)
    lake.create_topic("a", 1, {})
    assert open_catalog(config, lake.store.root_uri) is open_catalog(config, lake.store.root_uri)
    shutil.rmtree(tmp_path / "lake")  # the lake removed and created again, in the same process
    lake = open_lake(config)
    lake.create_topic("a", 1, {}).partition(0).append(keyed({"k": "v"}), now_ms=1000)
    assert_table_is_the_log(lake, "a")  # through the new file, not a connection to the deleted one


def test_gc_deletes_a_file_only_once_no_snapshot_kept_for_readers_references_it(
    lake_config: LakeConfig, tmp_path: Path
) -> None:
    lake = open_lake(with_tables(lake_config, tmp_path))
    delay_ms = 3000
    config = {"cleanup.policy": "delete", "segment.bytes": 400, "retention.ms": HOUR, "file.delete.delay.ms": delay_ms}
    lake.create_topic("clicks", 1, config)
    log = lake.topic("clicks").partition(0)
    start = wall_clock_ms()
    for i in range(6):
        log.append(keyed({f"k{i}-{j}": "v" * 40 for j in range(4)}, start - 2 * HOUR), now_ms=start)
    log.append(keyed({"fresh": "v"}, start), now_ms=start)
    catalog = load_catalog(CATALOG_NAME, **catalog_properties(lake.config, lake.store.root_uri))
    table = catalog.load_table(("lakecleaner", "clicks"))
    before = table.current_snapshot()
    assert before is not None
    old_files = {task.file.file_path for task in table.scan().plan_files()}

    retain_topic(lake, "clicks", start)  # every segment but the active one leaves the log
    pending = [lake.store.location(log.prefix + p.path) for p in log.manifest().pending_deletes]
    assert pending and set(pending) <= old_files

    # Due by the manifest at start + delay, but a reader may hold the snapshot from before
    # retention, which was taken after `start` and so is younger than the delay then: the files stay.
    gc_topic(lake, "clicks", start + delay_ms)
    assert all(lake.store.exists(location.removeprefix(lake.store.root_uri + "/")) for location in pending)
    snapshot_files = _files_of_every_snapshot(catalog, "clicks")
    assert set(pending) <= snapshot_files
    reader = catalog.load_table(("lakecleaner", "clicks")).scan(snapshot_id=before.snapshot_id).to_arrow()
    assert reader.num_rows == 25  # the old snapshot still reads

    time.sleep(delay_ms / 1000 + 0.5)
    gc_topic(lake, "clicks", wall_clock_ms() + delay_ms)
    assert not any(lake.store.exists(location.removeprefix(lake.store.root_uri + "/")) for location in pending)
    assert not log.manifest().pending_deletes
    kept = _files_of_every_snapshot(catalog, "clicks")
    assert not kept & set(pending)  # the snapshots that referenced them were expired first
    assert all(lake.store.exists(location.removeprefix(lake.store.root_uri + "/")) for location in kept)
    assert_table_is_the_log(lake, "clicks")


def _files_of_every_snapshot(catalog: Any, topic: str) -> set[str]:
    table = catalog.load_table(("lakecleaner", table_name(topic)))
    return {
        entry.data_file.file_path
        for snapshot in table.snapshots()
        for manifest in snapshot.manifests(table.io)
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True)
    }


def test_the_erasure_audit_reads_the_tables_own_files_and_gc_deletes_what_no_snapshot_reaches(
    lake_config: LakeConfig, tmp_path: Path
) -> None:
    lake = open_lake(with_tables(lake_config, tmp_path))
    delay_ms = 2000
    lake.create_topic("users", 1, {"cleanup.policy": "delete", "file.delete.delay.ms": delay_ms})
    log = lake.topic("users").partition(0)
    secret = b"user-000000042-of-the-eu-region"  # longer than Iceberg's 16-byte bounds
    log.append(keyed({secret.decode(): "profile", "other": "x"}), now_ms=wall_clock_ms())
    catalog = load_catalog(CATALOG_NAME, **catalog_properties(lake.config, lake.store.root_uri))
    table = catalog.load_table(("lakecleaner", "users"))
    # Another writer appends to the table with statistics of the key column on.
    with table.transaction() as transaction:
        transaction.set_properties({"write.metadata.metrics.column.key": "full"})
    table = catalog.load_table(("lakecleaner", "users"))
    row = {
        "partition": 0,
        "offset": 99,
        "timestamp": 1,
        "key": secret,
        "value": b"v",
        "headers": [],
        "delete_horizon_ms": None,
    }
    table.append(pa.Table.from_pylist([row], schema=table.schema().as_arrow()))

    def table_copies() -> list[str]:
        audit = audit_key(lake, "users", secret, wall_clock_ms())
        assert not audit.unreadable, audit.unreadable
        return sorted(c.object for c in audit.copies if c.partition is None)

    found = table_copies()
    assert any("/metadata/" in k and k.endswith(".avro") for k in found)  # the key's bounds in a manifest
    assert any("/data/" in k and k.endswith(".parquet") for k in found)  # the other writer's data file
    reached = [c for c in audit_key(lake, "users", secret, wall_clock_ms()).copies if c.partition is None]
    assert all(c.deadline is not None and c.deadline.gone_by_ms is None and c.deadline.overdue for c in reached)

    sync_topic(lake, "users")  # the table holds only the log's files: the other writer's file goes
    log.append(keyed({"later": "y"}), now_ms=wall_clock_ms())  # a snapshot without the deleted entries
    assert_table_is_the_log(lake, "users")
    time.sleep(delay_ms / 1000 + 0.5)
    gc_topic(lake, "users", wall_clock_ms())
    assert table_copies() == []
    assert_table_is_the_log(lake, "users")


def test_a_short_key_is_found_in_the_tables_folders_only_where_a_writer_put_it(
    lake_config: LakeConfig, tmp_path: Path
) -> None:
    """The tables' metadata is full of digits, names and random bytes (ids, sizes, Avro sync
    markers, snapshot ids as varints): a key such as `5` is found only in a row's key, a column's
    bound, or an entry another writer named itself, never by chance."""
    lake = open_lake(with_tables(lake_config, tmp_path))
    lake.create_topic("ids", 1, {"cleanup.policy": "compact"})
    log = lake.topic("ids").partition(0)
    for _ in range(3):  # several snapshots: manifest lists, manifests and metadata files to search
        log.append(keyed({str(i): f"v{i}" for i in range(10)}), now_ms=wall_clock_ms())
    trim_partition(lake, "ids", 0, 23, now_ms=wall_clock_ms())

    def table_copies(key: bytes) -> list[tuple[str, str]]:
        audit = audit_key(lake, "ids", key, wall_clock_ms())
        assert not audit.unreadable, audit.unreadable
        return sorted((c.kind, c.object.split("/")[2]) for c in audit.copies if c.partition is None)

    for i in range(10):  # each append's rows: superseded (hidden) but the last; 0..2 are below the log start
        assert table_copies(str(i).encode()) == sorted(
            [(HIDDEN, "latest")] * 2 + [(HIDDEN if i < 3 else LIVE, "latest")]
        ), i
    for word in (b"key", b"value", b"partition", b"append", b"overwrite", b"lakecleaner"):
        assert table_copies(word) == [], word

    table = load_catalog(CATALOG_NAME, **catalog_properties(lake.config, lake.store.root_uri)).load_table(
        ("lakecleaner", "ids")
    )
    with table.transaction() as transaction:  # another writer's note names a key
        transaction.set_properties({"owner.note": "erase 7 by Friday"})
    assert ("unreferenced", "metadata") in table_copies(b"7")
    foreign = io.BytesIO()  # another writer's Avro file (no Iceberg field ids) in the table's folder
    schema = {"type": "record", "name": "note", "fields": [{"name": "k", "type": "bytes"}]}
    fastavro.writer(foreign, fastavro.parse_schema(schema), [{"k": b"8"}], codec="deflate")
    lake.store.write("topics/ids/metadata/foreign.avro", foreign.getvalue())
    assert ("unreferenced", "metadata") in table_copies(b"8")
    assert ("unreferenced", "metadata") not in table_copies(b"9")


def test_a_tombstone_hides_the_key_in_the_latest_values_until_maintenance_and_gc_remove_its_file(
    lake_config: LakeConfig, tmp_path: Path
) -> None:
    """Issue 80: a tombstone's sync writes a position-delete file, not the partition again: the
    key's value stays in its data file, hidden, with a deadline (max.compaction.lag.ms, KIP-354);
    gc's table maintenance then rewrites the partition, and gc deletes the old file after the delay."""
    lake = open_lake(with_tables(lake_config, tmp_path))
    delay_ms, lag_ms = 2000, 1000
    config = {"cleanup.policy": "compact", "file.delete.delay.ms": delay_ms, "max.compaction.lag.ms": lag_ms}
    lake.create_topic("profiles", 1, config)
    log = lake.topic("profiles").partition(0)
    secret = b"person-7"
    log.append(keyed({"person-7": "address", "person-8": "other"}), now_ms=wall_clock_ms())

    def latest_copies() -> list[tuple[str, Any]]:
        audit = audit_key(lake, "profiles", secret, wall_clock_ms())
        assert not audit.unreadable, audit.unreadable
        return [(c.kind, c.deadline) for c in audit.copies if c.partition is None and "/latest/" in c.object]

    assert latest_copies() == [(LIVE, None)]  # the key's live value
    log.append(keyed({"person-7": None}), now_ms=wall_clock_ms())  # the tombstone
    assert [r["key"] for r in latest_rows(lake, "profiles")] == [b"person-8"]
    assert_table_is_the_log(lake, "profiles")
    [(kind, deadline)] = latest_copies()  # its deadline: `hidden_deadline` (the topic has no DAG schedule here)
    assert kind == HIDDEN and deadline.overdue is not None and "no schedule" in deadline.overdue

    time.sleep(lag_ms / 1000 + 0.2)
    gc_topic(lake, "profiles", wall_clock_ms())  # maintenance rewrites the partition without the row
    left = latest_copies()
    assert left and all(kind == UNREFERENCED for kind, _ in left)  # the old file: readers keep it the delay
    assert_table_is_the_log(lake, "profiles")
    time.sleep(delay_ms / 1000 + 0.5)
    gc_topic(lake, "profiles", wall_clock_ms())
    assert latest_copies() == []
    assert_table_is_the_log(lake, "profiles")


def test_the_latest_values_follow_the_topics_compaction_strategy(lake_config: LakeConfig, tmp_path: Path) -> None:
    """KIP-280's header version: a later record with a lower version does not replace the key's
    value, as compaction would not keep it."""
    lake = open_lake(with_tables(lake_config, tmp_path))
    config = {"cleanup.policy": "compact", "compaction.strategy": "header", "compaction.strategy.header": "v"}
    log = lake.create_topic("customers", 1, config).partition(0)

    def versioned(key: str, value: str, version: int) -> pa.Table:
        headers = [[{"key": "v", "value": struct.pack(">q", version)}]]
        return pa.table({"key": [key.encode()], "value": [value.encode()], "timestamp": [1000], "headers": headers})

    log.append(versioned("c1", "v5", 5), now_ms=1000)
    log.append(versioned("c1", "v3 (late, lower version)", 3), now_ms=1001)
    log.append(versioned("c2", "v1", 1), now_ms=1002)
    assert [r["value"] for r in latest_rows(lake, "customers")] == [b"v5", b"v1"]
    assert_table_is_the_log(lake, "customers")


def test_the_tables_follow_a_commit_with_the_config_the_committing_topic_holds(
    lake_config: LakeConfig, tmp_path: Path
) -> None:
    """The follower is handed the committing `Topic`: it reads no topic.json per commit. With the
    metadata object gone after the topic was opened, a commit still moves both tables."""
    lake = open_lake(with_tables(lake_config, tmp_path))
    log = lake.create_topic("prices", 1, {"cleanup.policy": "compact"}).partition(0)
    log.append(keyed({"a": "1", "b": "2"}), now_ms=1000)
    lake.store.delete(topic_metadata_key("prices"))
    log.append(keyed({"a": "3"}, 2000), now_ms=2000)
    latest = {r["key"]: r["value"] for r in latest_rows(lake, "prices")}
    assert latest == {b"a": b"3", b"b": b"2"}
    assert [r["offset"] for r in table_rows(lake, "prices", 0)] == [0, 1, 2]


def test_a_repair_that_rebuilds_a_shorter_log_rebuilds_the_latest_values(
    lake_config: LakeConfig, tmp_path: Path
) -> None:
    lake = open_lake(with_tables(lake_config, tmp_path))
    topic = lake.create_topic("accounts", 1, {"cleanup.policy": "compact"})
    log = topic.partition(0)
    log.append(keyed({"a": "1", "b": "2"}), now_ms=1000)
    log.roll(now_ms=1000)
    log.append(keyed({"c": "3"}), now_ms=2000)
    assert [r["key"] for r in latest_rows(lake, "accounts")] == [b"a", b"b", b"c"]
    last = log.manifest().segments[-1].files[0].path
    lake.store.delete(log.prefix + last)  # the last file is lost; repair rebuilds the log without it
    repair_partition(lake.store, "accounts", 0, topic.config, force=True)
    assert log.manifest().next_offset == 2
    sync_topic(lake, "accounts")
    assert [r["key"] for r in latest_rows(lake, "accounts")] == [b"a", b"b"]
    assert_table_is_the_log(lake, "accounts")


def test_the_audit_waits_for_the_tables_readers_as_gc_does_after_a_run_at_a_past_time(
    lake_config: LakeConfig, tmp_path: Path
) -> None:
    """A run at a past time (a backfill, the demo's) puts the files that leave the log in
    pending_deletes due by its own clock, while the log table's snapshots, stamped by the wall
    clock, hold them for file.delete.delay.ms after the sync that stopped referencing them: the
    audit's deadline waits for both, as gc does, so it never calls overdue what gc may not delete."""
    hourly = {"clicks": TopicSpec("clicks", schedule="@hourly")}  # the config file's DAG schedule
    lake = open_lake(dataclasses.replace(with_tables(lake_config, tmp_path), topics=hourly))
    config = {"cleanup.policy": "delete", "segment.bytes": 400, "retention.ms": HOUR, "file.delete.delay.ms": HOUR}
    lake.create_topic("clicks", 1, config)
    log = lake.topic("clicks").partition(0)
    past = wall_clock_ms() - 3 * HOUR
    for i in range(4):
        log.append(keyed({f"k{i}-{j}": "v" * 40 for j in range(4)}, past - 2 * HOUR), now_ms=past)
    log.append(keyed({"fresh": "v"}, past), now_ms=past)
    synced = wall_clock_ms()
    retain_topic(lake, "clicks", past)  # due by the manifest at past + 1 h, two hours ago
    assert all(p.delete_after_ms == past + HOUR for p in log.manifest().pending_deletes)

    now = wall_clock_ms()
    left = [c for c in audit_key(lake, "clicks", b"k0-0", now).copies if c.kind == LEFT_THE_LOG]
    assert left and all(c.deadline is not None and not c.deadline.overdue for c in left), left
    assert all(c.deadline is not None and (c.deadline.gone_by_ms or 0) >= synced + HOUR for c in left)
    gc_topic(lake, "clicks", now)  # the readers' hour has not passed: gc keeps them, as the audit says
    assert all(lake.store.exists(c.object) for c in left)


def test_a_sync_expires_what_readers_released_and_appends_merge_manifests(
    lake_config: LakeConfig, tmp_path: Path
) -> None:
    """Issue 80: a table's metadata holds the snapshots of about one file.delete.delay.ms, not of
    every commit since the last gc: each sync expires the snapshots released longer ago than the
    delay (at most `EXPIRED_PER_SYNC` a sync), never one a reader may still hold; and appends merge
    the log table's manifests once 16 gather, so a sync reads a few, not one per commit."""
    lake = open_lake(with_tables(lake_config, tmp_path))
    lake.create_topic("events", 1, {"cleanup.policy": "compact", "file.delete.delay.ms": HOUR})
    log = lake.topic("events").partition(0)
    for i in range(40):
        log.append(keyed({f"k{i % 7}": f"v{i}"}), now_ms=wall_clock_ms())
    catalog = load_catalog(CATALOG_NAME, **catalog_properties(lake.config, lake.store.root_uri))
    table = catalog.load_table(("lakecleaner", "events"))
    assert len(table.snapshots()) >= 40  # none released a delay ago yet
    current = table.current_snapshot()
    assert current is not None and len(current.manifests(table.io)) <= 16

    delay_ms = 2000  # from here on: the snapshots above were all released over a delay ago
    log = lake.alter_topic("events", {"file.delete.delay.ms": delay_ms}).partition(0)
    time.sleep(delay_ms / 1000 + 0.5)
    woke = wall_clock_ms()
    late = [f"late-{i}" for i in range(4)]
    log.append(keyed({late[0]: "v"}), now_ms=wall_clock_ms())  # releases `current`
    held = catalog.load_table(("lakecleaner", "events"))
    assert current.snapshot_id in {s.snapshot_id for s in held.snapshots()}  # released under a delay ago
    assert held.scan(snapshot_id=current.snapshot_id).to_arrow().num_rows == 40  # and a reader still reads it
    for key in late[1:]:  # with the latest table's two snapshots an append, 4 syncs expire them all
        log.append(keyed({key: "v"}), now_ms=wall_clock_ms())
    assert 4 * EXPIRED_PER_SYNC >= 2 * 40
    for name in ("events", "events_latest"):
        table = catalog.load_table(("lakecleaner", name))
        released = snapshot_releases(table)
        assert min(released.values()) >= woke, name  # every one released a delay ago is expired
    assert_table_is_the_log(lake, "events")
    assert sorted(r["key"] for r in latest_rows(lake, "events")) == sorted(
        [f"k{i}".encode() for i in range(7)] + [key.encode() for key in late]
    )


def test_a_transaction_works_out_the_tables_metadata_once_per_change(lake_config: LakeConfig, tmp_path: Path) -> None:
    """pyiceberg copies the whole metadata on each read of a transaction's metadata; ours works it
    out again only when the transaction stages a change, and reads the change then."""
    lake = open_lake(with_tables(lake_config, tmp_path))
    lake.create_topic("t", 1, {"cleanup.policy": "delete"})
    lake.topic("t").partition(0).append(keyed({"k": "v"}), now_ms=wall_clock_ms())
    table = load_catalog(CATALOG_NAME, **catalog_properties(lake.config, lake.store.root_uri)).load_table(
        ("lakecleaner", "t")
    )
    transaction = open_transaction(table)
    first = transaction.table_metadata
    assert transaction.table_metadata is first and first == table.metadata
    transaction.set_properties({"lakecleaner.test": "1"})
    second = transaction.table_metadata
    assert second is not first and second.properties["lakecleaner.test"] == "1"
    assert transaction.table_metadata is second


def test_merge_on_read_syncs_write_the_batch_fold_their_files_and_maintenance_rewrites_dead_rows(
    lake_config: LakeConfig, tmp_path: Path
) -> None:
    """Issue 80: each sync of the latest values adds a data file of the batch's winners and a
    position-delete file (in a delete manifest) of the rows they supersede, never the partition
    again; the sync folds the batches once the partition holds MAX_FILES files; gc's maintenance
    rewrites the partition once its dead rows pass DEAD_SHARE; both readers read exactly the
    latest values throughout."""
    lake = open_lake(with_tables(lake_config, tmp_path))
    log = lake.create_topic("stock", 1, {"cleanup.policy": "compact"}).partition(0)
    log.append(keyed({f"k{i}": "0" for i in range(100)}), now_ms=wall_clock_ms())
    catalog = load_catalog(CATALOG_NAME, **catalog_properties(lake.config, lake.store.root_uri))

    def latest() -> Any:
        return catalog.load_table(("lakecleaner", "stock_latest"))

    log.append(keyed({"k1": "1", "k2": None}), now_ms=wall_clock_ms())
    table = latest()
    added = table.current_snapshot().summary
    assert added["added-data-files"] == "1" and added["added-records"] == "1"  # the batch's winner only
    assert added["added-position-deletes"] == "2"  # k1's and k2's rows
    contents = {m.content for m in table.current_snapshot().manifests(table.io)}
    assert contents == {ManifestContent.DATA, ManifestContent.DELETES}
    assert table_status(lake, "stock").latest_files == LatestFiles(2, 1, 2)  # what `iceberg status` shows
    assert_table_is_the_log(lake, "stock")

    for round_ in range(MAX_FILES):
        log.append(keyed({f"k{round_ % 5}": f"r{round_}"}), now_ms=wall_clock_ms())
        files = partition_files(latest(), 0)
        assert len(files.data) + len(files.deletes) < MAX_FILES  # folded by the sync once due
    assert_table_is_the_log(lake, "stock")

    log.append(keyed({f"k{i}": "x" for i in range(50)}), now_ms=wall_clock_ms())  # half the rows die
    assert partition_files(latest(), 0).dead_rows > DEAD_SHARE * partition_files(latest(), 0).live_rows
    gc_topic(lake, "stock", wall_clock_ms())
    after = partition_files(latest(), 0)
    assert (len(after.data), after.deletes, after.live_rows) == (1, [], 100)  # one file, no dead row (k2 came back)
    assert table_status(lake, "stock").latest_files == LatestFiles(1, 0, 0)
    assert_table_is_the_log(lake, "stock")


APPEND = {"action": "append", "tag": "a", "batches": 1, "batch_size": 4}


@pytest.mark.parametrize(
    ("point", "action"),
    [("latest.after_deletes_write", APPEND), ("sync.after_hidden_rows_write", {"action": "trim", "offset": 2})],
)
def test_a_process_killed_between_a_delete_file_and_its_snapshot_leaves_the_table_as_before(
    lake_config: LakeConfig, tmp_path: Path, point: str, action: dict[str, Any]
) -> None:
    """Issue 80: a position-delete file (the latest values' superseded rows; a trim's records
    below the log start) is written before the snapshot that references it; a process killed
    in between (a hard exit: no cleanup runs) leaves the table as it was (the log's commit
    stands, the table lags it), and the next sync catches the tables up exactly."""
    lake = open_lake(with_tables(lake_config, tmp_path))
    log = lake.create_topic("carts", 1, {"cleanup.policy": "compact"}).partition(0)
    first = lake_process.start(lake.config, {"topic": "carts", "partition": 0, **APPEND})
    assert first.wait() == 0, first.stderr.read() if first.stderr else ""
    version = log.manifest().version
    log_before, latest_before = table_rows(lake, "carts", 0), latest_rows(lake, "carts")

    killed = lake_process.start(lake.config, {"topic": "carts", "partition": 0, **action}, env={ENV_CRASH_AT: point})
    assert killed.wait() == CRASH_EXIT_STATUS, killed.stderr.read() if killed.stderr else ""
    assert log.manifest().version == version + 1  # the log's commit stands
    assert latest_rows(lake, "carts") == latest_before  # no mix: the old rows, whole
    if action["action"] == "trim":  # the log table's sync died (before the latest values')
        assert table_rows(lake, "carts", 0) == log_before
    assert not table_status(lake, "carts").in_step
    sync_topic(lake, "carts")
    assert_table_is_the_log(lake, "carts")
