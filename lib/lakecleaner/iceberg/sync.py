"""Keep a topic's Iceberg table in step with its committed manifests (issue 48).

The manifests are the source of truth; the table follows them. A sync of some partitions reads
the data files the table's current snapshot holds for them, compares them with the segment files
their manifests hold, and commits one snapshot that removes what left the log, adds what entered
it, and takes a file the table holds twice down to once (an append when nothing left). Run after
each manifest commit (`follow_commit`), by `lakecleaner iceberg sync` and by each DAG run, it is
idempotent: a table that missed commits (a crash between the manifest's commit and the table's)
is caught up by the next one. The table never leads the log: it only ever takes files a committed
manifest holds.

Never twice, never backwards. pyiceberg's own commit retries are off (`commit.retry.num-retries`
0): on a lost race it would apply the same files again on top of the winner, which registers a
file both added twice. A lost race is redone here from the table read again, the difference
computed anew. The table records the manifest version it reflects per partition
(`lakecleaner.log.version.<p>`), and a sync of an older manifest (a sync that ran late) leaves
that partition as it is.

A snapshot registers the segment files where they are, with the Kafka partition as the file's
partition value and offset bounds from the manifest; no statistics of keys, values or headers. A
file a trim cut is registered with a position-delete file of its records below the log start
(`iceberg.hidden_rows`); the snapshot is a row delta (`iceberg.row_delta`).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyiceberg.conversions import to_bytes
from pyiceberg.exceptions import (
    CommitFailedException,
    NamespaceAlreadyExistsError,
    NoSuchNamespaceError,
    NoSuchTableError,
    ValidationException,
)
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.typedef import Record
from pyiceberg.types import LongType

from lakecleaner.clock import wall_clock_ms
from lakecleaner.errors import LakeCleanerError, TableOfAnotherLake
from lakecleaner.faults import crash_point
from lakecleaner.iceberg.catalog import CATALOG_NAME, catalog_exists, open_catalog
from lakecleaner.iceberg.entries import table_entries
from lakecleaner.iceberg.hidden_rows import HiddenRows, hides_rows, write_hidden_rows
from lakecleaner.iceberg.naming import LAKE_ID_PROPERTY, LAKE_URI_PROPERTY, TOPIC_PROPERTY, table_identifier
from lakecleaner.iceberg.row_delta import RowDelta
from lakecleaner.iceberg.schema import COMMIT_PROPERTIES, LATEST_TABLE, LOG_TABLE, OFFSET_ID, TableKind, table_folder
from lakecleaner.iceberg.snapshots import expire_released
from lakecleaner.iceberg.transactions import open_transaction
from lakecleaner.lake_id import stored_lake_id
from lakecleaner.log.layout import partition_prefix
from lakecleaner.log.manifest import Manifest, SegmentFile

if TYPE_CHECKING:
    from lakecleaner.lake import Lake

log = logging.getLogger(__name__)

#: Commits of the table that another writer's commit beat, retried from the table read again.
COMMIT_ATTEMPTS = 8
#: The table property holding the manifest version a partition's files reflect.
VERSION_PREFIX = "lakecleaner.log.version."


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
    """The topic's table of `kind`, created (with its namespace) on first use at its location,
    recording its topic and its lake; a table of another topic or another lake is refused."""
    catalog = open_catalog(lake.config, lake.store.root_uri)
    identifier = table_identifier(lake.config.iceberg.namespace, topic, kind.suffix)
    try:
        table = catalog.load_table(identifier)
    except NoSuchTableError:
        with contextlib.suppress(NamespaceAlreadyExistsError):
            catalog.create_namespace(identifier[:-1])
        owner = {LAKE_URI_PROPERTY: lake.store.root_uri, LAKE_ID_PROPERTY: lake.lake_id}
        table = catalog.create_table_if_not_exists(
            identifier,
            kind.schema,
            location=lake.store.location(table_folder(topic, kind)).rstrip("/"),
            partition_spec=kind.spec,
            properties={**kind.properties, TOPIC_PROPERTY: topic, **owner},
        )
    claim = _claim(lake, topic, kind, table, lake.lake_id)
    missing = {k: v for k, v in {**COMMIT_PROPERTIES, **claim}.items() if table.properties.get(k) != v}
    if missing:  # a table made before lakecleaner recorded these
        with open_transaction(table) as transaction:
            transaction.set_properties(missing)
    return table


def find_table(lake: Lake, topic: str, kind: TableKind) -> Any | None:
    """The topic's table of `kind` when it exists, for a reader: nothing is created or written
    (not the table, its namespace, the embedded catalog's file, nor the lake's id); refused as
    `open_table` refuses it when it is another topic's or another lake's."""
    if not catalog_exists(lake.config, lake.store.root_uri):
        return None
    catalog = open_catalog(lake.config, lake.store.root_uri)
    try:
        table = catalog.load_table(table_identifier(lake.config.iceberg.namespace, topic, kind.suffix))
    except (NoSuchTableError, NoSuchNamespaceError):
        return None
    _claim(lake, topic, kind, table, stored_lake_id(lake.store))
    return table


def _claim(lake: Lake, topic: str, kind: TableKind, table: Any, lake_id: str | None) -> dict[str, str]:
    """The owner properties the table must hold for this lake (whose id is `lake_id`, None when
    it has none yet); LakeCleanerError when the table follows another topic, TableOfAnotherLake
    when another lake owns it (by its id, or, for a table that records none, by its location)."""
    follows = table.properties.get(TOPIC_PROPERTY)
    if follows != topic:
        raise LakeCleanerError(
            f"Iceberg table {'.'.join(table.name())} follows topic {follows}, not {topic}: the two topics map to "
            "one table name (docs/architecture.md, Tables out); turn Iceberg off for one (iceberg: {enabled: false})"
        )
    owner = table.properties.get(LAKE_ID_PROPERTY)
    ours = lake.store.location(table_folder(topic, kind)).rstrip("/")
    if (owner is not None and owner == lake_id) or (owner is None and table.location().rstrip("/") == ours):
        return {LAKE_URI_PROPERTY: lake.store.root_uri, LAKE_ID_PROPERTY: lake_id or lake.lake_id}
    where = table.properties.get(LAKE_URI_PROPERTY) or table.location()
    raise TableOfAnotherLake(
        f"Iceberg table {'.'.join(table.name())} belongs to another lake ({where}), not {lake.store.root_uri}: "
        f"the two lakes share catalog {CATALOG_NAME} and namespace {lake.config.iceberg.namespace}; give this "
        "lake a namespace of its own (iceberg.namespace)"
    )


def drop_tables(lake: Lake, topic: str) -> None:
    """Forget the topic's tables in the catalog (its files are the caller's to delete): what a
    topic deleted and created again under the same name needs, or the catalog would point at
    metadata that is gone. A table another lake owns is refused (TableOfAnotherLake); a table
    whose metadata cannot be read at all is dropped (its owner cannot be told, and it has this
    topic's name in this lake's namespace)."""
    catalog = open_catalog(lake.config, lake.store.root_uri)
    for kind in (LOG_TABLE, LATEST_TABLE):
        identifier = table_identifier(lake.config.iceberg.namespace, topic, kind.suffix)
        try:
            table = catalog.load_table(identifier)
        except NoSuchTableError:
            continue
        except Exception:  # damaged metadata: nothing to check it against
            table = None
        if table is not None:
            _claim(lake, topic, kind, table, lake.lake_id)
        with contextlib.suppress(NoSuchTableError):
            catalog.drop_table(identifier)


@dataclass(frozen=True)
class InPlace:
    """A segment file a sync plans to register in place as a data file of the Kafka partition
    (made into one, `data_file`, only when the table does not hold it yet)."""

    location: str
    partition: int
    file: SegmentFile


#: A file a sync plans for the table: a segment file registered in place, the delete file of its
#: hidden rows to write, or either as the table holds it once made (a lost race does not make it
#: again).
Planned = InPlace | HiddenRows | DataFile


def data_files(lake: Lake, topic: str, partition: int, manifest: Manifest) -> dict[str, Planned]:
    """The segment files of a committed manifest as the table holds them, by location: each
    registered in place as an Iceberg data file, with, for a file the log start cuts (a trim inside
    it) or whose deletion vector removes rows, the position-delete file of those rows
    (`iceberg.hidden_rows`), which a sync writes; none of a file wholly below the log start (its
    segment stays in the manifest until retention takes it, but no reader of the log reads it,
    and an erasure must not wait for that)."""
    prefix = partition_prefix(topic, partition)
    out: dict[str, Planned] = {}
    start = manifest.log_start_offset
    for segment in manifest.segments:
        for file in segment.files:
            if file.base_offset < start and file.next_offset <= start:
                continue
            path = lake.store.location(prefix + file.path)
            out[path] = InPlace(path, partition, file)
            if hides_rows(file, start):
                hidden = HiddenRows(topic, partition, file, start)
                out[lake.store.location(hidden.key)] = hidden
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


def reflected_version(table: Any, partition: int) -> int | None:
    """The manifest version the table's files of `partition` reflect (None: not recorded)."""
    value = table.properties.get(f"{VERSION_PREFIX}{partition}")
    return None if value is None else int(value)


