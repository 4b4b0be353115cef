"""One Iceberg snapshot that adds data files and position-delete files and removes files (issue 80):
Iceberg's RowDelta (Java `BaseRowDelta`), which pyiceberg 0.12 does not offer. Its snapshot
producers write every manifest as a data manifest (`ManifestWriterV2.content()` is always DATA),
so a delete file could only be committed as if it held rows; this module is the one place that
writes delete manifests.

A delta's snapshot lists: a data manifest of the data files added, a delete manifest (content
`deletes`, Iceberg spec "Manifests") of the delete files added, the parent's manifests that hold no
removed file as they are, and those that do rewritten with the removed files' entries marked
DELETED and the others EXISTING (each in a manifest of its own content). Data manifests merge as
a merge append's do (`commit.manifest-merge.enabled`, `commit.manifest.min-count-to-merge`);
delete manifests are left as they are (table maintenance, `iceberg.maintenance`, folds a
partition's delete files into its data). The snapshot's operation is `append` when it only adds
data files, else `overwrite` (pyiceberg's summaries know no `replace`).

pyiceberg's concurrency validation is skipped: lakecleaner's syncs run with pyiceberg's retries
off and redo a lost race from the table read again (`iceberg.sync`). The producer builds on
pyiceberg 0.12's private `_SnapshotProducer` (the `iceberg` extra pins `<0.13`); a pyiceberg with
row-level deletes (a public `RowDelta` or delete-file writes) would replace this module.
"""

from __future__ import annotations

from collections.abc import Iterable

from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    ManifestWriter,
    ManifestWriterV2,
)
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.table import TableProperties, Transaction
from pyiceberg.table.snapshots import Operation, SnapshotSummaryCollector, Summary, update_snapshot_summaries
from pyiceberg.table.update.snapshot import _ManifestMergeManager, _SnapshotProducer
from pyiceberg.typedef import EMPTY_DICT
from pyiceberg.utils.properties import property_as_bool, property_as_int

from lakecleaner.iceberg.entries import of_partitions
from lakecleaner.iceberg.manifest_entries import manifest_entries


