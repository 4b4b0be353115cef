"""Tables readers can trust (issue 77): a file registered once however commits race, a sync that
runs late never moving a table back, a reader keeping the snapshot it loaded for
`file.delete.delay.ms` after it was replaced, and gc leaving a sync in flight its files."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from pyiceberg.catalog import load_catalog
from pyspark.sql import SparkSession

from lakecleaner.audit import audit_key
from lakecleaner.clock import wall_clock_ms
from lakecleaner.config import LakeConfig, load_config, parse_config
from lakecleaner.config.iceberg import IcebergSettings
from lakecleaner.demo import iceberg_lines
from lakecleaner.errors import ConfigError, TableOfAnotherLake
from lakecleaner.extras import open_lake
from lakecleaner.iceberg.catalog import CATALOG_NAME, catalog_properties
from lakecleaner.iceberg.follow import rebuild_tables, sync_leases, sync_tables, sync_topic
from lakecleaner.iceberg.schema import LATEST_TABLE, table_folder
from lakecleaner.iceberg.shown import shown
from lakecleaner.iceberg.table_status import table_status
from lakecleaner.retention.executor import trim_partition
from lakecleaner.retention.gc import gc_topic
from tests.engine.helpers import compact, keyed
from tests.support import lake_process
from tests.support.cli_process import run_cli
from tests.support.tables import assert_table_is_the_log, with_tables

pytestmark = pytest.mark.backends("local", "seaweedfs")


@pytest.mark.classic_pass("the tables under racing commits; the session is not the subject")
def test_writers_in_several_processes_and_a_compaction_register_each_file_once(
    spark: SparkSession, lake_config: LakeConfig, tmp_path: Path
) -> None:
    """Four processes append to one compacted topic while it is compacted, each moving the tables
    after its commits: their table commits race, and a lost one is redone from the table read
    again (pyiceberg's own retry would register the winner's files a second time)."""
    config = with_tables(lake_config, tmp_path)
    lake = open_lake(config)
    topic = lake.create_topic("orders", 2, {"cleanup.policy": "compact", "segment.bytes": 2000})
    action = {"action": "append", "topic": "orders", "batches": 8, "batch_size": 10}
    writers = [
        lake_process.start(config, {**action, "partition": p, "tag": f"w{w}p{p}"}) for w in range(2) for p in range(2)
    ]
    time.sleep(2)  # some segments are sealed by then
    compact(spark, lake, topic, now=10_000_000)
    for writer in writers:
        _, err = writer.communicate(timeout=600)
        assert writer.returncode == 0, err.decode()[-3000:]
    assert table_status(lake, "orders").duplicate == 0
    sync_topic(lake, "orders")  # a table commit that lost every race is caught up here
    status = table_status(lake, "orders")
    assert status.in_step and (status.duplicate, status.missing, status.extra) == (0, 0, 0)
    assert_table_is_the_log(lake, "orders")


def test_a_file_registered_twice_is_counted_and_a_sync_registers_it_once(
    lake_config: LakeConfig, tmp_path: Path
) -> None:
    """What pyiceberg's retry did before: `iceberg status` counts it, `iceberg sync` mends it."""
    lake = open_lake(with_tables(lake_config, tmp_path))
    log = lake.create_topic("clicks", 1, {"cleanup.policy": "delete"}).partition(0)
    log.append(keyed({"a": "1", "b": "2"}), now_ms=1000)
    catalog = load_catalog(CATALOG_NAME, **catalog_properties(lake.config, lake.store.root_uri))
    table = catalog.load_table(("lakecleaner", "clicks"))
    (task,) = table.scan().plan_files()
    with table.transaction() as transaction, transaction.update_snapshot().fast_append() as append:
        append.append_data_file(task.file)
    status = table_status(lake, "clicks")
    assert (status.duplicate, status.in_step) == (1, False)
    assert status.to_dict()["duplicate_files"] == 1
    sync_topic(lake, "clicks")
    assert (table_status(lake, "clicks").duplicate, table_status(lake, "clicks").in_step) == (0, True)
    assert_table_is_the_log(lake, "clicks")


def test_a_sync_that_runs_late_never_moves_the_tables_back(lake_config: LakeConfig, tmp_path: Path) -> None:
    """A sync handed an older manifest than the one the tables reflect (its process stalled after
    its commit) leaves both tables as they are: the files it would bring back may be gone."""
    lake = open_lake(with_tables(lake_config, tmp_path))
    topic = lake.create_topic("prices", 1, {"cleanup.policy": "compact"})
    log = topic.partition(0)
    log.append(keyed({"a": "1", "b": "2"}), now_ms=1000)
    older = log.manifest()
    log.append(keyed({"a": "3", "c": "4"}, 2000), now_ms=2000)
    sync_tables(lake.topic("prices"), {0: older})
    assert_table_is_the_log(lake, "prices")


