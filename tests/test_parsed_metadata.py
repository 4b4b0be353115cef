"""Issue 80: a catalog opened by lakecleaner keeps the metadata it parsed or wrote and stages a
commit without copying the metadata whole; what it loads and writes is what pyiceberg's own
catalog would load and write, and another writer's commit is seen."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from pyiceberg.catalog import load_catalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.serializers import FromInputFile

from lakecleaner.iceberg.parsed_metadata import keep_parsed_metadata

ROWS = pa.table({"n": pa.array([1, 2, 3], pa.int64())})


def _catalog(tmp_path: Path, kept: bool) -> SqlCatalog:
    (tmp_path / "warehouse").mkdir(exist_ok=True)
    catalog = load_catalog(
        "t", type="sql", uri=f"sqlite:///{tmp_path / 'cat.db'}", warehouse=f"file://{tmp_path / 'warehouse'}"
    )
    return keep_parsed_metadata(catalog) if kept else catalog


def _parsed(table: object) -> object:
    location = table.metadata_location  # type: ignore[attr-defined]
    return FromInputFile.table_metadata(table.io.new_input(location))  # type: ignore[attr-defined]


def test_what_a_kept_catalog_loads_and_writes_is_the_metadata_file(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path, kept=True)
    catalog.create_namespace("ns")
    table = catalog.create_table(("ns", "t"), ROWS.schema)
    for _ in range(3):
        table.append(ROWS)
        with table.transaction() as tx:
            tx.set_properties({"k": str(len(table.snapshots()))})
    loaded = catalog.load_table(("ns", "t"))
    assert loaded.metadata == _parsed(loaded) == table.metadata
    assert len(loaded.metadata.snapshots) == 3 and len(loaded.metadata.metadata_log) == 6
    assert loaded.scan().to_arrow().num_rows == 9


def test_a_kept_catalog_stages_what_pyicebergs_own_staging_does(tmp_path: Path) -> None:
    kept = _catalog(tmp_path, kept=True)
    kept.create_namespace("ns")
    table = kept.create_table(("ns", "t"), ROWS.schema)
    table.append(ROWS)
    plain = _catalog(tmp_path, kept=False)
    base = plain.load_table(("ns", "t"))
    with base.transaction() as tx:  # staged by pyiceberg, not committed: compare, then drop
        tx.set_properties({"a": "1"})
        tx.append(ROWS)
        updates, requirements = tx._updates, tx._requirements
        ours = kept._update_and_stage_table(base, ("ns", "t"), requirements, updates)
        theirs = plain._update_and_stage_table(base, ("ns", "t"), requirements, updates)
        tx._updates = ()
    assert ours.metadata_location.rsplit("/", 1)[0] == theirs.metadata_location.rsplit("/", 1)[0]
    fields = {"last_updated_ms"}
    assert ours.metadata.model_dump(exclude=fields) == theirs.metadata.model_dump(exclude=fields)


def test_another_writers_commit_is_seen(tmp_path: Path) -> None:
    ours, theirs = _catalog(tmp_path, kept=True), _catalog(tmp_path, kept=True)
    ours.create_namespace("ns")
    ours.create_table(("ns", "t"), ROWS.schema).append(ROWS)
    theirs.load_table(("ns", "t")).append(ROWS)  # another process's catalog
    loaded = ours.load_table(("ns", "t"))
    assert len(loaded.snapshots()) == 2 and loaded.metadata == _parsed(loaded)
