"""A set of offsets in a range: how winning and expected offsets travel between the driver and
the tasks, zlib-compressed, in whichever of two forms keeps memory proportional to the members:

- a bitmap, one bit per offset of [low, high), when the members are dense (the range is at most
  eight offsets a member): a partition range of 100M offsets is 12.5 MB before compression
  however many of its records win, and a set is built, joined and cut a bit per offset too
  (a byte per offset of a whole partition was 100 MB held by the driver for each step);
- the members' gaps (8 bytes each) when they are sparse: the cleaned section of a compacted topic
  holds its keys' latest records spread over every offset the topic ever had (ten million keys
  over a billion offsets), where a bitmap, or any step that allocates per offset of the range,
  would cost more memory than the offset map the task is bounded by
  (log.cleaner.dedupe.buffer.size).

Sets of one range are joined a set at a time (`Members.join`: pass 1's key buckets hold disjoint
winners, read back one after another), and a set is cut into the sets of its groups with one
decompression (`split`).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

_LEVEL = 1
#: The widest range, in offsets a member, that a set keeps as a bitmap.
DENSE_SPAN = 8


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
        if self.bitmap:
            return _listed(self._packed_bits()) + self.low
        members = np.cumsum(np.frombuffer(zlib.decompress(self.packed), "<i8"), dtype=np.int64)
        members += self.low
        return members

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
        return np.frombuffer(zlib.decompress(self.packed), np.uint8)


class Members:
    """Offsets of [low, high), at most `expected` of them, gathered a batch or a set at a time: a
    bit per offset of a dense range, else the offsets themselves."""

    def __init__(self, low: int, high: int, expected: int) -> None:
        self.low, self.high = low, max(high, low)
        span = self.high - low
        self.packed = np.zeros(_bytes_for(span), np.uint8) if _dense(span, expected) else None
        self.parts: list[NDArray[np.int64]] = []

    def add(self, offsets: NDArray[np.int64]) -> None:
        """Add `offsets` (each in [low, high), in any order)."""
        if self.packed is not None:
            _set_bits(self.packed, offsets - self.low)
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
            self.add(other.offsets())

    def result(self) -> OffsetSet:
        if self.packed is not None:
            return _from_packed(self.packed, self.low, self.high)
        every = np.concatenate([np.zeros(0, np.int64), *self.parts])
        return _from_sorted(every if _ascending(every) else np.unique(every), self.low, self.high)


#: The bits set in each byte value.
_BITS_SET = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).sum(axis=1).astype(np.uint8)
#: Offsets whose bits are set at once.
_SET_AT_ONCE = 1 << 18
#: Bytes of a bitmap unpacked (a byte per offset of the slice) or counted at once.
_UNPACK_BYTES = 1 << 20


def _dense(span: int, members: int) -> bool:
    return span <= DENSE_SPAN * members


def _bytes_for(span: int) -> int:
    return (span + 7) // 8


def _set_bits(packed: NDArray[np.uint8], relative: NDArray[np.int64]) -> None:
    """Set the bits of `relative` (offsets from the bitmap's start, in any order) in `packed`: the
    offsets in ascending order, `_SET_AT_ONCE` at a time, each byte's bits ORed together and the
    byte updated once (the steps' arrays take some 24 bytes an offset: a batch, not all of them)."""
    ordered = relative if _ascending(relative) else np.sort(relative)
    for start in range(0, ordered.size, _SET_AT_ONCE):
        batch = ordered[start : start + _SET_AT_ONCE]
        index = batch >> 3
        masks = np.right_shift(np.uint8(128), (batch & 7).astype(np.uint8))
        starts = np.flatnonzero(np.concatenate([[True], index[1:] != index[:-1]]))
        packed[index[starts]] |= np.bitwise_or.reduceat(masks, starts)


def _listed(packed: NDArray[np.uint8]) -> NDArray[np.int64]:
    """The offsets (from the bitmap's start) whose bits are set, ascending, unpacked a slice of
    `_UNPACK_BYTES` at a time."""
    parts = [
        np.flatnonzero(np.unpackbits(packed[start : start + _UNPACK_BYTES])).astype(np.int64) + 8 * start
        for start in range(0, packed.size, _UNPACK_BYTES)
    ]
    return np.concatenate([np.zeros(0, np.int64), *parts])


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
    count = sum(
        int(_BITS_SET[packed[i : i + _UNPACK_BYTES]].sum(dtype=np.int64)) for i in range(0, packed.size, _UNPACK_BYTES)
    )
    if _dense(high - low, count):
        return OffsetSet(low, high, count, _compress(packed), True)
    return _from_sorted(_listed(packed) + low, low, high)


def _from_sorted(members: NDArray[np.int64], low: int, high: int) -> OffsetSet:
    """The set of `members` (ascending, distinct) in its form."""
    if _dense(high - low, members.size):
        packed = np.zeros(_bytes_for(high - low), np.uint8)
        _set_bits(packed, members - low)
        return OffsetSet(low, high, members.size, _compress(packed), True)
    gaps = np.diff(members, prepend=np.int64(low))
    return OffsetSet(low, high, members.size, _compress(gaps.astype("<i8", copy=False)), False)


def _compress(values: NDArray[np.generic]) -> bytes:
    return zlib.compress(np.ascontiguousarray(values).data, _LEVEL)


def _ascending(offsets: NDArray[np.int64]) -> bool:
    return bool(np.all(offsets[1:] > offsets[:-1]))