def not_older(table: Any, manifests: Mapping[int, Manifest]) -> dict[int, Manifest]:
    """The manifests at or above the version the table reflects for their partition: a sync of
    an older one (it ran late) would move the table back."""
    return {p: m for p, m in manifests.items() if (reflected_version(table, p) or 0) <= m.version}


def sync_partitions(lake: Lake, topic: str, manifests: Mapping[int, Manifest], delay_ms: int) -> SyncResult:
    """Make the table's files of these partitions the manifests' segment files, each once, in one
    snapshot (none when they already are), and record the versions reflected; a partition whose
    manifest is older than the one the table reflects is left as it is; a commit another writer
    beat is redone from the table read again. The same commit expires snapshots released more than
    `delay_ms` (the topic's file.delete.delay.ms) ago (`snapshots.expire_released`)."""
    wanted = {p: data_files(lake, topic, p, m) for p, m in manifests.items()}
    for attempt in range(COMMIT_ATTEMPTS):
        table = log_table(lake, topic)
        current = not_older(table, manifests)
        change = _difference(lake, table, {p: wanted[p] for p in current})
        name = ".".join(table.name())
        if change is None:
            return SyncResult(topic, name, 0, 0, None)
        added, removed = change
        try:
            with open_transaction(table) as transaction:
                expire_released(transaction, table, wall_clock_ms() - delay_ms)
                with RowDelta(transaction) as delta:
                    delta.remove(removed)
                    for file in added:
                        delta.add(file)
                transaction.set_properties({f"{VERSION_PREFIX}{p}": str(m.version) for p, m in current.items()})
        except (CommitFailedException, ValidationException):
            log.info("Iceberg table %s: another writer committed first (attempt %d); syncing again", name, attempt + 1)
            time.sleep(0.05 * (attempt + 1))
            continue
        made = table.current_snapshot()  # the commit moved `table` to the metadata it wrote
        return SyncResult(topic, name, len(added), len(removed), made and made.snapshot_id)
    raise LakeCleanerError(
        f"Iceberg table of topic {topic}: lost {COMMIT_ATTEMPTS} commit races in a row; run "
        f"`lakecleaner iceberg sync --topic {topic}` again later"
    )


