"""The Iceberg schema of a topic's table, and how it reads the segment files as they are.

Segment files are Parquet written by pyarrow, without Iceberg field ids; the table's name mapping
(`schema.name-mapping.default`) gives each column its id by name, as pyiceberg's `add_files`
does for files it did not write. The Kafka partition is not a column of the files (a segment file
belongs to one partition, named by its key): the table is partitioned by identity on `partition`,
each data file carries its partition's value in the table's manifests, and readers fill the
column from there (the Iceberg spec's rule for identity partition columns a file lacks, which
pyiceberg and Iceberg's Spark runtime follow). Files are registered, not rewritten.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.name_mapping import create_mapping_from_schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import BinaryType, IntegerType, ListType, LongType, NestedField, StringType, StructType

from lakecleaner.log.layout import topic_prefix

#: Field ids in the order a catalog assigns fresh ones (top-level fields, then nested ones), so
#: the table's schema keeps them and the name mapping below holds for it.
PARTITION_ID, OFFSET_ID, TIMESTAMP_ID, KEY_ID, VALUE_ID, HEADERS_ID, DELETE_HORIZON_ID = 1, 2, 3, 4, 5, 6, 7
HEADER_ELEMENT_ID, HEADER_KEY_ID, HEADER_VALUE_ID = 8, 9, 10

#: The log table: the Kafka partition, then SEGMENT_SCHEMA's columns.
LOG_SCHEMA = Schema(
    # optional: pyiceberg fills a column a file lacks from the partition value only when it is
    NestedField(PARTITION_ID, "partition", IntegerType(), required=False),
    NestedField(OFFSET_ID, "offset", LongType(), required=True),
    NestedField(TIMESTAMP_ID, "timestamp", LongType(), required=True),
    NestedField(KEY_ID, "key", BinaryType(), required=False),
    NestedField(VALUE_ID, "value", BinaryType(), required=False),
    NestedField(
        HEADERS_ID,
        "headers",
        ListType(
            HEADER_ELEMENT_ID,
            StructType(
                NestedField(HEADER_KEY_ID, "key", StringType(), required=True),
                NestedField(HEADER_VALUE_ID, "value", BinaryType(), required=False),
            ),
            element_required=True,
        ),
        required=False,
    ),
    NestedField(DELETE_HORIZON_ID, "delete_horizon_ms", LongType(), required=False),
)

#: Identity on the Kafka partition.
LOG_SPEC = PartitionSpec(PartitionField(PARTITION_ID, 1000, IdentityTransform(), "partition"), spec_id=0)

#: How both tables commit, kept on a table made before (`sync.open_table`): every commit writes a
#: metadata.json, of which the last 100 are kept, not one per commit forever; an append merges the
#: table's manifests once 16 small ones have gathered (Iceberg's merge append), so that a sync
#: reads a few manifests, not one per commit the table ever took (at commit 400 of a topic
#: appended 100 records at a time, reading 400 manifests was most of a sync); and pyiceberg's
#: own retries are off: it retries a lost commit by applying the same files again on top of the
#: winner, which duplicates what both added, where a sync computes the difference again.
COMMIT_PROPERTIES = {
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": "100",
    "commit.manifest-merge.enabled": "true",
    "commit.manifest.min-count-to-merge": "16",
    "commit.retry.num-retries": "0",
}

#: The table properties: the name mapping that makes the segment files readable as written; no
#: column statistics for keys, values and headers in any file a writer adds (they would hold
#: record bytes in metadata); `COMMIT_PROPERTIES`.
LOG_PROPERTIES = {
    "schema.name-mapping.default": create_mapping_from_schema(LOG_SCHEMA).model_dump_json(),
    "write.metadata.metrics.default": "none",
    "write.metadata.metrics.column.offset": "full",
    "write.metadata.metrics.column.timestamp": "full",
    "format-version": "2",
    **COMMIT_PROPERTIES,
}

#: The latest-values table of a compacted topic (Tableflow's UPSERT mode): one row per live key
#: of each partition, its record at the highest offset that is not a tombstone.
LATEST_SCHEMA = Schema(
    NestedField(1, "partition", IntegerType(), required=False),
    NestedField(2, "key", BinaryType(), required=True),
    NestedField(3, "offset", LongType(), required=True),
    NestedField(4, "timestamp", LongType(), required=True),
    NestedField(5, "value", BinaryType(), required=False),
    NestedField(
        6,
        "headers",
        ListType(
            7,
            StructType(
                NestedField(8, "key", StringType(), required=True),
                NestedField(9, "value", BinaryType(), required=False),
            ),
            element_required=True,
        ),
        required=False,
    ),
)
LATEST_SPEC = PartitionSpec(PartitionField(1, 1000, IdentityTransform(), "partition"), spec_id=0)
#: Its data files are pyiceberg's: statistics of the partition and offset only (no key bytes).
LATEST_PROPERTIES = {
    "write.metadata.metrics.default": "none",
    "write.metadata.metrics.column.partition": "full",
    "write.metadata.metrics.column.offset": "full",
    "format-version": "2",
    **COMMIT_PROPERTIES,
}


@dataclass(frozen=True)
class TableKind:
    """A kind of table a topic has: its name's suffix, schema, spec, properties, and the folder
    under the topic's prefix that is its location ("" : the prefix itself)."""

    suffix: str
    schema: Schema
    spec: PartitionSpec
    properties: dict[str, Any]
    folder: str


def table_folder(topic: str, kind: TableKind) -> str:
    """The key prefix of the topic's table of `kind` (its location)."""
    return topic_prefix(topic) + kind.folder


LOG_TABLE = TableKind("", LOG_SCHEMA, LOG_SPEC, LOG_PROPERTIES, "")
LATEST_TABLE = TableKind("_latest", LATEST_SCHEMA, LATEST_SPEC, LATEST_PROPERTIES, "latest/")

__all__ = ["LATEST_TABLE", "LOG_TABLE", "OFFSET_ID", "TIMESTAMP_ID", "TableKind", "table_folder"]
