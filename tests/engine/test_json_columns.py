"""Rows written as JSON a column at a time give `json.dumps`'s bytes, or refuse (issue 75)."""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakecleaner.adopt.connect_read import as_bytes
from lakecleaner.adopt.json_columns import NotColumnar, avro_table, compact_json

_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)
_LEAVES: list[tuple[pa.DataType, st.SearchStrategy[Any]]] = [
    (pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    (pa.int8(), st.integers(-128, 127)),
    (pa.uint64(), st.integers(0, 2**64 - 1)),
    (pa.bool_(), st.booleans()),
    (pa.string(), _TEXT),
    (pa.string(), st.text(alphabet='ab"\\ {}:,', max_size=6)),
    (pa.float64(), st.floats()),
    (pa.binary(), st.binary(max_size=4)),
]


@st.composite
def _tables(draw: st.DrawFn) -> pa.Table:
    rows = draw(st.integers(1, 6))
    fields = []
    columns = []
    for n in range(draw(st.integers(1, 4))):
        kind, values = draw(st.sampled_from(_LEAVES))
        if draw(st.booleans()):  # a struct of two leaves, a Debezium `after`
            kind2, values2 = draw(st.sampled_from(_LEAVES))
            kind = pa.struct([("id", kind), ("v", kind2)])
            values = st.fixed_dictionaries({"id": st.none() | values, "v": st.none() | values2})
        fields.append(pa.field(f'f{n}"', kind))
        columns.append(pa.array(draw(st.lists(st.none() | values, min_size=rows, max_size=rows)), kind))
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


@settings(max_examples=300, deadline=None)
@given(_tables())
def test_compact_json_writes_what_json_dumps_writes_or_refuses(table: pa.Table) -> None:
    expected = [as_bytes(row) for row in table.to_pylist()]
    try:
        got = compact_json(table).to_pylist()
    except NotColumnar:
        assert _needs_rows(table), table.schema
        return
    assert got == expected


def _needs_rows(table: pa.Table) -> bool:
    """A float or bytes column, or text with a character past ASCII or a control character (which
    `json.dumps` escapes other than by a backslash before it) or DEL: what compact_json refuses."""
    kinds = str(table.schema)
    return "double" in kinds or "binary" in kinds or any(_escaped(row) for row in table.to_pylist())


def _escaped(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_escaped(v) for v in value.values())
    return isinstance(value, str) and any(not " " <= c < "\x7f" for c in value)


def test_text_that_needs_unicode_escapes_is_refused_not_written_otherwise() -> None:
    with pytest.raises(NotColumnar):
        compact_json(pa.table({"name": ["café"]}))
    with pytest.raises(NotColumnar):
        compact_json(pa.table({"name": ["a\nb"]}))
    assert compact_json(pa.table({"name": ['say "hi" \\o/']})).to_pylist() == [b'{"name":"say \\"hi\\" \\\\o/"}']


_AVRO_FIELDS: list[tuple[Any, st.SearchStrategy[Any]]] = [
    ("long", st.integers(-(2**63), 2**63 - 1)),
    ("int", st.integers(-(2**31), 2**31 - 1)),
    ("boolean", st.booleans()),
    ("string", st.text(alphabet='ab"\\ é', max_size=5)),
    ({"type": "enum", "name": "Tier", "symbols": ["GOLD", "SILVER"]}, st.sampled_from(["GOLD", "SILVER"])),
    (["null", "long"], st.none() | st.integers(0, 9)),
    ("double", st.floats(allow_nan=False)),
    ({"type": "map", "values": "long"}, st.dictionaries(st.sampled_from("abc"), st.integers(0, 9), max_size=2)),
    (
        ["null", {"type": "record", "name": "Row", "fields": [{"name": "id", "type": "long"}]}],
        st.none() | st.fixed_dictionaries({"id": st.integers(0, 9)}),
    ),
]


@st.composite
def _avro_files(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    chosen = draw(st.lists(st.sampled_from(range(len(_AVRO_FIELDS))), min_size=1, max_size=4, unique=True))
    schema = {
        "type": "record",
        "name": "Value",
        "fields": [{"name": f"f{n}", "type": _AVRO_FIELDS[n][0]} for n in chosen],
    }
    rows = draw(st.lists(st.fixed_dictionaries({f"f{n}": _AVRO_FIELDS[n][1] for n in chosen}), min_size=1, max_size=5))
    return schema, rows


@settings(max_examples=200, deadline=None)
@given(_avro_files())
def test_avro_records_as_a_table_write_what_they_write_one_by_one(file: tuple[dict[str, Any], list[Any]]) -> None:
    schema, rows = file
    data = io.BytesIO()
    fastavro.writer(data, fastavro.parse_schema(schema), rows)
    reader = fastavro.reader(io.BytesIO(data.getvalue()))
    records = list(reader)
    table = avro_table(records, reader.writer_schema)
    kinds = {json.dumps(f["type"]) for f in schema["fields"]}
    if table is None:  # a map or a double: typed by the schema, never guessed from the records
        assert any("map" in k or "double" in k for k in kinds), kinds
        return
    try:
        got = compact_json(table).to_pylist()
    except NotColumnar:
        assert _needs_rows(table)
        return
    assert got == [as_bytes(r) for r in records]
