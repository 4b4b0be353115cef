"""The records of the S3 sink's files as lakecleaner's bytes (issue 49).

The sink writes each view of a record in the value format: Avro records (not enveloped), Parquet
rows (keys enveloped as `{"key": …}` and headers as `{"headers": […]}`, as Parquet needs a
struct), or JSON lines (the value as the JsonConverter wrote it; headers enveloped). A record's
bytes in the lake are:
- a JSON file's value line, as written (without its newline);
- a string as its UTF-8, bytes as they are;
- anything else (an Avro or Parquet record, a number) as compact JSON with the fields in the
  schema's order (bytes inside as base64, times as ISO 8601, decimals as strings).
Keys follow the same rule, so a string key reads the same from every format; headers' values
are the strings the sink stored (`Values.convertToString`), as UTF-8. A key taken from a field
of the value (`--key-field after.id`, a Debezium change event's) follows it too. Records carry
no timestamp in the sink's files: each gets the value of `--timestamp-field` (epoch ms) when
given, else its file's modification time (when the sink flushed it, an upper bound).
"""

from __future__ import annotations

import base64
import datetime
import decimal
import gzip
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow.parquet as pq

from lakecleaner.adopt.connect_names import SinkFile
from lakecleaner.adopt.connect_plan import Bundle
from lakecleaner.errors import LakeCleanerError
from lakecleaner.io import ObjectStore


class UnreadableSinkFile(LakeCleanerError):
    """A sink file that does not parse as its format says, or whose sidecars do not match it."""


@dataclass(frozen=True)
class BundleRecords:
    """One bundle's records, in file order."""

    keys: list[bytes | None]
    values: list[bytes | None]
    headers: list[list[dict[str, Any]]]
    timestamps: list[int]


def read_bundle(
    store: ObjectStore, bundle: Bundle, key_field: str | None = None, timestamp_field: str | None = None
) -> BundleRecords:
    """The bundle's records: values from its value file (none in a tombstone folder's), keys from
    its keys sidecar or `key_field` of the value, headers from its headers sidecar."""
    tombstones = bundle.main.tombstones
    raw_values = [] if tombstones else _read(store, bundle.main)
    keys_rows = _read(store, bundle.keys) if bundle.keys is not None else None
    count = len(keys_rows) if tombstones and keys_rows is not None else len(raw_values)
    values: list[bytes | None] = [None] * count if tombstones else [_value_bytes(v) for v in raw_values]
    if keys_rows is not None:
        keys = [as_bytes(_unwrapped(k, "key", bundle.keys)) for k in keys_rows]
    elif key_field is not None:
        keys = [as_bytes(field_of(_parsed(v), key_field)) for v in raw_values]
    else:
        keys = [None] * count
    headers: list[list[dict[str, Any]]] = [[] for _ in range(count)]
    if bundle.headers is not None:
        headers = [_headers(_unwrapped(h, "headers", bundle.headers)) for h in _read(store, bundle.headers)]
    if timestamp_field is not None and not tombstones:
        timestamps = [
            _timestamp(field_of(_parsed(v), timestamp_field), bundle.main, timestamp_field) for v in raw_values
        ]
    else:
        timestamps = [bundle.main.mtime_ms] * count
    for name, got in (("keys", keys), ("headers", headers)):
        if len(got) != count:
            raise UnreadableSinkFile(
                f"{bundle.main.key}: its {name} hold {len(got)} records and the file {count}; the sink writes "
                "one of each per record: re-run the connector for this range, or move the file aside"
            )
    return BundleRecords(keys, values, headers, timestamps)


@dataclass(frozen=True)
class _JsonLine:
    """A JSON file's line: its text as written, and what it parses to."""

    raw: bytes
    parsed: Any


def _read(store: ObjectStore, sink_file: SinkFile | None) -> Sequence[Any]:
    assert sink_file is not None
    data = store.read(sink_file.key)
    try:
        if sink_file.gzip:
            data = gzip.decompress(data)
        if sink_file.format == "json":
            lines = [line for line in data.split(b"\n") if line.strip()]
            return [_JsonLine(line, json.loads(line)) for line in lines]
        if sink_file.format == "avro":
            import fastavro

            return list(fastavro.reader(io.BytesIO(data)))
        rows: list[Any] = pq.read_table(io.BytesIO(data)).to_pylist()
        return rows
    except ImportError as exc:
        raise LakeCleanerError(
            "reading Avro sink files needs fastavro: install lakecleaner with the `connect` extra"
        ) from exc
    except Exception as exc:  # each format's parser raises its own errors
        raise UnreadableSinkFile(
            f"{sink_file.key} is not readable as {sink_file.format}{' (gzip)' if sink_file.gzip else ''}: "
            f"{type(exc).__name__}: {exc}; check the connector's format.class, or pass --format"
        ) from exc


def _parsed(value: Any) -> Any:
    return value.parsed if isinstance(value, _JsonLine) else value


def _value_bytes(value: Any) -> bytes | None:
    if isinstance(value, _JsonLine):
        return None if value.parsed is None else value.raw
    return as_bytes(value)


def _unwrapped(view: Any, name: str, sink_file: SinkFile | None) -> Any:
    """A sidecar's record without the envelope Parquet (keys, headers) and JSON (headers) put it in."""
    view = _parsed(view)
    enveloped = sink_file is not None and (
        sink_file.format == "parquet" or (name == "headers" and sink_file.format == "json")
    )
    if enveloped and isinstance(view, dict) and name in view:
        return view[name]
    return view


def _headers(view: Any) -> list[dict[str, Any]]:
    return [
        {"key": str(h["key"]), "value": None if h.get("value") is None else str(h["value"]).encode()}
        for h in view or []
    ]


def field_of(value: Any, path: str) -> Any:
    """The field at a dotted path of a record (`after.id`); None where the path does not lead."""
    for name in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(name)
    return value


def _timestamp(value: Any, sink_file: SinkFile, path: str) -> int:
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise UnreadableSinkFile(
        f"{sink_file.key}: --timestamp-field {path} is {value!r}, not a time in epoch milliseconds"
    )


def as_bytes(value: Any) -> bytes | None:
    """A record's key or value as the lake's bytes (the rule above)."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return json.dumps(value, separators=(",", ":"), default=_json_default).encode()


def _json_default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


__all__ = ["BundleRecords", "UnreadableSinkFile", "as_bytes", "field_of", "read_bundle"]
