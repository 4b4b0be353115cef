"""Issue 80: a manifest's entries are read from storage once per process (manifests are
immutable), and what is handed out is what pyiceberg reads from the file."""

from __future__ import annotations

import os
from copy import copy
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog import load_catalog
from pyiceberg.expressions import EqualTo
from pyiceberg.manifest import ManifestEntry, ManifestEntryStatus, ManifestFile
from pyiceberg.table import Table

from lakecleaner.iceberg.manifest_entries import manifest_entries

ROWS = pa.table({"n": pa.array([1, 2, 3], pa.int64())})


def _table(tmp_path: Path) -> Table:
    (tmp_path / "warehouse").mkdir()
    catalog = load_catalog(
        "t", type="sql", uri=f"sqlite:///{tmp_path / 'cat.db'}", warehouse=f"file://{tmp_path / 'warehouse'}"
    )
    catalog.create_namespace("ns")
    table = catalog.create_table(("ns", "t"), ROWS.schema)
    table.append(ROWS)
    table.append(ROWS)
    table.delete(EqualTo("n", 2))  # rewrites the files: entries marked DELETED in their manifests
    return table


def _manifests(table: Table) -> list[ManifestFile]:
    snapshot = table.current_snapshot()
    assert snapshot is not None
    return snapshot.manifests(table.io)


def _fields(entries: list[ManifestEntry]) -> list[tuple[object, ...]]:
    return [
        (e.status, e.snapshot_id, e.sequence_number, e.file_sequence_number, e.data_file.file_path) for e in entries
    ]


def _path(manifest: ManifestFile) -> Path:
    return Path(manifest.manifest_path.removeprefix("file://"))


@pytest.mark.parametrize("discard_deleted", [True, False])
def test_the_entries_are_those_pyiceberg_reads_from_the_manifest(tmp_path: Path, discard_deleted: bool) -> None:
    table = _table(tmp_path)
    manifests = _manifests(table)
    statuses = set()
    for manifest in manifests:
        ours = manifest_entries(table.io, manifest, discard_deleted)
        again = manifest_entries(table.io, manifest, discard_deleted)
        theirs = manifest.fetch_manifest_entry(table.io, discard_deleted=discard_deleted)
        assert _fields(ours) == _fields(again) == _fields(theirs)
        statuses |= {e.status for e in ours}
    assert (ManifestEntryStatus.DELETED in statuses) is not discard_deleted


def test_a_committed_manifest_is_read_from_storage_once(tmp_path: Path) -> None:
    table = _table(tmp_path)
    manifest = _manifests(table)[0]
    read = _fields(manifest_entries(table.io, manifest))
    os.remove(_path(manifest))
    assert _fields(manifest_entries(table.io, manifest)) == read


def test_a_manifest_of_no_committed_snapshot_is_read_each_time(tmp_path: Path) -> None:
    table = _table(tmp_path)
    staged = copy(_manifests(table)[1])
    staged.sequence_number = -1  # unassigned, as a snapshot producer's own new manifest
    assert staged.sequence_number == -1
    manifest_entries(table.io, staged)
    os.remove(_path(staged))
    with pytest.raises(FileNotFoundError):
        manifest_entries(table.io, staged)
