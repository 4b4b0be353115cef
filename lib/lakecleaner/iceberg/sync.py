"""Keep a topic's Iceberg table in step with its committed manifests (issue 48).

The manifests are the source of truth; the table follows them. A sync of some partitions reads
the data files the table's current snapshot holds for them, compares them with the segment files
their manifests hold, and commits one snapshot that removes what left the log and adds what
entered it (an append when nothing left). Run after each manifest commit (`follow_commit`), by
`lakecleaner iceberg sync` and by each DAG run, it is idempotent: a table that missed commits (a
crash between the manifest's commit and the table's) is caught up by the next one. The table
never leads the log: it only ever takes files a committed manifest holds.

A snapshot registers the segment files where they are, with the Kafka partition as the file's
partition value and offset bounds from the manifest; no statistics of keys, values or headers.
The one exception is a file a trim cut, whose records from the log start on the table holds as
a copy (`iceberg.trimmed`).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyiceberg.conversions import to_bytes
from pyiceberg.exceptions import (
    CommitFailedException,
    NamespaceAlreadyExistsError,
    NoSuchTableError,
    ValidationException,
)
from pyiceberg.expressions import In
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.typedef import Record
from pyiceberg.types import LongType

from lakecleaner.errors import LakeCleanerError
from lakecleaner.iceberg.catalog import open_catalog
from lakecleaner.iceberg.naming import TOPIC_PROPERTY, table_identifier
from lakecleaner.iceberg.schema import LATEST_TABLE, LOG_TABLE, OFFSET_ID, TableKind
from lakecleaner.iceberg.trimmed import TrimmedCopy, is_cut, write_copy
from lakecleaner.log.layout import partition_prefix, topic_prefix
from lakecleaner.log.manifest import Manifest, SegmentFile

if TYPE_CHECKING:
    from lakecleaner.lake import Lake

log = logging.getLogger(__name__)

#: Commits of the table that another writer's commit beat, retried from the table read again.
COMMIT_ATTEMPTS = 8


@dataclass(frozen=True)
class SyncResult:
    """One sync of a topic's table: the files it added and removed, and the snapshot it made
    (None when the table already matched)."""

    topic: str
    table: str
    added: int
    removed: int
    snapshot_id: int | None


def log_table(lake: Lake, topic: str) -> Any:
    """The topic's log table, created (with its namespace) on first use at the topic's prefix."""
    return open_table(lake, topic, LOG_TABLE)


def open_table(lake: Lake, topic: str, kind: TableKind) -> Any:
    """The topic's table of `kind`, created (with its namespace) on first use at its location."""
    catalog = open_catalog(lake.config, lake.store.root_uri)
    identifier = table_identifier(lake.config.iceberg.namespace, topic, kind.suffix)
    try:
        table = catalog.load_table(identifier)
    except NoSuchTableError:
        with contextlib.suppress(NamespaceAlreadyExistsError):
            catalog.create_namespace(identifier[:-1])
        table = catalog.create_table_if_not_exists(
            identifier,
            kind.schema,
            location=lake.store.location(topic_prefix(topic) + kind.folder).rstrip("/"),
            partition_spec=kind.spec,
            properties={**kind.properties, TOPIC_PROPERTY: topic},
        )
    follows = table.properties.get(TOPIC_PROPERTY)
    if follows != topic:
        raise LakeCleanerError(
            f"Iceberg table {'.'.join(identifier)} follows topic {follows}, not {topic}: the two topics map to "
            "one table name (docs/architecture.md, Tables out); turn Iceberg off for one (iceberg: {enabled: false})"
        )
    return table


def drop_tables(lake: Lake, topic: str) -> None:
    """Forget the topic's tables in the catalog (its files are the caller's to delete): what a
    topic deleted and created again under the same name needs, or the catalog would point at
    metadata that is gone."""
    catalog = open_catalog(lake.config, lake.store.root_uri)
    for kind in (LOG_TABLE, LATEST_TABLE):
        with contextlib.suppress(NoSuchTableError):
            catalog.drop_table(table_identifier(lake.config.iceberg.namespace, topic, kind.suffix))