def test_a_reader_keeps_the_snapshot_it_loaded_for_the_delay_after_it_was_replaced(
    lake_config: LakeConfig, tmp_path: Path
) -> None:
    """Snapshots expire by when they stopped being current, not by when they were taken: a
    snapshot older than the delay that a reader just loaded still reads, with every file it
    reaches, after a commit replaced it and gc ran; it goes once the delay has passed."""
    delay_ms = 2000
    lake = open_lake(with_tables(lake_config, tmp_path))
    log = lake.create_topic("prices", 1, {"cleanup.policy": "compact", "file.delete.delay.ms": delay_ms}).partition(0)
    log.append(keyed({"a": "1", "b": "2"}), now_ms=wall_clock_ms())
    time.sleep(delay_ms / 1000 + 0.5)  # the snapshots the reader loads were taken longer than the delay ago
    catalog = load_catalog(CATALOG_NAME, **catalog_properties(lake.config, lake.store.root_uri))
    log_reader = catalog.load_table(("lakecleaner", "prices"))
    latest_reader = catalog.load_table(("lakecleaner", "prices_latest"))
    loaded = (log_reader.current_snapshot().snapshot_id, latest_reader.current_snapshot().snapshot_id)

    log.append(keyed({"a": "3"}, 3000), now_ms=wall_clock_ms())  # replaces both current snapshots
    gc_topic(lake, "prices", wall_clock_ms())
    assert sorted(log_reader.scan().to_arrow().column("value").to_pylist()) == [b"1", b"2"]
    assert sorted(latest_reader.scan().to_arrow().column("value").to_pylist()) == [b"1", b"2"]

    time.sleep(delay_ms / 1000 + 0.5)
    gc_topic(lake, "prices", wall_clock_ms())
    kept = (
        {s.snapshot_id for s in catalog.load_table(("lakecleaner", "prices")).snapshots()},
        {s.snapshot_id for s in catalog.load_table(("lakecleaner", "prices_latest")).snapshots()},
    )
    assert loaded[0] not in kept[0] and loaded[1] not in kept[1]
    assert_table_is_the_log(lake, "prices")


def test_gc_leaves_the_files_of_a_sync_in_flight(lake_config: LakeConfig, tmp_path: Path) -> None:
    """A sync holds a lease on the table's folder while it writes files no metadata reaches yet,
    as a compaction holds one on its partitions: gc leaves them however long the sync takes."""
    delay_ms = 500
    lake = open_lake(with_tables(lake_config, tmp_path))
    log = lake.create_topic("prices", 1, {"cleanup.policy": "compact", "file.delete.delay.ms": delay_ms}).partition(0)
    log.append(keyed({"a": "1"}), now_ms=wall_clock_ms())
    in_flight = table_folder("prices", LATEST_TABLE) + "data/partition=0/written-by-a-sync-in-flight.parquet"
    lake.store.write(in_flight, b"PAR1")
    time.sleep(delay_ms / 1000 + 1.0)
    with sync_leases(lake, "prices", [LATEST_TABLE]):
        gc_topic(lake, "prices", wall_clock_ms())
        assert lake.store.exists(in_flight)
    gc_topic(lake, "prices", wall_clock_ms())
    assert not lake.store.exists(in_flight)


def _lake_file(tmp_path: Path, catalog: dict[str, str] | None = None) -> Path:
    """A config file of two topics kept as tables on a local lake (its catalog: `catalog`)."""
    tables: dict[str, object] = {"enabled": True}
    if catalog is not None:
        tables["catalog"] = catalog
    config = tmp_path / "lakecleaner.yaml"
    topics = {"clicks": {"partitions": 1}, "views": {"partitions": 1}}
    config.write_text(
        yaml.safe_dump({"lake": {"uri": f"file://{tmp_path / 'lake'}"}, "iceberg": tables, "topics": topics})
    )
    return config


