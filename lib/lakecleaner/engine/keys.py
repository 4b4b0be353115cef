"""Per-key arithmetic on Arrow tables, with numpy: keys numbered, "the highest per key", and
membership in a sorted set of offsets."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

LOWEST = np.iinfo(np.int64).min


def key_codes(keys: pa.Array | pa.ChunkedArray) -> tuple[NDArray[np.int64], int]:
    """(each row's key number, how many distinct keys); equal keys get equal numbers."""
    encoded = pc.dictionary_encode(keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys)
    return np.asarray(encoded.indices.to_numpy(), np.int64), len(encoded.dictionary)


def is_highest(codes: NDArray[np.int64], values: NDArray[np.int64], keys: int) -> NDArray[np.bool_]:
    """Whether each row holds the highest of `values` among the rows of its key (`LOWEST`
    never wins unless the key has nothing higher)."""
    best = np.full(keys, LOWEST, np.int64)
    np.maximum.at(best, codes, values)
    return np.asarray(values == best[codes], bool)


def in_sorted(values: NDArray[np.int64], members: NDArray[np.int64]) -> NDArray[np.bool_]:
    """Whether each of `values` is one of `members` (sorted ascending): through a bitmap of the
    members' range when it is no wider than a few times the values (offsets of a segment
    file are dense), else by binary search."""
    if members.size == 0 or values.size == 0:
        return np.zeros(values.size, bool)
    low, high = int(members[0]), int(members[-1])
    if high - low < 4 * (values.size + members.size):
        bitmap = np.zeros(high - low + 1, bool)
        bitmap[members - low] = True
        inside = (values >= low) & (values <= high)
        found = np.zeros(values.size, bool)
        found[inside] = bitmap[values[inside] - low]
        return found
    at = np.minimum(np.searchsorted(members, values), members.size - 1)
    return np.asarray(members[at] == values, bool)
