"""A set of offsets in a range, as a compressed bitmap: how winning and expected offsets travel
between the driver and the tasks.

One bit per offset of [low, high), zlib-compressed: a partition range of 20M offsets is 2.5 MB
before compression however many of its records win, where the offsets themselves would be up to
160 MB. Sets of one range combine by union (pass 1's key buckets hold disjoint winners).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

_LEVEL = 1


@dataclass(frozen=True)
class OffsetSet:
    """The offsets of [low, high) that are members."""

    low: int
    high: int
    packed: bytes

    @staticmethod
    def of(offsets: NDArray[np.int64], low: int, high: int) -> OffsetSet:
        """The set of `offsets` (each in [low, high), in any order)."""
        bits = np.zeros(max(high - low, 0), bool)
        bits[offsets - low] = True
        return OffsetSet.from_bits(bits, low)

    @staticmethod
    def from_bits(bits: NDArray[np.bool_], low: int) -> OffsetSet:
        return OffsetSet(low, low + bits.size, zlib.compress(np.packbits(bits).tobytes(), _LEVEL))

    def bits(self) -> NDArray[np.bool_]:
        """Membership of each offset of [low, high)."""
        packed = np.frombuffer(zlib.decompress(self.packed), np.uint8)
        return np.unpackbits(packed, count=self.high - self.low).astype(bool)

    def offsets(self) -> NDArray[np.int64]:
        """The members, ascending."""
        return np.flatnonzero(self.bits()).astype(np.int64) + self.low

    def __len__(self) -> int:
        return int(np.count_nonzero(self.bits()))

    def slice(self, low: int, high: int) -> OffsetSet:
        """The members in [low, high), which lies inside this set's range."""
        return OffsetSet.from_bits(self.bits()[low - self.low : high - self.low], low)

    def union(self, other: OffsetSet) -> OffsetSet:
        """The members of both (over the same range)."""
        if (self.low, self.high) != (other.low, other.high):
            raise ValueError(f"offset sets over [{self.low}, {self.high}) and [{other.low}, {other.high}) differ")
        return OffsetSet.from_bits(self.bits() | other.bits(), self.low)
