"""A set of offsets in a range: how winning and expected offsets travel between the driver and
the tasks, compressed, in whichever of two forms keeps memory proportional to the members:

- a bitmap, one bit per offset of [low, high), when the members are dense (the range is at most
  eight offsets a member): a partition range of 100M offsets is 12.5 MB before compression
  however many of its records win, and a set is built, joined and cut a bit per offset too
  (a byte per offset of a whole partition was 100 MB held by the driver for each step);
- the members' gaps (8 bytes each) when they are sparse: the cleaned section of a compacted topic
  holds its keys' latest records spread over every offset the topic ever had (ten million keys
  over a billion offsets), where a bitmap, or any step that allocates per offset of the range,
  would cost more memory than the offset map the task is bounded by
  (log.cleaner.dedupe.buffer.size).

A bitmap is LZ4-compressed (Arrow's codec): its bits are mostly as random as the winners spread
over the range, which zlib spends 8.7 ms on per 344 KB (a partition of 2.75M offsets, 40% of them
members) to save 2%, where LZ4 takes 0.12 ms; at 90% members zlib keeps 58% of the bytes and LZ4
87%, at 99.9% both about 4%. A partition's task makes, cuts and lists its winners in a few such
steps (`recopy.group_tasks`). The gaps are zlib-compressed as one stream, decompressed a slice at
a time (`_summed_gaps`).

Sets of one range are joined a set at a time (`Members.join`: pass 1's key buckets hold disjoint
winners, read back one after another), and a set is cut into the sets of its groups with one
decompression (`split`).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

_LEVEL = 1
_BITMAP_CODEC = pa.Codec("lz4")
_V = TypeVar("_V", bound=np.generic)
#: The widest range, in offsets a member, that a set keeps as a bitmap.
DENSE_SPAN = 8
#: The widest range, in offsets an expected member, that `Members` gathers in a bitmap: a bit per
#: offset is then at most the 8 bytes a member that a list of them takes, and a list is copied
#: once more to be sorted (a key bucket's winners, 1.4M over 100M offsets: 12.5 MB, where the
#: list and its sorted copy held 22 MB).
GATHER_SPAN = 64


@dataclass(frozen=True)
class OffsetSet:
    """The offsets of [low, high) that are members: `count` of them, as a bitmap or as gaps."""

    low: int
    high: int
    count: int
    packed: bytes
    bitmap: bool

    @staticmethod
    def of(offsets: NDArray[np.int64], low: int, high: int) -> OffsetSet:
        """The set of `offsets` (each in [low, high), in any order)."""
        members = Members(low, high, offsets.size)
        members.add(offsets)
        return members.result()

    def offsets(self) -> NDArray[np.int64]:
        """The members, ascending."""
        return np.concatenate([np.zeros(0, np.int64), *self.slices()])

    def slices(self) -> Iterator[NDArray[np.int64]]:
        """The members, ascending, a slice at a time: a bitmap's listed `_LIST_BYTES` of bits at a
        time, gaps decompressed and summed `_GAPS_AT_ONCE` at a time, so that a reader that takes
        them a slice at a time never holds them all (joining a key bucket's 1.47M winners: two
        12 MB arrays, the gaps and their sums, before)."""
        if self.bitmap:
            yield from _listed_slices(self._packed_bits(), self.low)
        else:
            yield from _summed_gaps(self.packed, self.low)

    def __len__(self) -> int:
        return self.count

    def split(self, bounds: Sequence[tuple[int, int]]) -> list[OffsetSet]:
        """The members in each [low, high) of `bounds` (each inside this set's range), as sets of
        those ranges; the set is decompressed once."""
        if self.bitmap:
            packed = self._packed_bits()
            return [
                _from_packed(_bit_slice(packed, low - self.low, high - self.low), low, high) for low, high in bounds
            ]
        members = self.offsets()
        cuts = [(np.searchsorted(members, low), np.searchsorted(members, high)) for low, high in bounds]
        return [_from_sorted(members[a:b], low, high) for (a, b), (low, high) in zip(cuts, bounds, strict=True)]

    def _packed_bits(self) -> NDArray[np.uint8]:
        """The bitmap, a bit per offset from `low` (`np.packbits`' order)."""
        size = _bytes_for(self.high - self.low)
        return np.frombuffer(_BITMAP_CODEC.decompress(self.packed, decompressed_size=size, asbytes=True), np.uint8)


class Members:
    """Offsets of [low, high), at most `expected` of them, gathered a batch or a set at a time: a
    bit per offset of a range at most `GATHER_SPAN` offsets an expected member, else the offsets
    themselves. The result takes its own form from the members gathered (`_from_packed`)."""

    def __init__(self, low: int, high: int, expected: int) -> None:
        self.low, self.high = low, max(high, low)
        span = self.high - low
        self.packed = _zeroed(_bytes_for(span)) if span <= GATHER_SPAN * expected else None
        self.parts: list[NDArray[np.int64]] = []

    def add(self, offsets: NDArray[np.int64]) -> None:
        """Add `offsets` (each in [low, high), in any order)."""
        if self.packed is not None:
            _set_bits(self.packed, offsets, self.low)
        else:
            self.parts.append(offsets)

    def join(self, other: OffsetSet) -> None:
        """Add the members of `other`, a set over the same range: two bitmaps are joined byte by
        byte, with no member listed."""
        if (other.low, other.high) != (self.low, self.high):
            raise ValueError(
                f"an offset set over [{other.low}, {other.high}) cannot join one over [{self.low}, {self.high})"
            )
        if self.packed is not None and other.bitmap:
            np.bitwise_or(self.packed, other._packed_bits(), out=self.packed)
        else:
            for members in other.slices():
                self.add(members)

    def result(self) -> OffsetSet:
        """The set of the members added. Gathered offsets are copied once, sorted in place and
        encoded a slice at a time (`_gaps_compressed`), so that the offsets are held about
        twice (the caller's and the copy) while the set is made, not five times."""
        if self.packed is not None:
            return _from_packed(self.packed, self.low, self.high)
        every = np.concatenate([np.zeros(0, np.int64), *self.parts])
        self.parts = []
        return _from_sorted(_distinct(every), self.low, self.high)


#: Offsets whose bits are set at once.
_SET_AT_ONCE = 1 << 18
#: Bytes of a bitmap counted at once.
_COUNT_BYTES = 1 << 20
#: Bytes of a bitmap listed at once: a byte per offset of the slice, and up to 8 bytes a member.
_LIST_BYTES = 1 << 17
#: A slice of a bitmap with fewer nonzero bytes than one in this many is listed from those bytes.
_SPARSE_BYTES = 4
#: Members whose gaps are taken and compressed at once.
_GAPS_AT_ONCE = 1 << 17


def _dense(span: int, members: int) -> bool:
    return span <= DENSE_SPAN * members


def _bytes_for(span: int) -> int:
    return (span + 7) // 8


def _zeroed(size: int) -> NDArray[np.uint8]:
    """`size` zero bytes for a bitmap, from Arrow's memory pool rather than the C library's malloc.
    A key bucket's task makes its winners' set right after reducing its offset map in Arrow's
    memory, which Arrow's allocator keeps for the task's next step (`engine.memory`): the bitmap,
    a bit per offset of the partition's range and so the one array of the task that grows with
    the partition, then reuses what the map freed rather than adding to the task's peak (a bucket
    of a 100M-offset partition: 12.5 MB on top of 510 MB from malloc; from the pool, none)."""
    packed = np.frombuffer(pa.allocate_buffer(size), np.uint8)
    packed.fill(0)
    return packed


def _set_bits(packed: NDArray[np.uint8], offsets: NDArray[np.int64], low: int) -> None:
    """Set the bits of `offsets` (in any order; bit i is offset low + i) in `packed`:
    `_SET_AT_ONCE` offsets at a time, each batch sorted so that a byte's bits in the batch are
    ORed together and the byte updated once a batch (the steps' arrays take some 24 bytes an
    offset: a batch's, never all of them; the offsets are neither copied nor sorted whole). A
    batch already ascending, as a file's offsets are, is not sorted (1.1M offsets: 0.6 ms to
    tell, 8.6 ms to sort)."""
    for start in range(0, offsets.size, _SET_AT_ONCE):
        batch = offsets[start : start + _SET_AT_ONCE] - low
        if not _ascending(batch):
            batch.sort()
        index = batch >> 3
        masks = np.right_shift(np.uint8(128), (batch & 7).astype(np.uint8))
        starts = np.flatnonzero(np.concatenate([[True], index[1:] != index[:-1]]))
        packed[index[starts]] |= np.bitwise_or.reduceat(masks, starts)


def _slices(values: NDArray[_V], size: int) -> Iterator[tuple[int, NDArray[_V]]]:
    """(first index, values) of `values`, `size` at a time."""
    for start in range(0, values.size, size):
        yield start, values[start : start + size]


def _listed_slices(packed: NDArray[np.uint8], low: int) -> Iterator[NDArray[np.int64]]:
    """The offsets whose bits are set (bit i is offset low + i), ascending, a slice of the bitmap
    at a time (`_LIST_BYTES`): a sparse slice's nonzero bytes alone are unpacked (a key bucket's
    winners set a bit in one byte of seven), a dense slice's every byte."""
    for start, part in _slices(packed, _LIST_BYTES):
        nonzero = np.flatnonzero(part)
        if nonzero.size * _SPARSE_BYTES < part.size:
            bits = np.flatnonzero(np.unpackbits(part[nonzero]))
            yield (nonzero[bits >> 3] * 8 + (bits & 7)) + (low + 8 * start)
        else:
            yield np.flatnonzero(np.unpackbits(part)).astype(np.int64) + (low + 8 * start)


def _summed_gaps(packed: bytes, low: int) -> Iterator[NDArray[np.int64]]:
    """The members of a set of gaps (`_gaps_compressed`), ascending, `_GAPS_AT_ONCE` at a time:
    the stream is decompressed a slice's bytes at a time and each slice's gaps summed from the
    member before it. A stream cut short raises zlib.error, one whose bytes are not whole 8-byte
    gaps ValueError, as decompressing it whole did."""
    stream, pending, rest, previous = zlib.decompressobj(), packed, b"", np.int64(low)
    while not stream.eof:
        piece = stream.decompress(pending, 8 * _GAPS_AT_ONCE)
        if not piece and stream.unconsumed_tail == pending:  # no step forward: the stream ends early
            raise zlib.error("Error -5 while decompressing data: incomplete or truncated stream")
        pending, data = stream.unconsumed_tail, rest + piece
        whole = len(data) - len(data) % 8
        rest = data[whole:]
        if whole:
            members = np.cumsum(np.frombuffer(data, "<i8", whole // 8), dtype=np.int64)
            members += previous
            previous = members[-1]
            yield members
    if rest:
        raise ValueError(f"an offset set's gaps are {len(rest)} bytes short of a whole 8-byte gap")


def _bit_slice(packed: NDArray[np.uint8], start: int, stop: int) -> NDArray[np.uint8]:
    """The bits [start, stop) of `packed` as a bitmap of their own, shifted a byte at a time (a bit
    per offset of the slice, never a byte)."""
    size, first, shift = _bytes_for(stop - start), start >> 3, start & 7
    window = packed[first : first + size + 1]
    if window.size < size + 1:
        window = np.concatenate([window, np.zeros(size + 1 - window.size, np.uint8)])
    sliced: NDArray[np.uint8] = window[:size].copy()
    if shift:
        np.bitwise_or(np.left_shift(sliced, shift), np.right_shift(window[1:], 8 - shift), out=sliced)
    if (stop - start) % 8:  # the bits past `stop` in the last byte are not the slice's
        sliced[-1] &= np.uint8((0xFF << (8 - (stop - start) % 8)) & 0xFF)
    return sliced


def _from_packed(packed: NDArray[np.uint8], low: int, high: int) -> OffsetSet:
    """The set of the offsets marked in `packed` (a bit per offset of [low, high)), in its form."""
    count = sum(int(np.bitwise_count(part).sum(dtype=np.int64)) for _, part in _slices(packed, _COUNT_BYTES))
    if _dense(high - low, count):
        return OffsetSet(low, high, count, _compress(packed), True)
    return OffsetSet(low, high, count, _gaps_compressed(_listed_slices(packed, low), low), False)


def _from_sorted(members: NDArray[np.int64], low: int, high: int) -> OffsetSet:
    """The set of `members` (ascending, distinct) in its form."""
    if _dense(high - low, members.size):
        packed = _zeroed(_bytes_for(high - low))
        _set_bits(packed, members, low)
        return OffsetSet(low, high, members.size, _compress(packed), True)
    slices = (part for _, part in _slices(members, _GAPS_AT_ONCE))
    return OffsetSet(low, high, members.size, _gaps_compressed(slices, low), False)


def _gaps_compressed(slices: Iterable[NDArray[np.int64]], low: int) -> bytes:
    """The members' gaps (each from the member before it, the first from `low`) as 8-byte
    little-endian numbers, compressed as one stream, from the members a slice at a time
    (ascending, distinct): the gaps of one slice are held, never of every member."""
    stream, out, previous = zlib.compressobj(_LEVEL), [], np.int64(low)
    for members in slices:
        if members.size:
            out.append(stream.compress(np.diff(members, prepend=previous).astype("<i8", copy=False).data))
            previous = members[-1]
    out.append(stream.flush())
    return b"".join(out)


def _distinct(offsets: NDArray[np.int64]) -> NDArray[np.int64]:
    """`offsets` (an array of the caller's own) sorted in place, each once."""
    if not _ascending(offsets):
        offsets.sort()
        if offsets.size > 1 and bool(np.any(offsets[1:] == offsets[:-1])):
            distinct: NDArray[np.int64] = offsets[np.concatenate([[True], offsets[1:] != offsets[:-1]])]
            return distinct
    return offsets


def _compress(packed: NDArray[np.uint8]) -> bytes:
    """A bitmap's bytes, compressed."""
    return bytes(_BITMAP_CODEC.compress(np.ascontiguousarray(packed).data, asbytes=True))


def _ascending(offsets: NDArray[np.int64]) -> bool:
    return bool(np.all(offsets[1:] > offsets[:-1]))
