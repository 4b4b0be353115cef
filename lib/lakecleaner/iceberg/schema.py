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

from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.name_mapping import create_mapping_from_schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import BinaryType, IntegerType, ListType, LongType, NestedField, StringType, StructType

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

#: The table properties: the name mapping that makes the segment files readable as written; no
#: column statistics for keys, values and headers in any file a writer adds (they would hold
#: record bytes in metadata); old metadata files deleted after each commit.
LOG_PROPERTIES = {
    "schema.name-mapping.default": create_mapping_from_schema(LOG_SCHEMA).model_dump_json(),
    "write.metadata.metrics.default": "none",
    "write.metadata.metrics.column.offset": "full",
    "write.metadata.metrics.column.timestamp": "full",
    "format-version": "2",
    # every commit writes a metadata.json: keep the last 100, not one per commit forever
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": "100",
}

__all__ = ["LOG_PROPERTIES", "LOG_SCHEMA", "LOG_SPEC", "OFFSET_ID", "TIMESTAMP_ID"]
