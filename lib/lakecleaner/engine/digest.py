"""A digest of a sequence of record values, the same however the sequence is cut into arrays.

Pass 2 digests the input values of the records it writes (taken from the input, at the offsets
it wrote); the quality gate digests the values of the staged file it reads back from storage.
Equal digests mean the values were written unchanged, without the gate reading every value of
the input a second time. The digest covers each value's length (−1 for a tombstone's null) and
its bytes, in order: BLAKE2b over the lengths and over the bytes, kept apart so that where one
array ends and the next begins does not matter.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pyarrow as pa


class ValueDigest:
    """Accumulates binary arrays of values, in record order."""

    def __init__(self) -> None:
        self._lengths = hashlib.blake2b(digest_size=16)
        self._bytes = hashlib.blake2b(digest_size=16)

    def update(self, values: pa.Array | pa.ChunkedArray) -> ValueDigest:
        """Add `values` (binary) after what was added before."""
        chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
        for chunk in chunks:
            self._update_chunk(chunk)
        return self

    def _update_chunk(self, chunk: pa.Array) -> None:
        if len(chunk) == 0:
            return
        _, offsets_buffer, data = chunk.buffers()
        offsets = np.frombuffer(offsets_buffer, np.int32, len(chunk) + 1, chunk.offset * 4)
        lengths = np.diff(offsets).astype("<i8")
        valid = chunk.is_valid().to_numpy(zero_copy_only=False)
        lengths[~valid] = -1
        self._lengths.update(lengths.tobytes())
        if data is not None and offsets[-1] > offsets[0]:
            self._bytes.update(memoryview(data)[offsets[0] : offsets[-1]])

    def hexdigest(self) -> str:
        return self._lengths.hexdigest() + self._bytes.hexdigest()


def value_digest(values: pa.Array | pa.ChunkedArray) -> str:
    """The digest of one array of values."""
    return ValueDigest().update(values).hexdigest()
