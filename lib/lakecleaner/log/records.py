"""Records and their Arrow/Parquet schema (DESIGN section 2).

The input of an append is a batch without offsets (`BATCH_SCHEMA`): key, value, timestamp,
headers. The log assigns offsets and writes `SEGMENT_SCHEMA` rows, sorted by offset.
A null value is a tombstone; `delete_horizon_ms` is set on a tombstone by the first
cleaning pass that keeps it (KIP-534).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

HEADER_TYPE = pa.list_(pa.struct([pa.field("key", pa.string(), nullable=False), pa.field("value", pa.binary())]))

BATCH_SCHEMA = pa.schema(
    [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("timestamp", pa.int64(), nullable=False),
        pa.field("headers", HEADER_TYPE),
    ]
)

SEGMENT_SCHEMA = pa.schema(
    [
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("timestamp", pa.int64(), nullable=False),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("headers", HEADER_TYPE),
        pa.field("delete_horizon_ms", pa.int64()),
    ]
)


@dataclass(frozen=True)
class Record:
    """One record, as a producer sends it or a consumer reads it (offset None before append)."""

    key: bytes | None
    value: bytes | None
    timestamp: int | None = None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    offset: int | None = None
    delete_horizon_ms: int | None = None

    @property
    def is_tombstone(self) -> bool:
        return self.value is None


def encode_version(version: int) -> bytes:
    """A KIP-280 header version: 8 bytes, big-endian signed long."""
    return struct.pack(">q", version)


def decode_version(raw: bytes | None) -> int | None:
    """The version carried by a header value, or None when it is not exactly 8 bytes."""
    if raw is None or len(raw) != 8:
        return None
    return int(struct.unpack(">q", raw)[0])


def records_to_batch(records: Sequence[Record] | Iterable[Record], default_timestamp: int) -> pa.Table:
    """An append batch (BATCH_SCHEMA) from Records; records without a timestamp get `default_timestamp`."""
    recs = list(records)
    return pa.table(
        {
            "key": pa.array([r.key for r in recs], pa.binary()),
            "value": pa.array([r.value for r in recs], pa.binary()),
            "timestamp": pa.array(
                [default_timestamp if r.timestamp is None else r.timestamp for r in recs], pa.int64()
            ),
            "headers": pa.array([[{"key": k, "value": v} for k, v in r.headers] for r in recs], HEADER_TYPE),
        },
        schema=BATCH_SCHEMA,
    )


def conform_batch(table: pa.Table, default_timestamp: int) -> pa.Table:
    """Cast a user table to BATCH_SCHEMA: missing value/headers/timestamp columns are filled in.

    Raises ValueError naming the column when a column cannot be converted.
    """
    n = table.num_rows
    columns: dict[str, pa.Array | pa.ChunkedArray] = {}
    for f in BATCH_SCHEMA:
        if f.name in table.column_names:
            col = table.column(f.name)
            try:
                col = col.cast(f.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise ValueError(f"column {f.name!r} of type {col.type} cannot be read as {f.type}: {exc}") from exc
            if f.name == "timestamp" and col.null_count:
                col = pc.fill_null(col, default_timestamp)
            columns[f.name] = col
        elif f.name == "timestamp":
            columns[f.name] = pa.array([default_timestamp] * n, pa.int64())
        elif f.name == "key":
            raise ValueError("an append batch needs a 'key' column (it may hold nulls on delete-policy topics)")
        else:
            columns[f.name] = pa.nulls(n, f.type)
    extra = set(table.column_names) - set(BATCH_SCHEMA.names)
    if extra:
        raise ValueError(f"unknown columns {sorted(extra)} in append batch; expected {BATCH_SCHEMA.names}")
    return pa.table(columns, schema=BATCH_SCHEMA)


def table_to_records(table: pa.Table) -> list[Record]:
    """Records from a SEGMENT_SCHEMA table (for consumers and tests)."""
    out = []
    for row in table.to_pylist():
        out.append(
            Record(
                key=row["key"],
                value=row["value"],
                timestamp=row["timestamp"],
                headers=tuple((h["key"], h["value"]) for h in (row["headers"] or [])),
                offset=row["offset"],
                delete_horizon_ms=row["delete_horizon_ms"],
            )
        )
    return out
