"""`lakecleaner iceberg status`: per topic, its tables, how to reach them (the catalog's
properties for pyiceberg, and Spark's configuration for Iceberg's runtime, secrets masked) and
whether the table matches the committed manifests. It only reads: a table not made yet is
reported as such (the next sync makes it), never created."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from lakecleaner.iceberg import latest
from lakecleaner.iceberg.catalog import CATALOG_NAME, catalog_properties
from lakecleaner.iceberg.entries import partition_files, table_entries
from lakecleaner.iceberg.hidden_rows import HiddenRows, hidden_positions
from lakecleaner.iceberg.naming import table_identifier
from lakecleaner.iceberg.schema import LATEST_TABLE, LOG_TABLE
from lakecleaner.iceberg.shown import shown
from lakecleaner.iceberg.spark_catalog import SPARK_PACKAGES, NoSparkEquivalent, spark_catalog_conf
from lakecleaner.iceberg.sync import Planned, data_files, find_table

if TYPE_CHECKING:
    from lakecleaner.lake import Lake


@dataclass(frozen=True)
class LatestFiles:
    """A latest-values table's data files, position-delete files and the rows they hide."""

    data_files: int
    delete_files: int
    dead_rows: int


def latest_files(table: Any, partitions: Iterable[int]) -> LatestFiles:
    """The `LatestFiles` of the table's current snapshot over `partitions`."""
    files = [partition_files(table, p) for p in partitions]
    data, deletes = sum(len(f.data) for f in files), sum(len(f.deletes) for f in files)
    return LatestFiles(data, deletes, sum(f.dead_rows for f in files))


@dataclass(frozen=True)
class TableStatus:
    """A topic's tables as readers find them; `in_step`: the log table's files are exactly the
    segment files of the readable partitions' committed manifests, each registered once, and the
    latest values (of a compacted topic) reflect each one's next offset; `missing`, `extra` and
    `duplicate`: how many files the log table lacks, holds that no manifest does, and holds more
    than once (`iceberg sync` mends each); `not_made`: the tables the catalog does not hold yet;
    `latest_files`: the latest-values table's files (`LatestFiles`)."""

    topic: str
    tables: tuple[str, ...]
    catalog: dict[str, str]
    spark: dict[str, Any]
    snapshot_id: int | None
    in_step: bool
    missing: int
    extra: int
    duplicate: int
    unreadable: dict[int, str]
    not_made: tuple[str, ...] = ()
    #: The latest-values table's files and the rows its position-delete files hide (issue 80):
    #: what table maintenance (`iceberg compact`) folds and rewrites; None without that table.
    latest_files: LatestFiles | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "tables": list(self.tables),
            "catalog": self.catalog,
            "spark": self.spark,
            "snapshot_id": self.snapshot_id,
            "in_step": self.in_step,
            "missing_files": self.missing,
            "extra_files": self.extra,
            "duplicate_files": self.duplicate,
            "unreadable": {str(p): r for p, r in self.unreadable.items()},
            "not_made": list(self.not_made),
            "latest_files": None if self.latest_files is None else asdict(self.latest_files),
        }


def reader_catalog(lake: Lake) -> dict[str, str]:
    """What a reader passes to pyiceberg's `load_catalog`: the name and the properties, shown by allow-list."""
    return {"name": CATALOG_NAME, **shown(catalog_properties(lake.config, lake.store.root_uri))}


def reader_spark(lake: Lake) -> dict[str, Any]:
    """What Spark needs to read the tables with Iceberg's runtime: the packages and the
    `spark.sql.catalog.*` configuration, masked; or why no Java catalog reads them."""
    try:
        conf = spark_catalog_conf(catalog_properties(lake.config, lake.store.root_uri))
    except NoSparkEquivalent as exc:
        return {"error": str(exc)}
    return {"packages": list(SPARK_PACKAGES), "conf": shown(conf)}


def _nothing_to_delete(lake: Lake, planned: Planned) -> bool:
    """Whether a planned file is a trim's delete file with no record to delete (none is written)."""
    return isinstance(planned, HiddenRows) and not len(hidden_positions(lake.store, planned))


def table_status(lake: Lake, topic: str) -> TableStatus:
    """The topic's tables compared with its committed manifests, as they are (`find_table`: a
    table not made yet holds no file and reflects nothing)."""
    read = lake.topic(topic).read_manifests()
    kinds = [LOG_TABLE, *([LATEST_TABLE] if lake.topic(topic).config.compact else [])]
    found = [
        (".".join(table_identifier(lake.config.iceberg.namespace, topic, k.suffix)), find_table(lake, topic, k))
        for k in kinds
    ]
    table = found[0][1]
    entries = [] if table is None else table_entries(table, read.manifests)
    registered = Counter(file.file_path for file in entries)
    held = registered.keys()
    wanted: set[str] = set()
    for partition, manifest in read.manifests.items():
        planned = data_files(lake, topic, partition, manifest)
        wanted |= {path for path, file in planned.items() if path in held or not _nothing_to_delete(lake, file)}
    duplicate = sum(1 for n in registered.values() if n > 1)
    snapshot = None if table is None else table.current_snapshot()
    latest_in_step = all(t is not None and latest.in_step(t, read.manifests) for _, t in found[1:])
    return TableStatus(
        topic,
        tuple(name for name, _ in found),
        reader_catalog(lake),
        reader_spark(lake),
        None if snapshot is None else snapshot.snapshot_id,
        wanted == held and not duplicate and latest_in_step and table is not None,
        len(wanted - held),
        len(held - wanted),
        duplicate,
        dict(read.failures),
        tuple(name for name, t in found if t is None),
        None if len(found) < 2 or found[1][1] is None else latest_files(found[1][1], read.manifests),
    )


__all__ = ["LatestFiles", "TableStatus", "reader_catalog", "reader_spark", "table_status"]
