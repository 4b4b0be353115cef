"""Kafka Connect S3 sink output, written as the connector names and writes it
(confluentinc/kafka-connect-storage-cloud: `TopicPartitionWriter`, `RecordViews`,
`KeyValueHeaderRecordWriterProvider`, the Avro / Parquet / JSON record writer providers), for the
adoption tests (issue 49).

Per Kafka partition, records go in offset order to the open file of their encoded partition
(`partition=<p>`, a time-based `year=…/month=…/day=…/hour=…`, or `tombstone` for null values with
`behavior.on.null.values=write`); a file is named after its first record's offset; every open
file is committed once `flush.size` records were written since the last commit; a change of
time-based folder rotates (`rotate.file.on.partition.change`), one to or from the tombstone folder
does not. Keys and headers go to `.keys` / `.headers` sidecars in the value format: Avro not
enveloped, Parquet enveloped (`{"key": …}`, `{"headers": […]}`), JSON headers enveloped.
"""

from __future__ import annotations

import datetime
import gzip
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq

from lakecleaner.io import ObjectStore

EXTENSIONS = {"avro": ".avro", "parquet": ".snappy.parquet", "json": ".json"}
HEADER_SCHEMA = {
    "type": "record",
    "name": "Header",
    "fields": [{"name": "key", "type": "string"}, {"name": "value", "type": "string"}],
}


@dataclass(frozen=True)
class SinkRecord:
    """A record as the sink receives it: the partition, its offset, key, value (a dict, or None:
    a tombstone), headers (string values) and timestamp."""

    partition: int
    offset: int
    key: Any
    value: dict[str, Any] | None
    headers: tuple[tuple[str, str], ...] = ()
    timestamp_ms: int = 1_790_000_000_000


@dataclass
class SinkConfig:
    """The connector settings that shape its output."""

    format: str = "parquet"
    value_schema: dict[str, Any] | None = None  # Avro schema of the values (Avro and Parquet)
    key_schema: Any = "string"
    store_keys: bool = True
    store_headers: bool = False
    write_tombstones: bool = False  # behavior.on.null.values=write
    time_based: bool = False  # TimeBasedPartitioner, hourly, on the record's timestamp
    flush_size: int = 3
    gzip: bool = False
    written: list[str] = field(default_factory=list)


def write_sink(store: ObjectStore, folder: str, topic: str, records: Sequence[SinkRecord], config: SinkConfig) -> None:
    """Write `records` under `folder` (`<topics.dir>/<topic>`) as the sink would."""
    for partition in sorted({r.partition for r in records}):
        _write_partition(store, folder, topic, [r for r in records if r.partition == partition], config)


def _encoded(record: SinkRecord, config: SinkConfig) -> str:
    if record.value is None and config.write_tombstones:
        return "tombstone"
    if config.time_based:
        t = datetime.datetime.fromtimestamp(record.timestamp_ms / 1000, datetime.UTC)
        return f"year={t.year}/month={t.month:02d}/day={t.day:02d}/hour={t.hour:02d}"
    return f"partition={record.partition}"


def _write_partition(
    store: ObjectStore, folder: str, topic: str, records: list[SinkRecord], config: SinkConfig
) -> None:
    open_files: dict[str, list[SinkRecord]] = {}
    since_commit = 0
    current: str | None = None

    def commit_all() -> None:
        for encoded, held in open_files.items():
            _write_file(store, f"{folder}/{encoded}".lstrip("/"), topic, held, config)
        open_files.clear()

    for record in sorted(records, key=lambda r: r.offset):
        if record.value is None and not config.write_tombstones:
            continue  # behavior.on.null.values=ignore
        encoded = _encoded(record, config)
        tombstone_change = current is not None and "tombstone" in (encoded, current)
        if config.time_based and current is not None and encoded != current and not tombstone_change:
            commit_all()
            since_commit = 0
        open_files.setdefault(encoded, []).append(record)
        current = encoded
        since_commit += 1
        if since_commit >= config.flush_size:
            commit_all()
            since_commit = 0
    commit_all()


def _write_file(store: ObjectStore, folder: str, topic: str, records: list[SinkRecord], config: SinkConfig) -> None:
    first = records[0]
    base = f"{folder}/{topic}+{first.partition}+{first.offset:010d}"
    ext = EXTENSIONS[config.format] + (".gz" if config.gzip and config.format == "json" else "")
    if "tombstone" not in folder:
        _put(store, base + ext, config, _encode([r.value for r in records], config.value_schema, config, None))
    if config.store_keys:
        _put(store, base + ".keys" + ext, config, _encode([r.key for r in records], config.key_schema, config, "key"))
    if config.store_headers:
        views = [[{"key": k, "value": v} for k, v in r.headers] for r in records]
        _put(
            store,
            base + ".headers" + ext,
            config,
            _encode(views, {"type": "array", "items": HEADER_SCHEMA}, config, "headers"),
        )


def _put(store: ObjectStore, key: str, config: SinkConfig, data: bytes) -> None:
    store.write(key, gzip.compress(data) if config.gzip and config.format == "json" else data)
    config.written.append(key)


def _encode(views: list[Any], schema: Any, config: SinkConfig, envelope: str | None) -> bytes:
    if config.format == "avro":
        out = io.BytesIO()
        fastavro.writer(out, fastavro.parse_schema(schema), views)
        return out.getvalue()
    if config.format == "json":
        lines = [json.dumps({"headers": v} if envelope == "headers" else v, separators=(",", ":")) for v in views]
        return "".join(line + "\n" for line in lines).encode()
    rows = [{envelope: v} for v in views] if envelope else views
    out = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), out, compression="snappy")
    return out.getvalue()
