"""DuckDB's Iceberg extension, the tests' second reader of the lake's tables: an independent C++
reader beside pyiceberg. The extensions come from their wheels on the package registry
(`duckdb-extension-{parquet,avro,iceberg}`, the version of `duckdb`), loaded from the wheels'
files with unsigned extensions allowed and nothing installed or loaded on its own (no network).
An s3:// lake is read through the lake's own pyarrow S3 file system, registered with DuckDB as an
fsspec file system (the httpfs extension is not on the registry)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import duckdb
from fsspec.implementations.arrow import ArrowFSWrapper

from lakecleaner.lake import Lake

#: Avro before Iceberg: the Iceberg extension reads manifests with it.
EXTENSIONS = ("parquet", "avro", "iceberg")


def extension_file(name: str) -> Path:
    """The extension's file in its wheel's package (`duckdb_extension_<name>`)."""
    spec = importlib.util.find_spec(f"duckdb_extension_{name}")
    assert spec is not None and spec.submodule_search_locations, f"duckdb-extension-{name} is not installed"
    return next(Path(spec.submodule_search_locations[0]).rglob(f"{name}.duckdb_extension"))


def connect(lake: Lake) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with the three extensions loaded, reading `lake`'s store."""
    config = {
        "allow_unsigned_extensions": "true",
        "autoinstall_known_extensions": "false",
        "autoload_known_extensions": "false",
    }
    con = duckdb.connect(config=config)
    for name in EXTENSIONS:
        con.execute(f"LOAD '{extension_file(name)}'")
    if lake.store.root_uri.startswith("s3://"):
        con.register_filesystem(ArrowFSWrapper(lake.store.arrow_fs))
    return con


def duckdb_rows(lake: Lake, metadata_location: str, columns: list[str]) -> list[dict[str, Any]]:
    """What DuckDB's `iceberg_scan` reads of the table whose current metadata file is
    `metadata_location`, as rows of `columns`."""
    con = connect(lake)
    try:
        selected = ", ".join(f'"{c}"' for c in columns)
        read = con.execute(f"SELECT {selected} FROM iceberg_scan(?)", [metadata_location]).fetch_arrow_table()
    finally:
        con.close()
    return list(read.to_pylist())
