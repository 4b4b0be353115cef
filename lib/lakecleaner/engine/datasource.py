"""`spark.read.format("lakecleaner")`: a topic's committed log as a Spark DataFrame, through
PySpark's Python Data Source API.

    register_data_source(spark)
    df = (spark.read.format("lakecleaner")
          .option("lake", "s3://bucket/prefix").option("topic", "orders")
          .option("partitions", "0,2")                          # default: every partition
          .option("startingOffset", 100).option("endingOffset", 200)  # per partition, [start, end)
          .option("endpoint", "http://minio:9000")              # S3 settings, optional
          .load())

Each partition's manifest is read once, when Spark plans the query, so the DataFrame is a
consistent snapshot of every partition; each segment file becomes one input partition, read
with pyarrow and handed to Spark as Arrow batches. Rows are what a consumer reading the
partition from `startingOffset` (default and minimum: the log start) to `endingOffset` (default:
the log end) receives, with a `partition` column in front.

Credentials: options `accessKeyId`, `secretAccessKey`, `sessionToken` (Spark redacts option
values whose names match spark.redaction.regex, which these do), else the standard AWS
environment and credential chain. The endpoint defaults to $LAKECLEANER_S3_ENDPOINT_URL.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from lakecleaner.config import ENV_S3_ENDPOINT, StorageSettings, parse_config
from lakecleaner.engine.storage import StoreSpec
from lakecleaner.lake import Lake
from lakecleaner.log.layout import partition_prefix
from lakecleaner.log.manifest import SegmentFile
from lakecleaner.log.records import SEGMENT_SCHEMA
from lakecleaner.log.segment_files import read_segment_file

FORMAT = "lakecleaner"
ROW_SCHEMA = pa.schema([pa.field("partition", pa.int32()), *SEGMENT_SCHEMA])

_DDL_TYPES = {
    pa.int8(): "tinyint",
    pa.int32(): "int",
    pa.int64(): "long",
    pa.bool_(): "boolean",
    pa.string(): "string",
    pa.binary(): "binary",
}


def ddl_type(arrow_type: pa.DataType) -> str:
    """Spark's DDL name of an Arrow type (the types segment files use)."""
    if pa.types.is_list(arrow_type):
        return f"array<{ddl_type(arrow_type.value_type)}>"
    if pa.types.is_struct(arrow_type):
        return "struct<" + ",".join(f"{f.name}:{ddl_type(f.type)}" for f in arrow_type) + ">"
    return _DDL_TYPES[arrow_type]


def ddl(schema: pa.Schema) -> str:
    """A Spark DDL schema string for an Arrow schema."""
    return ", ".join(f"`{f.name}` {ddl_type(f.type)}" for f in schema)


class FileSlice(InputPartition):
    """One segment file of one partition, and the offsets [start, end) to read from it."""

    partition: int
    file: SegmentFile
    start: int
    end: int

    def __init__(self, partition: int, file: SegmentFile, start: int, end: int) -> None:
        super().__init__(None)
        self.partition, self.file, self.start, self.end = partition, file, start, end


def _settings(options: dict[str, str]) -> StorageSettings:
    return StorageSettings(
        endpoint_url=options.get("endpoint") or os.environ.get(ENV_S3_ENDPOINT),
        region=options.get("region"),
        access_key_id=options.get("accesskeyid"),
        secret_access_key=options.get("secretaccesskey"),
        session_token=options.get("sessiontoken"),
    )


def _offset(options: dict[str, str], name: str) -> int | None:
    raw = options.get(name.lower())
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"option {name}={raw!r}: must be an offset (an integer)") from None


class LakeReader(DataSourceReader):
    """Plans one input partition per segment file and reads them as Arrow batches."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        for required in ("lake", "topic"):
            if not options.get(required):
                raise ValueError(f'spark.read.format("{FORMAT}") needs .option("{required}", ...)')
        self.uri = options["lake"]
        self.topic = options["topic"]
        self.spec = StoreSpec(self.uri, _settings(options))
        wanted = options.get("partitions")
        self.partitions_wanted = None if not wanted else sorted({int(p) for p in wanted.split(",") if p.strip()})
        self.start = _offset(options, "startingOffset")
        self.end = _offset(options, "endingOffset")
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")

    def partitions(self) -> Sequence[InputPartition]:
        lake = Lake(self.spec.open(), parse_config({"lake": {"uri": self.uri}}, "<data source>"))
        topic = lake.topic(self.topic)
        numbers = self.partitions_wanted if self.partitions_wanted is not None else range(topic.partitions)
        slices: list[InputPartition] = []
        for number in numbers:
            manifest = topic.partition(number).manifest()
            start = max(manifest.log_start_offset, self.start if self.start is not None else 0)
            end = min(manifest.next_offset, self.end if self.end is not None else manifest.next_offset)
            slices.extend(
                FileSlice(number, f, start, end)
                for s in manifest.segments
                for f in s.files
                if f.next_offset > start and f.base_offset < end
            )
        return slices

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, FileSlice):
            return  # Spark reads one empty partition when partitions() returns none
        store = self.spec.open()
        key = partition_prefix(self.topic, partition.partition) + partition.file.path
        table = read_segment_file(store, key, expected=partition.file)
        offsets = table.column("offset")
        if partition.file.base_offset < partition.start or partition.file.next_offset > partition.end:
            table = table.filter(pc.and_(pc.greater_equal(offsets, partition.start), pc.less(offsets, partition.end)))
        column = pa.array(np.full(table.num_rows, partition.partition, np.int32))
        yield from table.add_column(0, "partition", column).cast(self.arrow_schema).to_batches()


class LakeDataSource(DataSource):
    """The "lakecleaner" format (read-only)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        return ddl(ROW_SCHEMA)

    def reader(self, schema: StructType) -> DataSourceReader:
        return LakeReader(dict(self.options), schema)


def register_data_source(spark: SparkSession) -> None:
    """Make `spark.read.format("lakecleaner")` available in this session."""
    spark.dataSource.register(LakeDataSource)
