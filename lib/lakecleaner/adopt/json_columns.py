"""Rows as compact JSON, written a column at a time (issue 75).

A Parquet sink file's value is a row (an Avro file's, a record), and its bytes in the lake are
that row as compact JSON with the fields in the schema's order: exactly what
`json.dumps(row, separators=(",", ":"))` writes (`connect_read`'s byte rule). For the types whose
text pyarrow writes the same way — whole numbers, booleans, printable ASCII text, and structs of
those — `compact_json` builds that text with pyarrow's kernels, a column at a time; for anything
else (floats, bytes, times, decimals, lists, maps, text that needs other escapes than `\\"` and
`\\\\`) it raises `NotColumnar` and the caller writes row by row. Both ways give the same bytes,
which re-adoption compares. Avro records become a table typed by their writer schema
(`avro_table`), never by inference.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc


class NotColumnar(Exception):
    """A column whose JSON text pyarrow cannot write the way `json.dumps` does: write row by row."""


def compact_json(table: pa.Table) -> pa.Array:
    """Each row of `table` as `json.dumps(row, separators=(",", ":"))` encodes it, as binary."""
    if table.num_columns == 0:
        raise NotColumnar
    columns = [column.combine_chunks() for column in table.columns]
    try:
        text = _object(table.column_names, columns, table.num_rows)
        return pc.cast(text, pa.binary())
    except (pa.ArrowInvalid, pa.ArrowCapacityError, pa.ArrowNotImplementedError) as exc:
        raise NotColumnar from exc  # e.g. a file whose text passes 2 GiB in one array


def _object(names: list[str], columns: list[pa.Array], rows: int) -> pa.Array:
    """`{"name":value,…}` for each row, the members in the given order, joined in one kernel call."""
    if not columns:
        return pa.repeat(pa.scalar("{}"), rows)
    pieces: list[pa.Array | pa.Scalar] = []
    for n, (name, column) in enumerate(zip(names, columns, strict=True)):
        pieces += [pa.scalar(("{" if n == 0 else ",") + json.dumps(name) + ":"), _text(column)]
    return pc.binary_join_element_wise(*pieces, pa.scalar("}"), "")


def _text(column: pa.Array) -> pa.Array:
    """A column's values as JSON text, `null` where a value is missing."""
    kind = column.type
    if pa.types.is_null(kind):
        return pa.repeat(pa.scalar("null"), len(column))
    if pa.types.is_integer(kind) or pa.types.is_boolean(kind):
        text = pc.cast(column, pa.string())
    elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
        text = _quoted(pc.cast(column, pa.string()))
    elif pa.types.is_struct(kind) and kind.num_fields:
        names = [kind.field(i).name for i in range(kind.num_fields)]
        inner = _object(names, [pc.struct_field(column, i) for i in range(kind.num_fields)], len(column))
        text = pc.if_else(pc.is_valid(column), inner, pa.scalar("null")) if column.null_count else inner
    else:
        raise NotColumnar
    return pc.fill_null(text, "null") if text.null_count else text


def _quoted(column: pa.Array) -> pa.Array:
    """Text as a JSON string, for text `json.dumps` escapes only by a backslash before `\\` and
    `"`: printable ASCII (it writes `\\uXXXX` past ASCII and escapes control characters; DEL,
    which it writes as it is, is refused too: row by row is right for it)."""
    if pc.all(pc.ascii_is_printable(column)).as_py() is False:
        raise NotColumnar
    escaped = pc.replace_substring(pc.replace_substring(column, "\\", "\\\\"), '"', '\\"')
    return pc.binary_join_element_wise(pa.scalar('"'), escaped, pa.scalar('"'), "")


def avro_table(records: Sequence[dict[str, Any]], schema: Any) -> pa.Table | None:
    """Avro records as a table whose rows `compact_json` writes as `json.dumps` writes the records:
    typed by the writer schema, not by what the records hold (a map's keys would become a
    struct's fields); None when the schema has a type outside `_avro_type`'s, or a record does not
    fit it (then the caller writes record by record)."""
    try:
        kind = _avro_type(schema, {})
    except NotColumnar:
        return None
    if not pa.types.is_struct(kind):
        return None
    try:
        return pa.Table.from_pylist(list(records), schema=pa.schema(list(kind)))
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, KeyError):
        return None


#: Avro's primitive types whose values JSON writes as pyarrow's kernels do.
_AVRO_PRIMITIVES = {
    "int": pa.int32(),
    "long": pa.int64(),
    "boolean": pa.bool_(),
    "string": pa.string(),
    "null": pa.null(),
}


def _avro_type(schema: Any, named: dict[str, pa.DataType]) -> pa.DataType:
    """The Arrow type of an Avro (parsed) schema: records as structs, enums as text, a union of
    null and one type as that type; NotColumnar for the rest (floats, bytes, fixed, arrays, maps,
    logical types other than uuid, other unions)."""
    if isinstance(schema, str):
        if schema in _AVRO_PRIMITIVES:
            return _AVRO_PRIMITIVES[schema]
        if schema in named:
            return named[schema]
        raise NotColumnar
    if isinstance(schema, list):
        others = [s for s in schema if s != "null"]
        if len(others) != 1:
            raise NotColumnar
        return _avro_type(others[0], named)
    if not isinstance(schema, dict) or schema.get("logicalType") not in (None, "uuid"):
        raise NotColumnar
    kind = schema.get("type")
    if kind == "record":
        fields = [pa.field(f["name"], _avro_type(f["type"], named)) for f in schema.get("fields", [])]
        if not fields:
            raise NotColumnar
        named[schema["name"]] = struct = pa.struct(fields)
        return struct
    if kind == "enum":
        named[schema["name"]] = pa.string()
        return pa.string()
    return _avro_type(kind, named)


__all__ = ["NotColumnar", "avro_table", "compact_json"]
