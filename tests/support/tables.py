"""A topic's Iceberg tables as readers see them, against what `consume` reads: the tests' lake
with every topic kept as tables, each table's rows by pyiceberg and by DuckDB's Iceberg extension,
the log's rows and each key's latest live record."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from pyiceberg.catalog import load_catalog
from pyiceberg.expressions import EqualTo

from lakecleaner.config import LakeConfig
from lakecleaner.config.iceberg import IcebergSettings
from lakecleaner.iceberg.catalog import CATALOG_NAME, catalog_properties
from lakecleaner.iceberg.naming import table_name
from lakecleaner.iceberg.table_status import table_status
from lakecleaner.lake import Lake
from tests.engine.reference_model import beats
from tests.support.duckdb_reader import duckdb_rows

COLUMNS = ["offset", "timestamp", "key", "value", "headers", "delete_horizon_ms"]
LATEST_COLUMNS = ["key", "offset", "timestamp", "value", "headers"]


def with_tables(config: LakeConfig, tmp_path: Path) -> LakeConfig:
    """The lake with every topic an Iceberg table: the embedded catalog on a file:// lake, a SQL
    catalog on a SQLite file for an s3:// one."""
    catalog = {} if config.lake_uri.startswith("file://") else {"type": "sql", "uri": f"sqlite:///{tmp_path}/cat.db"}
    return dataclasses.replace(config, iceberg=IcebergSettings(True, "lakecleaner", catalog))


def table_rows(lake: Lake, topic: str, partition: int) -> list[dict[str, Any]]:
    """What pyiceberg reads of the topic's table for one partition, in offset order."""
    catalog = load_catalog(CATALOG_NAME, **catalog_properties(lake.config, lake.store.root_uri))
    table = catalog.load_table((lake.config.iceberg.namespace, table_name(topic)))
    read = table.scan(row_filter=EqualTo("partition", partition)).to_arrow()
    assert set(read.column("partition").to_pylist()) <= {partition}
    return read.select(COLUMNS).sort_by("offset").to_pylist()


def log_rows(lake: Lake, topic: str, partition: int) -> list[dict[str, Any]]:
    return lake.topic(topic).partition(partition).read().select(COLUMNS).to_pylist()


def latest_rows(lake: Lake, topic: str) -> list[dict[str, Any]]:
    """What pyiceberg reads of the topic's latest-values table, by partition and key."""
    catalog = load_catalog(CATALOG_NAME, **catalog_properties(lake.config, lake.store.root_uri))
    read = catalog.load_table((lake.config.iceberg.namespace, table_name(topic) + "_latest")).scan().to_arrow()
    return sorted(read.select(["partition", *LATEST_COLUMNS]).to_pylist(), key=lambda r: (r["partition"], r["key"]))


def latest_of_the_log(lake: Lake, topic: str) -> list[dict[str, Any]]:
    """Each partition's live keys with their winning record (the reference model's KIP-280 rule;
    a tombstone: no row), computed from what `consume` reads."""
    out = []
    config = lake.topic(topic).config
    for p in range(lake.topic(topic).partitions):
        last: dict[bytes, dict[str, Any]] = {}
        for row in log_rows(lake, topic, p):
            if row["key"] not in last or beats(row, last[row["key"]], config):
                last[row["key"]] = row
        out += [{"partition": p, **{c: r[c] for c in LATEST_COLUMNS}} for r in last.values() if r["value"] is not None]
    return sorted(out, key=lambda r: (r["partition"], r["key"]))


def assert_table_is_the_log(lake: Lake, topic: str) -> None:
    """Both readers, pyiceberg and DuckDB's Iceberg extension, read exactly what `consume` reads
    from the log table, and each partition's latest live record per key from the latest values;
    and `iceberg status` finds the tables in step."""
    catalog = load_catalog(CATALOG_NAME, **catalog_properties(lake.config, lake.store.root_uri))
    partitions = range(lake.topic(topic).partitions)
    for p in partitions:
        assert table_rows(lake, topic, p) == log_rows(lake, topic, p), f"partition {p}"
    log_table = catalog.load_table((lake.config.iceberg.namespace, table_name(topic)))
    read = duckdb_rows(lake, log_table.metadata_location, ["partition", *COLUMNS])
    by_duckdb = sorted(read, key=lambda r: (r["partition"], r["offset"]))
    assert by_duckdb == [{"partition": p, **row} for p in partitions for row in log_rows(lake, topic, p)]
    if lake.topic(topic).config.compact:
        latest = latest_of_the_log(lake, topic)
        assert latest_rows(lake, topic) == latest
        latest_table = catalog.load_table((lake.config.iceberg.namespace, table_name(topic) + "_latest"))
        read = duckdb_rows(lake, latest_table.metadata_location, ["partition", *LATEST_COLUMNS])
        assert sorted(read, key=lambda r: (r["partition"], r["key"])) == latest
    assert table_status(lake, topic).in_step
