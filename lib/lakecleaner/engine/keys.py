"""Per-key arithmetic on Arrow tables, with numpy: keys numbered and hashed, and membership in a
sorted set of offsets."""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray


def bool_mask(values: pa.Array | pa.ChunkedArray) -> NDArray[np.bool_]:
    """A boolean Arrow column as a numpy mask (a null is false)."""
    return np.asarray(values.to_numpy(zero_copy_only=False), bool)


def rows_where(table: pa.Table, mask: NDArray[np.bool_]) -> pa.Table:
    """The rows of `table` where `mask` holds, in order. Taken by index: Arrow's filter with a
    boolean mask is many times slower on these tables (28x with the headers column, measured)."""
    if mask.all():
        return table
    return table.take(pa.array(np.flatnonzero(mask)))


def key_codes(keys: pa.Array | pa.ChunkedArray) -> tuple[NDArray[np.int64], int]:
    """(each row's key number, how many distinct keys); equal keys get equal numbers."""
    encoded = pc.dictionary_encode(keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys)
    return np.asarray(encoded.indices.to_numpy(), np.int64), len(encoded.dictionary)


def key_order(
    keys: pa.Array | pa.ChunkedArray, hashes: NDArray[np.uint64], ranks: list[NDArray[np.int64]]
) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """Rows (of non-null `keys`) ordered so that each key's rows are together, by ascending
    `ranks` (most significant first) within a key; and for each row of that order after the
    first, whether it holds the same key as the row before it. Rows are sorted by `hashes`
    (`key_hash`) and the keys of neighbours then compared exactly; should two different keys
    share a hash, the rows are ordered by exact key numbers instead. Sorting 64-bit numbers
    takes less time and memory than hashing the keys themselves into a table. Only neighbours
    with equal hashes have their keys compared (different hashes are different keys)."""
    order = np.lexsort((*reversed(ranks), hashes))
    if order.size < 2:
        return order, np.zeros(0, bool)
    ordered_hashes = hashes[order]
    same_hash = ordered_hashes[1:] == ordered_hashes[:-1]
    pairs = np.flatnonzero(same_hash)
    same_key = np.zeros(same_hash.size, bool)
    same_key[pairs] = np.asarray(
        pc.equal(keys.take(pa.array(order[pairs + 1])), keys.take(pa.array(order[pairs]))).to_numpy(
            zero_copy_only=False
        ),
        bool,
    )
    if np.any(same_hash & ~same_key):  # two keys, one hash: number the keys exactly
        codes, _ = key_codes(keys)
        return key_order(keys, codes.astype(np.uint64), ranks)
    return order, same_hash


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


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xFF51AFD7ED558CCD)
_MIX2 = np.uint64(0xC4CEB9FE1A85EC53)
_SHIFT = np.uint64(33)


def _fmix(h: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """MurmurHash3's 64-bit finaliser, in place: every input bit affects every output bit."""
    h ^= h >> _SHIFT
    h *= _MIX1
    h ^= h >> _SHIFT
    h *= _MIX2
    h ^= h >> _SHIFT
    return h


def _hash_rows(rows: NDArray[np.uint8], length: int) -> NDArray[np.uint64]:
    """The hash of keys of one `length`, one per row of `rows` (n x length bytes): the key's
    8-byte words, zero-padded, folded through the finaliser after the length."""
    width = -(-length // 8) * 8
    padded = np.zeros((rows.shape[0], max(width, 8)), np.uint8)
    padded[:, :length] = rows
    words = padded.view(np.uint64)
    with np.errstate(over="ignore"):
        h = np.full(rows.shape[0], np.uint64(length) * _GOLDEN, np.uint64)
        for column in range(words.shape[1]):
            h = _fmix(h ^ words[:, column])
    return h


def key_hash(keys: pa.Array | pa.ChunkedArray) -> NDArray[np.uint64]:
    """A 64-bit hash of each key (binary; a null key hashes like the empty key), the same for
    equal keys wherever they are stored. It spreads keys over buckets; it never decides that two
    keys are equal. Keys are hashed a length at a time, as fixed-width rows, so no Python runs
    per key."""
    array = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
    array = array.cast(pa.binary()) if array.type != pa.binary() else array
    n = len(array)
    out = np.zeros(n, np.uint64)
    if n == 0:
        return out
    offsets = np.frombuffer(array.buffers()[1], np.int32, n + 1, array.offset * 4).astype(np.int64)
    data_buffer = array.buffers()[2]
    data = np.frombuffer(data_buffer, np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    lengths = np.diff(offsets)
    if np.all(lengths == lengths[0]):  # one width, stored back to back: the buffer is the matrix
        width = int(lengths[0])
        rows = data[offsets[0] : offsets[0] + n * width].reshape(n, width)
        return _hash_rows(rows, width)
    order = stable_order(lengths, int(lengths.max()) + 1)
    out[order] = _hash_sorted(array.take(pa.array(order)), lengths[order])
    return out


def stable_order(values: NDArray[np.integer], bound: int) -> NDArray[np.intp]:
    """The indices that sort `values` (non-negative, below `bound`), equal values in their order:
    numpy radix-sorts 16-bit numbers, so values below 2^16 are sorted as such."""
    return np.argsort(values.astype(np.uint16) if bound <= 1 << 16 else values, kind="stable")


def _hash_sorted(array: pa.BinaryArray, lengths: NDArray[np.int64]) -> NDArray[np.uint64]:
    """`key_hash` of keys in ascending order of length (`lengths`): Arrow's take laid each
    length's keys back to back, so each is a matrix hashed at once. (Gathering each length's keys
    by a numpy index per byte took 3-5 times as long for keys of 8 to 300 bytes, and 8 bytes of
    index per key byte.)"""
    n = len(array)
    offsets = np.frombuffer(array.buffers()[1], np.int32, n + 1, array.offset * 4)
    data_buffer = array.buffers()[2]
    data = np.frombuffer(data_buffer, np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    cuts = [0, *(np.flatnonzero(np.diff(lengths)) + 1).tolist(), n]
    hashes = np.empty(n, np.uint64)
    for low, high in itertools.pairwise(cuts):
        width = int(lengths[low])
        hashes[low:high] = _hash_rows(data[offsets[low] : offsets[high]].reshape(high - low, width), width)
    return hashes


def key_buckets(hashes: NDArray[np.uint64], buckets: int) -> NDArray[np.uint64]:
    """The bucket, of `buckets`, each key falls in, from its `key_hash`: the hash modulo the count
    (pass 1's scatter step and the gate's key-bucket tasks split keys by this one rule)."""
    return hashes % np.uint64(buckets)
