"""A set of offsets in a range: how winning and expected offsets travel between the driver and
the tasks, zlib-compressed, in whichever of two forms keeps memory proportional to the members:

- a bitmap, one bit per offset of [low, high), when the members are dense (the range is at most
  eight offsets a member, so the one byte per offset it takes to build or read is no more than
  the members' own 8-byte offsets): a partition range of 20M offsets is 2.5 MB before compression
  however many of its records win;
- the members' gaps (8 bytes each) when they are sparse: the cleaned section of a compacted topic
  holds its keys' latest records spread over every offset the topic ever had (ten million keys
  over a billion offsets), where a bitmap, or any step that allocates per offset of the range,
  would cost more memory than the offset map the task is bounded by
  (log.cleaner.dedupe.buffer.size).

Sets of one range combine by union (pass 1's key buckets hold disjoint winners), and a set is
cut into the sets of its groups with one decompression (`split`).
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

    @staticmethod
    def union(sets: Sequence[OffsetSet]) -> OffsetSet:
        """The members of any of `sets`, which cover one range."""
        ranges = {(s.low, s.high) for s in sets}
        if len(ranges) != 1:
            raise ValueError(f"offset sets over different ranges cannot be joined: {sorted(ranges)}")
        ((low, high),) = ranges
        members = Members(low, high, sum(s.count for s in sets))
        for one in sets:
            members.add(one.offsets())
        return members.result()

    def offsets(self) -> NDArray[np.int64]:
        """The members, ascending."""
        if self.bitmap:
            return np.flatnonzero(self._bits()).astype(np.int64) + self.low
        return np.cumsum(np.frombuffer(zlib.decompress(self.packed), "<i8")).astype(np.int64) + self.low

    def __len__(self) -> int:
        return self.count

    def split(self, bounds: Sequence[tuple[int, int]]) -> list[OffsetSet]:
        """The members in each [low, high) of `bounds` (each inside this set's range), as sets of
        those ranges; the set is decompressed once."""
        if self.bitmap:
            bits = self._bits()
            return [_from_bits(bits[low - self.low : high - self.low], low) for low, high in bounds]
        members = self.offsets()
        cuts = [(np.searchsorted(members, low), np.searchsorted(members, high)) for low, high in bounds]
        return [_from_sorted(members[a:b], low, high) for (a, b), (low, high) in zip(cuts, bounds, strict=True)]

    def _bits(self) -> NDArray[np.bool_]:
        packed = np.frombuffer(zlib.decompress(self.packed), np.uint8)
        return np.unpackbits(packed, count=self.high - self.low).view(bool)


class Members:
    """Offsets of [low, high), at most `expected` of them, gathered a batch at a time: a byte per
    offset of a dense range, else the offsets themselves."""

    def __init__(self, low: int, high: int, expected: int) -> None:
        self.low, self.high = low, max(high, low)
        self.bits = np.zeros(self.high - low, bool) if _dense(self.high - low, expected) else None
        self.parts: list[NDArray[np.int64]] = []

    def add(self, offsets: NDArray[np.int64]) -> None:
        if self.bits is not None:
            self.bits[offsets - self.low] = True
        else:
            self.parts.append(offsets)

    def result(self) -> OffsetSet:
        if self.bits is not None:
            return _from_bits(self.bits, self.low)
        every = np.concatenate([np.zeros(0, np.int64), *self.parts])
        return _from_sorted(every if _ascending(every) else np.unique(every), self.low, self.high)


def _dense(span: int, members: int) -> bool:
    return span <= DENSE_SPAN * members


def _from_bits(bits: NDArray[np.bool_], low: int) -> OffsetSet:
    """The set of the offsets marked in `bits` (a byte per offset from `low`), in its form."""
    count = int(np.count_nonzero(bits))
    if _dense(bits.size, count):
        return OffsetSet(low, low + bits.size, count, _compress(np.packbits(bits)), True)
    return _from_sorted(np.flatnonzero(bits).astype(np.int64) + low, low, low + bits.size)


def _from_sorted(members: NDArray[np.int64], low: int, high: int) -> OffsetSet:
    """The set of `members` (ascending, distinct) in its form."""
    if _dense(high - low, members.size):
        bits = np.zeros(high - low, bool)
        bits[members - low] = True
        return OffsetSet(low, high, members.size, _compress(np.packbits(bits)), True)
    gaps = np.diff(members, prepend=np.int64(low))
    return OffsetSet(low, high, members.size, _compress(gaps.astype("<i8")), False)


def _compress(values: NDArray[np.generic]) -> bytes:
    return zlib.compress(values.tobytes(), _LEVEL)


def _ascending(offsets: NDArray[np.int64]) -> bool:
    return bool(np.all(offsets[1:] > offsets[:-1]))