def test_a_damaged_table_is_one_line_the_others_go_on_and_rebuild_mends_it(tmp_path: Path) -> None:
    config = _lake_file(tmp_path)

    def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return run_cli("--config", str(config), *args, input=stdin)

    for topic in ("clicks", "views"):
        assert cli("topics", "create", topic).returncode == 0
        assert cli("produce", "--topic", topic, stdin='{"key": "k", "value": "v"}\n').returncode == 0
    lake = open_lake(load_config(config))
    catalog = load_catalog(CATALOG_NAME, **catalog_properties(lake.config, lake.store.root_uri))
    damaged = catalog.load_table(("lakecleaner", "clicks")).metadata_location
    Path(damaged.removeprefix("file://")).write_text("{not json")

    status = cli("iceberg", "status")
    assert status.returncode == 1 and "Traceback" not in status.stdout + status.stderr
    assert "views" in status.stdout and "lakecleaner.clicks cannot be read" in status.stdout
    assert "iceberg sync --topic clicks --rebuild" in status.stdout
    gc = cli("gc", "--topic", "clicks")
    assert gc.returncode == 1 and "Traceback" not in gc.stderr
    assert "no file that left the log was deleted" in gc.stderr and "--rebuild" in gc.stderr
    assert cli("gc", "--topic", "views").returncode == 0

    synced = cli("iceberg", "sync")
    assert synced.returncode == 1 and "clicks: Iceberg table lakecleaner.clicks cannot be read" in synced.stderr
    assert "views" in synced.stdout
    rebuilt = cli("iceberg", "sync", "--topic", "clicks", "--rebuild")
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert cli("iceberg", "status").returncode == 0
    assert_table_is_the_log(open_lake(load_config(config)), "clicks")


def test_a_damaged_catalog_is_one_line_naming_it_without_its_secrets(tmp_path: Path) -> None:
    database = tmp_path / "catalog.db"
    password_uri = f"sqlite:///{database}"
    config = _lake_file(tmp_path, {"type": "sql", "uri": password_uri, "adls.account-key": "SECRET-key-1"})
    assert run_cli("--config", str(config), "topics", "create", "clicks").returncode == 0
    database.write_bytes(b"this is no sqlite database" * 100)
    status = run_cli("--config", str(config), "iceberg", "status")
    assert status.returncode == 1 and "Traceback" not in status.stdout + status.stderr
    assert "Iceberg catalog lakecleaner" in status.stdout and "SECRET-key-1" not in status.stdout + status.stderr


def test_catalog_properties_are_shown_by_allow_list(tmp_path: Path) -> None:
    """Every value not known to be harmless is masked, whatever its name; a URI loses only its
    password, parsed as SQLAlchemy parses it (a password holding `/`)."""
    secrets = {
        "adls.account-key": "SECRET-1",
        "adls.connection-string": "DefaultEndpointsProtocol=https;AccountKey=SECRET-2",
        "header.Authorization": "Bearer SECRET-3",
        "s3.secret-access-key": "SECRET-4",
        "token": "SECRET-5",
    }
    catalog = {
        "type": "sql",
        "uri": f"sqlite:///{tmp_path / 'cat.db'}",
        "s3.endpoint": "http://127.0.0.1:9000",
        **secrets,
    }
    config = _lake_file(tmp_path, catalog)
    assert run_cli("--config", str(config), "topics", "create", "clicks").returncode == 0
    assert run_cli("--config", str(config), "iceberg", "sync").returncode == 0  # makes the empty tables
    for args in (("iceberg", "status"), ("--json", "iceberg", "status")):
        done = run_cli("--config", str(config), *args)
        assert done.returncode == 0, done.stderr
        assert not any(f"SECRET-{i}" in done.stdout + done.stderr for i in range(1, 6)), done.stdout
    shown_catalog = json.loads(run_cli("--config", str(config), "--json", "iceberg", "status").stdout)["topics"][0]
    assert shown_catalog["catalog"]["s3.endpoint"] == "http://127.0.0.1:9000"
    assert all(shown_catalog["catalog"][key] == "***" for key in secrets)
    assert shown({"uri": "postgresql+psycopg2://lake:pa/ss@db:5432/iceberg"})["uri"] == (
        "postgresql+psycopg2://lake:***@db:5432/iceberg"
    )
    assert shown({"uri": "not a url at all"})["uri"] == "***"
    lake = open_lake(load_config(config))
    assert not any(f"SECRET-{i}" in line for line in iceberg_lines(lake) for i in range(1, 6))