def data_files(lake: Lake, topic: str, partition: int, manifest: Manifest) -> dict[str, DataFile | TrimmedCopy]:
    """The segment files of a committed manifest as the table holds them, by location: each as
    an Iceberg data file, registered in place, but a file the log start cuts (a trim inside it)
    as the copy of its records from the log start on (`iceberg.trimmed`), which a sync writes."""
    prefix = partition_prefix(topic, partition)
    out: dict[str, DataFile | TrimmedCopy] = {}
    for segment in manifest.segments:
        for file in segment.files:
            if is_cut(file, manifest.log_start_offset):
                copy = TrimmedCopy(topic, partition, file, manifest.log_start_offset)
                out[lake.store.location(copy.key)] = copy
            else:
                path = lake.store.location(prefix + file.path)
                out[path] = data_file(path, partition, file)
    return out


def data_file(location: str, partition: int, file: SegmentFile) -> DataFile:
    """A segment file at `location` as an Iceberg data file of the Kafka partition, with offset
    bounds only (no statistics of keys, values or headers)."""
    bounds = file.record_count > 0
    return DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=location,
        file_format=FileFormat.PARQUET,
        partition=Record(partition),
        record_count=file.record_count,
        file_size_in_bytes=file.size_bytes,
        lower_bounds={OFFSET_ID: to_bytes(LongType(), file.base_offset)} if bounds else {},
        upper_bounds={OFFSET_ID: to_bytes(LongType(), file.next_offset - 1)} if bounds else {},
    )


def _written(lake: Lake, planned: DataFile | TrimmedCopy) -> DataFile:
    """A planned file of the table as a data file, its trimmed copy written first."""
    if isinstance(planned, DataFile):
        return planned
    copy = write_copy(lake.store, planned)
    return data_file(lake.store.location(copy.path), planned.partition, copy)


def of_partitions(partitions: Iterable[int]) -> Any:
    """The row filter of the Kafka partitions `partitions`."""
    # In's __new__ takes (term, literals); mypy reads its pydantic fields instead
    return In("partition", set(partitions))  # type: ignore[call-arg, arg-type]


def table_files(table: Any, partitions: Iterable[int]) -> dict[str, DataFile]:
    """The data files the table's current snapshot holds for `partitions`, by path."""
    if table.current_snapshot() is None:
        return {}
    tasks = table.scan(row_filter=of_partitions(partitions)).plan_files()
    return {task.file.file_path: task.file for task in tasks}


def sync_partitions(lake: Lake, topic: str, manifests: Mapping[int, Manifest]) -> SyncResult:
    """Make the table's files of these partitions the manifests' segment files, in one snapshot
    (none when they already are); a commit another writer beat is redone from the table read
    again."""
    wanted: dict[str, DataFile | TrimmedCopy] = {}
    for partition, manifest in manifests.items():
        wanted.update(data_files(lake, topic, partition, manifest))
    return _commit_difference(lake, topic, manifests, wanted)


def _commit_difference(
    lake: Lake, topic: str, manifests: Mapping[int, Manifest], wanted: dict[str, DataFile | TrimmedCopy]
) -> SyncResult:
    for attempt in range(COMMIT_ATTEMPTS):
        table = log_table(lake, topic)
        held = table_files(table, manifests)
        missing = list(wanted.keys() - held.keys())
        added = [_written(lake, wanted[path]) for path in missing]
        wanted.update(zip(missing, added, strict=True))  # a copy is written once, whatever races are lost
        removed = [held[path] for path in held.keys() - wanted.keys()]
        name = ".".join(table.name())
        if not added and not removed:
            return SyncResult(topic, name, 0, 0, None)
        try:
            with table.transaction() as transaction:
                snapshot = transaction.update_snapshot()
                with snapshot.overwrite() if removed else snapshot.fast_append() as update:
                    for file in removed:
                        update.delete_data_file(file)
                    for file in added:
                        update.append_data_file(file)
        except (CommitFailedException, ValidationException):
            log.info("Iceberg table %s: another writer committed first (attempt %d); syncing again", name, attempt + 1)
            time.sleep(0.05 * (attempt + 1))
            continue
        current = table.current_snapshot()  # the commit moved `table` to the metadata it wrote
        return SyncResult(topic, name, len(added), len(removed), current and current.snapshot_id)
    raise LakeCleanerError(
        f"Iceberg table of topic {topic}: lost {COMMIT_ATTEMPTS} commit races in a row; run "
        f"`lakecleaner iceberg sync --topic {topic}` again later"
    )


__all__ = [
    "COMMIT_ATTEMPTS",
    "SyncResult",
    "data_file",
    "data_files",
    "drop_tables",
    "log_table",
    "of_partitions",
    "open_table",
    "sync_partitions",
    "table_files",
]