class _DeleteManifestWriter(ManifestWriterV2):
    """A v2 manifest of delete files: content `deletes` in the manifest list and in the file's
    own metadata (pyiceberg's writer says `data` in both)."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


class RowDelta(_SnapshotProducer["RowDelta"]):
    """Data files and position-delete files added, files of the parent snapshot removed, in one
    snapshot (the module's docstring). Used as pyiceberg's producers are: `with RowDelta(tx) as
    delta:` stages the snapshot in the transaction on exit."""

    def __init__(self, transaction: Transaction) -> None:
        if transaction.table_metadata.format_version != 2:
            raise ValueError("row deltas are written to Iceberg v2 tables")
        super().__init__(Operation.APPEND, transaction, transaction._table.io)
        self._added_deletes: list[DataFile] = []
        self._removed: dict[str, DataFile] = {}

    def add(self, file: DataFile) -> RowDelta:
        """A data file or a position-delete file the snapshot adds, by its content."""
        if file.content == DataFileContent.POSITION_DELETES:
            return self.add_deletes(file)
        self.append_data_file(file)
        return self

    def add_deletes(self, delete_file: DataFile) -> RowDelta:
        """A position-delete file (`iceberg.position_deletes`) the snapshot adds."""
        if delete_file.content != DataFileContent.POSITION_DELETES:
            raise ValueError(f"{delete_file.file_path} is not a position-delete file")
        self._added_deletes.append(delete_file)
        self._operation = Operation.OVERWRITE
        return self

    def remove(self, files: Iterable[DataFile]) -> RowDelta:
        """Data or delete files of the parent snapshot the snapshot removes."""
        for file in files:
            self._removed[file.file_path] = file
            self.delete_by_predicate(of_partitions([file.partition[0]]))
            self._operation = Operation.OVERWRITE
        return self

    def fetch_manifest_entry(self, manifest: ManifestFile, discard_deleted: bool = True) -> list[ManifestEntry]:
        """The manifest's entries (what the merge of data manifests reads), read once per process."""
        return manifest_entries(self._io, manifest, discard_deleted)

    def _validate_concurrency(self) -> None:
        """None: a lost race is redone by the caller from the table read again (module docstring)."""

    def _deleted_entries(self) -> list[ManifestEntry]:
        """None apart: removed files are marked DELETED in their own manifest's rewrite."""
        return []

    def _manifests(self) -> list[ManifestFile]:
        spec = self._transaction.table_metadata.spec()
        added = [
            *self._written(ManifestContent.DATA, spec, self._added_data_files),
            *self._written(ManifestContent.DELETES, spec, self._added_deletes),
        ]
        manifests = added + self._existing_manifests()
        data = [m for m in manifests if m.content == ManifestContent.DATA]
        deletes = [m for m in manifests if m.content == ManifestContent.DELETES]
        return self._merged(data) + deletes

    def _written(self, content: ManifestContent, spec: PartitionSpec, files: list[DataFile]) -> list[ManifestFile]:
        """A manifest of `files` added by this snapshot ([] when none)."""
        if not files:
            return []
        with self._manifest_writer(content, spec) as writer:
            for file in files:
                writer.add_entry(
                    ManifestEntry.from_args(
                        status=ManifestEntryStatus.ADDED, snapshot_id=self._snapshot_id, data_file=file
                    )
                )
        return [writer.to_manifest_file()]

    def _manifest_writer(self, content: ManifestContent, spec: PartitionSpec) -> ManifestWriter:
        if content == ManifestContent.DATA:
            return self.new_manifest_writer(spec)
        output = self.new_manifest_output()
        return _DeleteManifestWriter(spec, self.schema(), output, self._snapshot_id, self._compression)

    def _existing_manifests(self) -> list[ManifestFile]:
        """The parent's manifests that still hold a live file: as they are, or rewritten without
        the removed files (their entries DELETED) when they held one."""
        parent = self._transaction.table_metadata.snapshot_by_name(self._target_branch)
        if parent is None:
            return []
        out = []
        for manifest in parent.manifests(io=self._io):
            if not (manifest.has_added_files() or manifest.has_existing_files()):
                continue
            if self._removed and self._build_manifest_evaluator(manifest.partition_spec_id)(manifest):
                out += self._without_removed(manifest)
            else:
                out.append(manifest)
        return out

    def _without_removed(self, manifest: ManifestFile) -> list[ManifestFile]:
        entries = manifest_entries(self._io, manifest)
        gone = [e for e in entries if e.data_file.file_path in self._removed]
        if not gone:
            return [manifest]
        with self._manifest_writer(manifest.content, self.spec(manifest.partition_spec_id)) as writer:
            for entry in entries:
                if entry.data_file.file_path in self._removed:
                    writer.delete(entry)
                else:
                    writer.existing(entry)
        return [writer.to_manifest_file()]

    def _merged(self, data: list[ManifestFile]) -> list[ManifestFile]:
        """Data manifests merged as a merge append merges them (the table's merge properties)."""
        properties, keys = self._transaction.table_metadata.properties, TableProperties
        size = property_as_int(properties, keys.MANIFEST_TARGET_SIZE_BYTES, keys.MANIFEST_TARGET_SIZE_BYTES_DEFAULT)
        count = property_as_int(properties, keys.MANIFEST_MIN_MERGE_COUNT, keys.MANIFEST_MIN_MERGE_COUNT_DEFAULT)
        enabled = property_as_bool(properties, keys.MANIFEST_MERGE_ENABLED, keys.MANIFEST_MERGE_ENABLED_DEFAULT)
        return _ManifestMergeManager(
            target_size_bytes=size or keys.MANIFEST_TARGET_SIZE_BYTES_DEFAULT,
            min_count_to_merge=count or keys.MANIFEST_MIN_MERGE_COUNT_DEFAULT,
            merge_enabled=enabled,
            snapshot_producer=self,
        ).merge_manifests(data)

    def _summary(self, snapshot_properties: dict[str, str] = EMPTY_DICT) -> Summary:
        metadata = self._transaction.table_metadata
        schema, specs = metadata.schema(), metadata.specs()
        limit = property_as_int(
            metadata.properties,
            TableProperties.WRITE_PARTITION_SUMMARY_LIMIT,
            TableProperties.WRITE_PARTITION_SUMMARY_LIMIT_DEFAULT,
        )
        collector = SnapshotSummaryCollector(partition_summary_limit=limit or 0)
        for file in [*self._added_data_files, *self._added_deletes]:
            collector.add_file(file, schema, metadata.spec())  # added files are of the default spec
        for file in self._removed.values():
            collector.remove_file(file, schema, specs[file.spec_id])
        parent = metadata.snapshot_by_id(self._parent_snapshot_id) if self._parent_snapshot_id is not None else None
        return update_snapshot_summaries(
            Summary(operation=self._operation, **collector.build(), **snapshot_properties),
            parent.summary if parent is not None else None,
        )


__all__ = ["RowDelta"]