def test_two_lakes_on_one_catalog_never_touch_each_others_tables(lake_config: LakeConfig, tmp_path: Path) -> None:
    """Lake B, on the catalog and namespace lake A keeps its tables in, is refused in one line
    when it would sync, expire or drop A's table of the same topic name; A's table stays A's."""
    catalog = {"type": "sql", "uri": f"sqlite:///{tmp_path / 'shared.db'}"}
    a_config = dataclasses.replace(with_tables(lake_config, tmp_path), iceberg=IcebergSettings(True, "shared", catalog))
    b_root = lake_config.lake_uri.rstrip("/") + "-b"
    a = open_lake(a_config)
    b = open_lake(dataclasses.replace(a_config, lake_uri=b_root))
    a.create_topic("orders", 1, {"cleanup.policy": "delete"}).partition(0).append(keyed({"a": "from lake A"}), now_ms=1)
    b_log = b.create_topic("orders", 1, {"cleanup.policy": "delete"}).partition(0)
    b_log.append(keyed({"b": "from lake B"}), now_ms=1)  # its follower is refused: logged, the commit stands
    assert b_log.read().column("value").to_pylist() == [b"from lake B"]
    for attempt in (lambda: sync_topic(b, "orders"), lambda: rebuild_tables(b.topic("orders"))):
        with pytest.raises(TableOfAnotherLake, match=r"belongs to another lake .*\(iceberg\.namespace\)"):
            attempt()
    gc = gc_topic(b, "orders", wall_clock_ms())
    assert gc.blocked is not None and "belongs to another lake" in gc.blocked
    reader = load_catalog(CATALOG_NAME, **catalog_properties(a.config, a.store.root_uri))
    rows = reader.load_table(("shared", "orders")).scan().to_arrow()
    assert rows.column("value").to_pylist() == [b"from lake A"]
    assert_table_is_the_log(a, "orders")


def test_two_topics_whose_tables_would_share_a_name_are_refused_by_the_config() -> None:
    raw = {
        "lake": {"uri": "file:///tmp/never-opened"},
        "iceberg": {"enabled": True},
        "topics": {"orders.v1": {}, "orders_v1": {}, "Orders-V1": {"iceberg": {"enabled": False}}, "other": {}},
    }
    with pytest.raises(ConfigError) as refused:
        parse_config(raw, "lakecleaner.yaml")
    (problem,) = refused.value.problems
    assert "topics orders.v1 and orders_v1 are both kept as Iceberg table orders_v1" in problem
    raw["topics"]["orders_v1"] = {"iceberg": {"enabled": False}}
    assert parse_config(raw, "lakecleaner.yaml").iceberg_enabled("orders.v1")


def test_tables_turned_off_are_still_audited_and_gc_empties_their_folders(
    lake_config: LakeConfig, tmp_path: Path
) -> None:
    """Erasure covers every table folder, whatever the config says now: after a topic's tables
    are turned off, `audit key` still finds the latest values' copy of the key, and the first gc
    after file.delete.delay.ms drops the tables and leaves nothing in their folders."""
    delay_ms = 1000
    config = with_tables(lake_config, tmp_path)
    lake = open_lake(config)
    config_overrides = {"cleanup.policy": "compact", "file.delete.delay.ms": delay_ms}
    lake.create_topic("users", 1, config_overrides).partition(0).append(keyed({"gdpr": "secret"}), now_ms=1000)
    off = open_lake(dataclasses.replace(config, iceberg=dataclasses.replace(config.iceberg, enabled=False)))
    copies = audit_key(off, "users", b"gdpr", wall_clock_ms()).copies
    in_tables = [c for c in copies if c.object.startswith(("topics/users/latest/", "topics/users/metadata/"))]
    assert in_tables and all(c.deadline is not None for c in in_tables), copies
    time.sleep(delay_ms / 1000 + 0.5)
    report = gc_topic(off, "users", wall_clock_ms())
    assert report.blocked is None
    assert not [o.key for f in ("metadata/", "data/", "latest/") for o in off.store.list("topics/users/" + f)]
    catalog = load_catalog(CATALOG_NAME, **catalog_properties(config, lake.store.root_uri))
    assert ("lakecleaner", "users") not in catalog.list_tables("lakecleaner")
    left = audit_key(off, "users", b"gdpr", wall_clock_ms()).copies
    assert not [c for c in left if c.partition is None], left


def test_after_a_trim_a_sync_removes_every_file_wholly_below_the_log_start(
    lake_config: LakeConfig, tmp_path: Path
) -> None:
    lake = open_lake(with_tables(lake_config, tmp_path))
    log = lake.create_topic("clicks", 1, {"cleanup.policy": "delete"}).partition(0)
    for batch in range(3):
        log.append(keyed({f"k{batch}-{i}": "v" for i in range(4)}, 1000 + batch), now_ms=1000 + batch)
    trim_partition(lake, "clicks", 0, 8)  # the first two files lie wholly below it
    status = table_status(lake, "clicks")
    assert status.in_step and status.extra == 0
    assert_table_is_the_log(lake, "clicks")
    catalog = load_catalog(CATALOG_NAME, **catalog_properties(lake.config, lake.store.root_uri))
    (task,) = catalog.load_table(("lakecleaner", "clicks")).scan().plan_files()
    assert task.file.record_count == 4
