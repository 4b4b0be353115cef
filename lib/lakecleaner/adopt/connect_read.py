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

Change events (Debezium's envelope, issue 75): a key field under `after` (`after.id`,
`payload.after.id` with schemas) is read from `before` when `after` is null, and an event whose
`op` (beside `after`) is `d` becomes a tombstone for its key on a compacted topic, unless told to
keep it (`deletes: keep`) — `ChangeEvents`.

JSON files are parsed by pyarrow's JSON reader, the key, `op` and timestamp fields taken as
columns and keys encoded a column at a time; a file it cannot take as columns (a line that is no
object, a field whose type changes, a key that is neither text nor a whole number) is read line
by line instead, with the same result, and a line that does not parse is named by its number.
Parquet files are read as columns the same way, their rows written as JSON by `compact_json`
where every column's type allows, else row by row. Avro files are read record by record
(fastavro's reader yields records; no columnar Avro reader is among the dependencies).
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

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
import pyarrow.parquet as pq

from lakecleaner.adopt.connect_names import SinkFile
from lakecleaner.adopt.connect_plan import Bundle
from lakecleaner.adopt.json_columns import NotColumnar, avro_table, compact_json
from lakecleaner.config import LONG_MAX
from lakecleaner.errors import LakeCleanerError
from lakecleaner.io import ObjectStore
from lakecleaner.log.records import HEADER_TYPE


class UnreadableSinkFile(LakeCleanerError):
    """A sink file that does not parse as its format says, or whose sidecars do not match it."""


@dataclass(frozen=True)
class ChangeEvents:
    """How a sink's values are read: the dotted field holding a record's key (None: keys come from
    `.keys` sidecars, or there are none), the one holding its timestamp, whether a change event that
    deletes becomes a tombstone (`tombstones`: a compacted topic without `deletes: keep`), and
    whether every record must have a key (a compacted topic)."""

    key_field: str | None = None
    timestamp_field: str | None = None
    tombstones: bool = False
    require_keys: bool = False

    @property
    def _envelope(self) -> tuple[list[str], list[str]] | None:
        """The key field split at its `after` step: (the path to the envelope, the path within it)."""
        parts = (self.key_field or "").split(".")
        if "after" not in parts[:-1]:
            return None
        at = len(parts) - 1 - parts[::-1].index("after")
        return parts[:at], parts[at + 1 :]

    @property
    def before_field(self) -> str | None:
        """Where a delete event holds its key: the key field with `after` as `before`."""
        envelope = self._envelope
        return None if envelope is None else ".".join([*envelope[0], "before", *envelope[1]])

    @property
    def op_field(self) -> str | None:
        """The event's `op`, beside `after`."""
        envelope = self._envelope
        return None if envelope is None else ".".join([*envelope[0], "op"])


@dataclass(frozen=True)
class BundleRecords:
    """One bundle's records, in file order, as columns."""

    keys: pa.Array
    values: pa.Array
    headers: pa.Array
    timestamps: pa.Array

    def __len__(self) -> int:
        return len(self.values)


def read_bundle(store: ObjectStore, bundle: Bundle, events: ChangeEvents) -> BundleRecords:
    """The bundle's records: values from its value file (none in a tombstone folder's), keys from
    its keys sidecar or the key field of the value, headers from its headers sidecar."""
    main = bundle.main
    if main.tombstones:
        keys_rows = _rows(store, bundle.keys)
        count = len(keys_rows)
        read = _Values(pa.nulls(count, pa.binary()), pa.nulls(count, pa.binary()), None)
    elif main.format == "json":
        read = _json_values(_data(store, main), main, events)
    elif main.format == "parquet":
        read = _table_values(_parquet_table(_data(store, main), main), main, events)
    else:
        read = _avro_values(_data(store, main), main, events)
    count = len(read.values)
    if bundle.keys is not None and not main.tombstones:
        keys_rows = _rows(store, bundle.keys)
    keys = (
        pa.array([as_bytes(_unwrapped(k, "key", bundle.keys)) for k in keys_rows], pa.binary())
        if bundle.keys is not None
        else read.keys
    )
    headers = (
        pa.array(
            [_headers(_unwrapped(h, "headers", bundle.headers)) for h in _rows(store, bundle.headers)], HEADER_TYPE
        )
        if bundle.headers is not None
        else _no_headers(count)
    )
    stamp = pa.scalar(main.mtime_ms, pa.int64())
    timestamps = read.timestamps if read.timestamps is not None else pa.repeat(stamp, count)
    for name, got in (("keys", keys), ("headers", headers)):
        if len(got) != count:
            raise UnreadableSinkFile(
                f"{main.key}: its {name} hold {len(got)} records and the file {count}; the sink writes "
                "one of each per record: re-run the connector for this range, or move the file aside"
            )
    if events.require_keys and keys.null_count:
        line = pc.index(pc.is_null(keys), True).as_py() + 1
        raise UnreadableSinkFile(
            f"{main.key}: record {line} has no key ({_key_source(bundle, events)}), and the topic is compacted: "
            "every record needs one; fix the connector's keys, or move the file aside"
        )
    return BundleRecords(keys, read.values, headers, timestamps)


def _no_headers(count: int) -> pa.Array:
    """`count` records' empty header lists."""
    empty = pa.array([], HEADER_TYPE.value_type)
    return pa.ListArray.from_arrays(pa.array(np.zeros(count + 1, np.int32)), empty, type=HEADER_TYPE)


def _key_source(bundle: Bundle, events: ChangeEvents) -> str:
    if bundle.keys is not None:
        return f"its key in {bundle.keys.key} is null"
    if events.key_field is None:
        return "the sink stored no keys"
    before = f" nor {events.before_field}" if events.before_field else ""
    return f"neither {events.key_field}{before} holds one"


@dataclass(frozen=True)
class _Values:
    """What a value file gives: values, keys (from a field of the value) and timestamps (None: the file's time)."""

    values: pa.Array
    keys: pa.Array
    timestamps: pa.Array | None


def _json_values(data: bytes, sink_file: SinkFile, events: ChangeEvents) -> _Values:
    """A JSON lines file's values as written, its keys and timestamps: as columns when pyarrow can,
    else line by line."""
    try:
        return _json_columns(data if data.endswith(b"\n") or not data else data + b"\n", events)
    except NotColumnar:
        lines = [line for line in data.split(b"\n") if line.strip()]
        return _row_values([_json_line(line, n, sink_file) for n, line in enumerate(lines, 1)], sink_file, events)


def _json_columns(body: bytes, events: ChangeEvents) -> _Values:
    """`_json_values` as columns, for a body of non-empty lines, each ending with a newline: the
    values are the lines themselves, cut out of the body without a copy per line."""
    ends = np.flatnonzero(np.frombuffer(body, np.uint8) == ord("\n"))
    lengths = np.diff(ends, prepend=-1) - 1
    if not len(ends) or not lengths.all() or len(body) >= 1 << 31:
        raise NotColumnar  # no line, a blank one, or too large for one array: line by line
    schema = _fields_schema(body[: ends[min(len(ends), _SAMPLE_LINES) - 1]], events)
    options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore") if schema else None
    try:
        table = pj.read_json(io.BytesIO(body), parse_options=options)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise NotColumnar from exc
    count = len(ends)
    if table.num_rows != count:
        raise NotColumnar
    offsets = np.zeros(count + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    joined = body.replace(b"\n", b"")  # a JSON line holds no raw newline
    values = pa.Array.from_buffers(pa.binary(), count, [None, pa.py_buffer(offsets), pa.py_buffer(joined)])
    return _fields_as_columns(table, values, events)


def _table_values(table: pa.Table, sink_file: SinkFile, events: ChangeEvents) -> _Values:
    """A Parquet or Avro file's rows as compact JSON, its keys and timestamps: as columns when
    every column is of a type `compact_json` writes, else row by row (`_row_values`)."""
    try:
        return _fields_as_columns(table, compact_json(table), events)
    except NotColumnar:
        return _row_values(table.to_pylist(), sink_file, events)


def _avro_values(data: bytes, sink_file: SinkFile, events: ChangeEvents) -> _Values:
    """An Avro file's records: as a table (`avro_table`) when its writer schema has only types
    `compact_json` writes, else record by record."""
    records, schema = _avro_records(data, sink_file)
    table = avro_table(records, schema)
    if table is None:
        return _row_values(records, sink_file, events)
    return _table_values(table, sink_file, events)


def _fields_as_columns(table: pa.Table, values: pa.Array, events: ChangeEvents) -> _Values:
    """The keys, tombstones and timestamps the change-event fields of `table` give, a column at a
    time; NotColumnar where a field's type needs reading record by record (to name the record)."""
    count = len(values)
    keys: pa.Array = pa.nulls(count, pa.binary())
    if events.key_field is not None:
        keys = _key_bytes(_field(table, events.key_field))
        if events.before_field is not None and keys.null_count:
            keys = pc.coalesce(keys, _key_bytes(_field(table, events.before_field)))
    if events.tombstones and events.op_field is not None:
        op = _field(table, events.op_field)
        if not (pa.types.is_string(op.type) or pa.types.is_null(op.type)):
            raise NotColumnar
        deletes = pc.fill_null(pc.equal(op, "d"), False)
        values = pc.if_else(deletes, pa.nulls(count, pa.binary()), values)
    timestamps = None
    if events.timestamp_field is not None:
        stamps = _field(table, events.timestamp_field)
        if not pa.types.is_integer(stamps.type) or stamps.null_count or pc.min(stamps).as_py() < 0:
            raise NotColumnar  # record by record, to name the record
        timestamps = pc.cast(stamps, pa.int64())
    return _Values(values, keys, timestamps)


#: Lines read to learn the types of the fields the columns take (`_fields_schema`).
_SAMPLE_LINES = 20
_TYPES: dict[type, pa.DataType] = {int: pa.int64(), str: pa.string()}


def _fields_schema(sample: bytes, events: ChangeEvents) -> pa.Schema | None:
    """A schema of only the fields the columns take (key, its `before` twin, `op`, timestamp), their
    types learnt from the first lines, so that pyarrow parses nothing else; None (every field
    parsed, types inferred) when a field has no value there that is text or a whole number."""
    paths = [p for p in (events.key_field, events.before_field, events.op_field, events.timestamp_field) if p]
    if not paths:
        return None
    try:
        rows = [json.loads(line) for line in sample.split(b"\n") if line.strip()]
    except ValueError:
        return None
    tree: dict[str, Any] = {}
    for path in paths:
        found = next((v for v in (field_of(r, path) for r in rows) if v is not None), None)
        kind = _TYPES.get(type(found))
        if kind is None:
            return None
        *steps, leaf = path.split(".")
        node = tree
        for step in steps:
            node = node.setdefault(step, {})
            if not isinstance(node, dict):
                return None
        node[leaf] = kind
    return pa.schema([pa.field(name, _arrow_type(value)) for name, value in tree.items()])


def _arrow_type(node: dict[str, Any] | pa.DataType) -> pa.DataType:
    if isinstance(node, pa.DataType):
        return node
    return pa.struct([pa.field(name, _arrow_type(value)) for name, value in node.items()])


def _field(table: pa.Table, path: str) -> pa.Array:
    """The column at a dotted path of a table of JSON objects (nulls where the path does not lead)."""
    first, *rest = path.split(".")
    if first not in table.column_names:
        return pa.nulls(table.num_rows)
    column = table.column(first).combine_chunks()
    for name in rest:
        if pa.types.is_null(column.type):
            return column
        if not pa.types.is_struct(column.type):
            raise NotColumnar
        if column.type.get_field_index(name) < 0:
            return pa.nulls(len(column))
        column = pc.struct_field(column, name)
    return column


def _key_bytes(column: pa.Array) -> pa.Array:
    """Keys as the lake's bytes (the rule above), a column at a time: text as its UTF-8, a whole
    number as its digits (what compact JSON writes)."""
    if pa.types.is_null(column.type):
        return pa.nulls(len(column), pa.binary())
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        return pc.cast(column, pa.binary())
    if pa.types.is_integer(column.type):
        return pc.cast(pc.cast(column, pa.string()), pa.binary())
    raise NotColumnar


@dataclass(frozen=True)
class _JsonLine:
    """A JSON file's line: its text as written, and what it parses to."""

    raw: bytes
    parsed: Any


def _json_line(line: bytes, number: int, sink_file: SinkFile) -> _JsonLine:
    try:
        return _JsonLine(line, json.loads(line))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        where = f", column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else ""
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "not UTF-8"
        raise UnreadableSinkFile(
            f"{sink_file.key}: line {number}{where} is not JSON ({reason}); re-run the connector for this range, "
            "or move the file aside"
        ) from None


def _row_values(rows: Sequence[Any], sink_file: SinkFile, events: ChangeEvents) -> _Values:
    """Values, keys and timestamps of a file's records read one by one (Avro, Parquet, and JSON
    pyarrow cannot take as columns)."""
    parsed = [_parsed(v) for v in rows]
    values = [_value_bytes(v) for v in rows]
    keys: list[bytes | None] = [None] * len(rows)
    if events.key_field is not None:
        keys = [as_bytes(field_of(v, events.key_field)) for v in parsed]
        before = events.before_field
        if before is not None:
            keys = [k if k is not None else as_bytes(field_of(v, before)) for k, v in zip(keys, parsed, strict=True)]
    if events.tombstones and events.op_field is not None:
        op = events.op_field
        values = [None if field_of(v, op) == "d" else value for v, value in zip(parsed, values, strict=True)]
    timestamps = None
    if events.timestamp_field is not None:
        field = events.timestamp_field
        stamps = [_timestamp(field_of(v, field), sink_file, field, n) for n, v in enumerate(parsed, 1)]
        timestamps = pa.array(stamps, pa.int64())
    return _Values(pa.array(values, pa.binary()), pa.array(keys, pa.binary()), timestamps)


def _data(store: ObjectStore, sink_file: SinkFile) -> bytes:
    data = store.read(sink_file.key)
    if not sink_file.gzip:
        return data
    try:
        return gzip.decompress(data)
    except (OSError, EOFError) as exc:
        raise UnreadableSinkFile(
            f"{sink_file.key} is not readable as gzip: {exc}; re-run the connector for this range, or move the "
            "file aside"
        ) from None


def _rows(store: ObjectStore, sink_file: SinkFile | None) -> Sequence[Any]:
    """A file's records one by one (a JSON file's lines with their text)."""
    assert sink_file is not None
    data = _data(store, sink_file)
    if sink_file.format == "json":
        lines = [line for line in data.split(b"\n") if line.strip()]
        return [_json_line(line, n, sink_file) for n, line in enumerate(lines, 1)]
    if sink_file.format == "parquet":
        rows: list[Any] = _parquet_table(data, sink_file).to_pylist()
        return rows
    records, _ = _avro_records(data, sink_file)
    return records


def _avro_records(data: bytes, sink_file: SinkFile) -> tuple[list[Any], Any]:
    """An Avro file's records, and the schema they were written with."""
    try:
        import fastavro
    except ImportError as exc:
        raise LakeCleanerError(
            "reading Avro sink files needs fastavro: install lakecleaner with the `connect` extra"
        ) from exc
    try:
        reader = fastavro.reader(io.BytesIO(data))
        return list(reader), reader.writer_schema
    except Exception as exc:  # fastavro raises errors of its own
        raise _unreadable(sink_file, exc) from exc


def _parquet_table(data: bytes, sink_file: SinkFile) -> pa.Table:
    try:
        return pq.read_table(io.BytesIO(data))
    except Exception as exc:  # pyarrow raises several kinds for a damaged file
        raise _unreadable(sink_file, exc) from exc


def _unreadable(sink_file: SinkFile, exc: Exception) -> UnreadableSinkFile:
    return UnreadableSinkFile(
        f"{sink_file.key} is not readable as {sink_file.format}: {type(exc).__name__}: {exc}; check the "
        "connector's format.class, or pass --format"
    )


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


def _timestamp(value: Any, sink_file: SinkFile, path: str, record: int) -> int:
    """A record's timestamp field as epoch ms: a time, or a whole number in [0, 2^63 - 1]."""
    if isinstance(value, datetime.datetime):
        value = int(value.timestamp() * 1000)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= LONG_MAX:
        return value
    raise UnreadableSinkFile(
        f"{sink_file.key}: record {record}: --timestamp-field {path} is {str(value)[:40]}, not a time in epoch "
        f"milliseconds from 0 to {LONG_MAX}; fix the field, or adopt without --timestamp-field (the file's time)"
    )


def as_bytes(value: Any) -> bytes | None:
    """A record's key or value as the lake's bytes (the rule above)."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return _ENCODER.encode(value).encode()


def _json_default(value: Any) -> Any:
    """What `as_bytes` writes for values JSON has no type for."""
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


#: `json.dumps(value, separators=(",", ":"), default=_json_default)`, built once (dumps builds one a call).
_ENCODER = json.JSONEncoder(separators=(",", ":"), default=_json_default)

__all__ = ["BundleRecords", "ChangeEvents", "UnreadableSinkFile", "as_bytes", "field_of", "read_bundle"]
