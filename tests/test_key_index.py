"""Issue 79: the key index object (`log.key_index`): an Arrow IPC file of a segment file's rows'
offsets, keys and key hashes, read back as written; an object that is not one, or not the one its
manifest entry describes, is a clear error naming it and the fix; a manifest entry that names
another file's index or other rows is a corrupt manifest, and a manifest with an index is written
as format 3."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pyarrow as pa
import pytest

from lakecleaner.errors import CorruptManifest, CorruptSegment
from lakecleaner.io import ObjectStore
from lakecleaner.lake import Lake
from lakecleaner.log.key_index import (
    KeyIndex,
    decode_key_index,
    encode_key_index,
    key_index_path,
    read_key_index,
    write_key_index,
)
from lakecleaner.log.manifest import Manifest, Segment, SegmentFile

pytestmark = pytest.mark.backends("local", "seaweedfs")

FILE = "segments/00000000000000000010-aa.parquet"


def _rows(offsets: list[int], keys: list[bytes | None] | None = None) -> pa.Table:
    keys = keys if keys is not None else [b"k%d" % o for o in offsets]
    return pa.table(
        {
            "offset": pa.array(offsets, pa.int64()),
            "key": pa.array(keys, pa.binary()),
            "hash": pa.array(np.arange(len(offsets), dtype=np.uint64) * 7),
        }
    )


def test_an_index_reads_back_the_rows_it_was_written_with(lake: Lake) -> None:
    store: ObjectStore = lake.store
    rows = _rows([10, 12, 13, 19])
    entry = write_key_index(store, "t/p/", FILE, rows)
    assert entry.rows == 4 and entry.path.startswith(FILE + ".keys-") and entry.path.endswith(".arrow")
    assert read_key_index(store, "t/p/", entry, (10, 20)).equals(
        rows.cast(read_key_index(store, "t/p/", entry, (10, 20)).schema)
    )

    store.write("t/p/" + entry.path, encode_key_index(_rows([10, 12, 13, 18])))  # a valid index, not this one
    with pytest.raises(CorruptSegment, match=r"not the one its manifest entry describes.*lakecleaner repair"):
        read_key_index(store, "t/p/", entry, (10, 20))
    store.delete("t/p/" + entry.path)
    with pytest.raises(CorruptSegment, match=r"key index .*\.keys-[0-9a-f]{12}\.arrow is missing.*lakecleaner repair"):
        read_key_index(store, "t/p/", entry, (10, 20))


@pytest.mark.parametrize(
    ("blob", "rows", "reason"),
    [
        (b"not arrow at all", 3, "not an Arrow IPC file"),
        (encode_key_index(_rows([10, 11, 12])), 4, "3 rows, the file 4"),
        (encode_key_index(_rows([10, 12, 11])), 3, "offsets are not increasing"),
        (encode_key_index(_rows([10, 11, 20])), 3, "offsets are not increasing inside the file's \\[10, 20\\)"),
        (encode_key_index(_rows([9, 11, 12])), 3, "offsets are not increasing"),
    ],
)
def test_a_damaged_index_is_corrupt_naming_it_and_the_fix(blob: bytes, rows: int, reason: str) -> None:
    with pytest.raises(CorruptSegment, match=rf"key index s3://b/k is corrupt \(.*{reason}.*lakecleaner repair"):
        decode_key_index(blob, rows, (10, 20), "s3://b/k")


def test_an_index_with_other_columns_or_a_row_without_a_key_is_corrupt() -> None:
    import pyarrow.ipc as ipc

    def raw(table: pa.Table) -> bytes:
        sink = pa.BufferOutputStream()
        with ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        return bytes(sink.getvalue())

    with pytest.raises(CorruptSegment, match=r"its columns are \['offset', 'key'\]"):
        decode_key_index(raw(_rows([10]).select(["offset", "key"])), 1, (10, 20), "k")
    nullable = pa.schema([pa.field(f.name, f.type) for f in _rows([10]).schema])
    with pytest.raises(CorruptSegment, match="columns are"):  # nullable columns are not the index's
        decode_key_index(raw(_rows([10, 11], [b"a", None]).cast(nullable)), 2, (10, 20), "k")


def _manifest(index: KeyIndex) -> Manifest:
    file = SegmentFile(FILE, 10, 13, 3, 100, key_index=index)
    segment = Segment("s0", 10, 13, (file,), 3, 100, 1, 1, 1, True)
    return Manifest("t", 0, 1, 10, 13, None, (segment,))


def test_a_manifest_with_an_index_round_trips_and_names_another_files_index_or_rows_as_corrupt() -> None:
    good = KeyIndex(key_index_path(FILE), 999, 1234, 3)
    data = json.dumps(_manifest(good).to_dict()).encode()
    assert Manifest.from_json(data, "m").segments[0].files[0].key_index == good
    assert json.loads(data)["format_version"] == 3
    assert good.path in _manifest(good).live_paths()
    for bad in (
        dataclasses.replace(good, path=key_index_path("segments/00000000000000000010-bb.parquet")),
        dataclasses.replace(good, rows=2),
        dataclasses.replace(good, path="segments/../x.parquet.keys-0123456789ab.arrow"),
    ):
        with pytest.raises(CorruptManifest, match="key index"):
            Manifest.from_json(json.dumps(_manifest(bad).to_dict()).encode(), "m")
