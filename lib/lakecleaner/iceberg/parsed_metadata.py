"""A commit whose cost does not grow with the snapshots kept for readers (issue 80).

A table's metadata holds every snapshot kept for readers (`iceberg.snapshots`: one delay's worth,
hundreds at a commit every few tenths of a second), and pyiceberg 0.12 works through all of it
several times a commit: a SQL catalog parses the metadata file on every load (a sync loads a table,
and the catalog's commit loads it again), and staging a commit deep-copies the updated metadata
whole (`update_table_metadata`) before comparing it with the loaded one field by field. Metadata
files are immutable (each commit writes a new one), so a catalog opened here (`catalog.open_catalog`)
keeps the metadata it parsed or wrote, by location (the last `KEPT`), and loads a table whose
location it kept without reading the file; and it stages a commit by applying the updates to the
frozen metadata as pyiceberg does (each a shallow `model_copy`), without the deep copy. Both lean
on pyiceberg 0.12's private catalog methods (the `iceberg` extra pins `<0.13`), are made on the
catalog object only, and apply to SQL catalogs (the embedded one); a REST catalog stages commits on
its server and is left as it is.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import StagedTable, Table
from pyiceberg.table.locations import load_location_provider
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.update import (
    TableRequirement,
    TableUpdate,
    _apply_table_update,
    _TableMetadataUpdateContext,
    _update_table_metadata_log,
)
from pyiceberg.typedef import Identifier
from pyiceberg.utils.datetime import datetime_to_millis

from lakecleaner.io.kept import Kept

#: How many parsed metadata files a catalog keeps (the latest of each table it commits to).
KEPT = 32


def keep_parsed_metadata(catalog: Any) -> Any:
    """The catalog, a SQL one made to keep the metadata it parses and writes and to stage commits
    without copying the metadata whole (the module's docstring); another as it is."""
    if not isinstance(catalog, SqlCatalog):
        return catalog
    kept: Kept[str, TableMetadata] = Kept(KEPT)
    write, convert = catalog._write_metadata, catalog._convert_orm_to_iceberg

    def written(metadata: TableMetadata, io: Any, metadata_path: str) -> None:
        write(metadata, io, metadata_path)
        kept.put(metadata_path, metadata)

    def loaded(orm_table: Any) -> Table:
        metadata = kept.get(orm_table.metadata_location or "")
        if metadata is None or not orm_table.table_namespace or not orm_table.table_name:
            table = convert(orm_table)
            kept.put(table.metadata_location, table.metadata)
            return table
        location = orm_table.metadata_location
        return Table(
            identifier=(*Catalog.identifier_to_tuple(orm_table.table_namespace), orm_table.table_name),
            metadata=metadata,
            metadata_location=location,
            io=catalog._load_file_io(metadata.properties, location),
            catalog=catalog,
        )

    stage = catalog._update_and_stage_table

    def staged(
        current: Table | None,
        identifier: Identifier,
        requirements: tuple[TableRequirement, ...],
        updates: tuple[TableUpdate, ...],
    ) -> StagedTable:
        if current is None:  # a table made: pyiceberg validates its first metadata whole
            return stage(current, identifier, requirements, updates)
        for requirement in requirements:
            requirement.validate(current.metadata)
        metadata = _updated(current.metadata, updates, current.metadata_location)
        version = catalog._parse_metadata_version(current.metadata_location) + 1
        location = load_location_provider(metadata.location, metadata.properties).new_table_metadata_file_location(
            version
        )
        return StagedTable(
            identifier=identifier,
            metadata=metadata,
            metadata_location=location,
            io=catalog._load_file_io(properties=metadata.properties, location=location),
            catalog=catalog,
        )

    instance: Any = catalog  # the methods are replaced on this object only
    instance._write_metadata = written
    instance._convert_orm_to_iceberg = loaded
    instance._update_and_stage_table = staged
    return catalog


def _updated(base: TableMetadata, updates: tuple[TableUpdate, ...], base_location: str) -> TableMetadata:
    """`base` with `updates` applied as pyiceberg 0.12's `update_table_metadata` applies them to a
    table's metadata (the previous file in the metadata log, `last-updated-ms` moved, the spec and
    sort order checked against the schema), the result not deep-copied: the models are frozen."""
    context = _TableMetadataUpdateContext()
    metadata = base
    for update in updates:
        metadata = _apply_table_update(update, metadata, context)
    if context.has_changes():
        metadata = _update_table_metadata_log(metadata, base_location, base.last_updated_ms)
        if base.last_updated_ms == metadata.last_updated_ms:
            now = datetime_to_millis(datetime.now().astimezone())
            metadata = metadata.model_copy(update={"last_updated_ms": now})
    metadata.spec().check_compatible(metadata.schema())
    metadata.sort_order().check_compatible(metadata.schema())
    return metadata


__all__ = ["KEPT", "keep_parsed_metadata"]