def _difference(
    lake: Lake, table: Any, wanted: Mapping[int, dict[str, Planned]]
) -> tuple[list[DataFile], list[DataFile]] | None:
    """What makes the table's files of these partitions the wanted ones, each once: (added,
    removed), a file held twice removed and added once; None when nothing is to change. A trim's
    delete file is written when first added, and `wanted` then holds it as written (a lost race
    does not write it again), or no longer holds it when the cut file has no record to delete."""
    if not wanted:
        return None
    held = table_entries(table, wanted)
    counts = Counter(file.file_path for file in held)
    by_path = {file.file_path: file for file in held}
    planned: set[str] = set()
    added: list[DataFile] = []
    for files in wanted.values():
        for path in files.keys() - by_path.keys():
            written = _written(lake, table, files[path])
            if written is None:
                del files[path]
            else:
                files[path] = written
                added.append(written)
        planned |= files.keys()
    twice = [by_path[path] for path, n in counts.items() if n > 1 and path in planned]
    added += twice
    removed = [file for path, file in by_path.items() if path not in planned] + twice
    return (added, removed) if added or removed else None


def _written(lake: Lake, table: Any, planned: Planned) -> DataFile | None:
    """A planned file of the table as a data or delete file, a trim's delete file written first
    (None when the cut file holds nothing below the log start)."""
    if isinstance(planned, DataFile):
        return planned
    if isinstance(planned, InPlace):
        return data_file(planned.location, planned.partition, planned.file)
    written = write_hidden_rows(lake.store, planned, table.spec().spec_id)
    crash_point("sync.after_hidden_rows_write")
    return written


__all__ = [
    "COMMIT_ATTEMPTS",
    "VERSION_PREFIX",
    "InPlace",
    "Planned",
    "SyncResult",
    "data_file",
    "data_files",
    "drop_tables",
    "find_table",
    "log_table",
    "not_older",
    "open_table",
    "reflected_version",
    "sync_partitions",
]
