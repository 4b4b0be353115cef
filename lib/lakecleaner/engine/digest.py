"""A digest of record columns, the same however the records are cut into arrays.

Pass 2 digests the records the group must hold, taken from the input (`gate_rows.Expected`);
the quality gate digests the staged file it reads back from storage. Equal digests mean the
file holds those records unchanged, without the gate reading the input a second time.

Each column is digested as separate streams of XXH3-128, kept apart so that where one array
ends and the next begins does not matter: for a binary or string column, each value's length
(−1 for a null) and its bytes; for an int64 column, each value (0 for a null) and whether it
is null; for a list of structs (headers), each list's length (−1 for a null) and the streams of
each struct field over the flattened lists.

XXH3-128 rather than a cryptographic hash: the digest guards against a wrong rewrite and a store
that returns other bytes than were written, not against someone forging a file with a colliding
digest (who could as well forge the manifest). Two different record sequences share a digest
with probability about 2^-128; XXH3 hashes at memory speed (about 25 GB/s here, BLAKE2b 1 GB/s),
which the gate pays twice over every rewritten byte.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash


def _hasher() -> xxhash.xxh3_128:
    return xxhash.xxh3_128()


def _lengths(array: pa.Array) -> bytes:
    """Each value's or list's length, −1 for a null."""
    length = pc.list_value_length(array) if pa.types.is_list(array.type) else pc.binary_length(array)
    return np.asarray(pc.fill_null(length, -1).to_numpy(), "<i8").tobytes()


class _ColumnDigest:
    """The streams of one column of `arrow_type`."""

    def __init__(self, arrow_type: pa.DataType) -> None:
        self.type = arrow_type
        self.first, self.second = _hasher(), _hasher()
        self.fields = [_ColumnDigest(f.type) for f in arrow_type.value_type] if pa.types.is_list(arrow_type) else []

    def update(self, array: pa.Array) -> None:
        if len(array) == 0:
            return
        if pa.types.is_list(self.type):
            self.first.update(_lengths(array))
            flat = pc.list_flatten(array)
            for i, child in enumerate(self.fields):
                child.update(flat.field(i))
        elif pa.types.is_binary(self.type) or pa.types.is_string(self.type):
            self.first.update(_lengths(array))
            self._update_bytes(array)
        else:
            values = pc.fill_null(array, 0).to_numpy(zero_copy_only=False)
            self.first.update(np.asarray(values, "<i8").tobytes())
            self.second.update(np.asarray(array.is_valid().to_numpy(zero_copy_only=False), np.uint8).tobytes())

    def _update_bytes(self, array: pa.Array) -> None:
        _, offsets_buffer, data = array.buffers()
        if data is None:
            return
        offsets = np.frombuffer(offsets_buffer, np.int32, len(array) + 1, array.offset * 4)
        if offsets[-1] > offsets[0]:
            self.second.update(memoryview(data)[offsets[0] : offsets[-1]])

    def digests(self) -> list[bytes]:
        return [self.first.digest(), self.second.digest(), *[d for f in self.fields for d in f.digests()]]


class RecordDigest:
    """Accumulates the columns `schema` names of tables of records, in record order."""

    def __init__(self, schema: pa.Schema) -> None:
        self.columns = {f.name: _ColumnDigest(f.type) for f in schema}

    def update(self, table: pa.Table) -> RecordDigest:
        """Add the records of `table` after those added before."""
        for name, column in self.columns.items():
            for chunk in table.column(name).chunks:
                column.update(chunk)
        return self

    def hexdigest(self) -> str:
        total = _hasher()
        for column in self.columns.values():
            for digest in column.digests():
                total.update(digest)
        return total.hexdigest()
