"""The codec of each column of the segment files appends and compactions write
(`segment_files.column_compression`): zstd, except a value column zstd cannot shrink; and the
encoding of the offsets and timestamps (`segment_files.column_encodings`)."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from lakecleaner.engine.report import COMMITTED
from lakecleaner.io import LocalStore
from lakecleaner.lake import Lake, Topic
from lakecleaner.log.layout import partition_prefix
from lakecleaner.log.records import Record
from tests.engine.helpers import compact, new_topic
from tests.support.backends import ALL_BACKENDS

pytestmark = pytest.mark.backends(*ALL_BACKENDS)  # and the real object store, SeaweedFS

NOW = 1_700_000_000_000


def random_values(rng: random.Random, count: int) -> list[bytes]:
    """Incompressible values, as encrypted or producer-compressed payloads are."""
    return [rng.randbytes(100) for _ in range(count)]


def json_values(rng: random.Random, count: int) -> list[bytes]:
    """Compressible values, as JSON change events are."""
    return [
        json.dumps({"id": i, "status": rng.choice(["new", "paid", "sent"]), "n": i % 7}).encode() for i in range(count)
    ]


def column_chunks(lake: Lake, topic: Topic, partition: int) -> Iterator[tuple[str, pq.ColumnChunkMetaData]]:
    """Each column chunk of each segment file of the partition, with the file's path."""
    prefix = partition_prefix(topic.name, partition)
    for segment in topic.partition(partition).manifest().segments:
        for f in segment.files:
            meta = pq.ParquetFile(pa.BufferReader(lake.store.read(prefix + f.path))).metadata
            for g in range(meta.num_row_groups):
                yield from ((f.path, meta.row_group(g).column(i)) for i in range(meta.num_columns))


def codecs(lake: Lake, topic: Topic, partition: int) -> dict[str, dict[str, set[str]]]:
    """Each segment file of the partition (by path): the codecs of each of its leaf columns."""
    found: dict[str, dict[str, set[str]]] = {}
    for path, c in column_chunks(lake, topic, partition):
        found.setdefault(path, {}).setdefault(c.path_in_schema, set()).add(c.compression)
    return found


def assert_codecs(lake: Lake, topic: Topic, partition: int, value: str) -> None:
    """Every file of the partition stores its value column with `value` and every other leaf
    column (the header fields too, whatever Parquet names their list item) with zstd; its offsets
    and timestamps DELTA_BINARY_PACKED (`segment_files.column_encodings`), no other column so."""
    files = codecs(lake, topic, partition)
    assert files, partition
    for path, columns in files.items():
        assert len(columns) == 7 and columns.pop("value") == {value}, (partition, path, columns)
        assert all(c == {"ZSTD"} for c in columns.values()), (partition, path, columns)
    chunks = [c for _, c in column_chunks(lake, topic, partition)]
    delta = {c.path_in_schema for c in chunks if "DELTA_BINARY_PACKED" in c.encodings}
    plain = {c.path_in_schema for c in chunks if "PLAIN" in c.encodings}
    assert delta == {"offset", "timestamp"} and not delta & plain, (partition, delta, plain)


def test_a_value_column_zstd_cannot_shrink_is_stored_uncompressed_and_every_other_zstd(
    spark: SparkSession, lake: Lake
) -> None:
    """Partition 0: random values, more than segment_files.WHOLE_OBJECT_BYTES (the compacted file
    streams: on S3 a multipart upload of several parts); 1: random values, a small file (built in
    memory); 2: JSON values; 3: ten random values (a sample too small to judge, so zstd)."""
    rng = random.Random(7)
    topic = new_topic(lake, partitions=4)
    shapes = {0: (random_values, 120_000), 1: (random_values, 2_000), 2: (json_values, 50_000), 3: (random_values, 10)}
    sent: dict[int, dict[bytes, bytes]] = {}
    for partition, (values, count) in shapes.items():
        log = topic.partition(partition)
        latest: dict[bytes, bytes] = {}
        for _ in range(2):  # every key twice: the compaction keeps the second
            header = (("source", b"cdc"),)
            batch = [Record(f"k{i}".encode(), v, NOW, header) for i, v in enumerate(values(rng, count))]
            log.append(batch, now_ms=NOW)
            latest.update({r.key: r.value for r in batch if r.key is not None and r.value is not None})
        log.roll(now_ms=NOW)
        sent[partition] = latest
    expected = {0: "UNCOMPRESSED", 1: "UNCOMPRESSED", 2: "ZSTD", 3: "ZSTD"}
    for partition, codec in expected.items():
        assert_codecs(lake, topic, partition, codec)  # as appended

    report = compact(spark, lake, topic, NOW + 1)
    for partition, codec in expected.items():
        assert report.partition(partition).status == COMMITTED
        assert_codecs(lake, topic, partition, codec)  # as compacted
        table = topic.partition(partition).read()
        assert (
            dict(zip(table.column("key").to_pylist(), table.column("value").to_pylist(), strict=True))
            == sent[partition]
        )
    prefix = partition_prefix(topic.name, 0)
    (path,) = codecs(lake, topic, 0)
    if not isinstance(lake.store, LocalStore):  # written in parts: a multipart upload's ETag ends with -<parts>
        (listed,) = [o for o in lake.store.list(prefix) if o.key == prefix + path]
        assert "-" in listed.version_tag.strip('"'), listed
