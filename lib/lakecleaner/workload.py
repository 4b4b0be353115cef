"""A synthetic CDC workload: keyed updates and deletes, as a Kafka producer would send them.

Used by `lakecleaner produce --generate`, the demo, the tests and the benchmark. Everything on
the hot path is vectorised (numpy and pyarrow): no Python loop runs per record.

The rules of the workload (all of them deterministic for a `WorkloadSpec`, seed included):

- Records are produced in a sequence 0..records-1 ("production order").
- A record is unkeyed with probability `unkeyed_share`; its key is null and it goes to the
  partitions round-robin (the n-th unkeyed record to partition n % partitions).
- Keyed records: the first `keys` keyed records insert every key once, in a shuffled order
  (an affine permutation of the key ids); every later keyed record updates a key drawn
  uniformly. Key number i is `key_prefix` + i in decimal, zero-padded to the width of
  keys - 1, so all keys have the same length; with `padded_keys` false, not padded, so keys have
  as many lengths as ids have digits (as a CDC topic's keys of numeric ids do). A keyed record goes
  to partition toPositive(murmur2(key)) % partitions, Kafka's default partitioner.
- A keyed record is a tombstone (null value) with probability `tombstone_share`; unkeyed records
  always carry a value. Values are `value_size` random (incompressible) bytes.
- Timestamps: record n is nominally produced at start_ms + floor(n * timestamp_spread_ms / records).
  With probability `out_of_order_share` a record (never the first) is late: its timestamp is
  1 to max(1, timestamp_spread_ms // 1000) ms earlier than its predecessor's, floored at start_ms
  (so near the start of the span a late record may end up equal to its predecessor). Every
  timestamp lies in [start_ms, start_ms + timestamp_spread_ms) (exactly start_ms for a zero span).
- With `header_versions`, every record has one header named `header_name` holding its version,
  the record's 1-based production sequence number (like a CDC source's log sequence number), as
  8 bytes big-endian (KIP-280). Versions therefore increase with production order, per key too, so
  header-strategy compaction keeps the latest produced record. With probability
  `malformed_header_share` the header holds only the low 4 bytes (a 32-bit version, the classic
  producer bug), which KIP-280 counts as no version.

Records are generated in blocks of a size that depends only on the spec, from random streams
seeded by (seed, block, attribute), so the workload does not depend on how `generate` cuts it
into batches, and changing one share does not reshuffle the other attributes.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from lakecleaner.log.records import BATCH_SCHEMA, HEADER_TYPE

MURMUR2_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK32 = 0xFFFFFFFF

MAX_KEYS = 1_000_000_000
MAX_RECORDS = 2**31 - 1
MAX_PARTITIONS = 100_000
MAX_VALUE_SIZE = 16 * 1024 * 1024
MAX_KEY_PREFIX_BYTES = 1024
MAX_TIMESTAMP_MS = 2**62
#: Records generated per block at most; blocks also hold at most _BLOCK_VALUE_BYTES of values.
_BLOCK_RECORDS = 1 << 16
_BLOCK_VALUE_BYTES = 1 << 26

# Random stream of each attribute: SeedSequence(seed, spawn_key=(block, stream)).
_S_KEYED, _S_KEY_ID, _S_TOMBSTONE, _S_VALUE, _S_LATE, _S_LATENESS, _S_MALFORMED = range(7)
_S_PERMUTATION_BLOCK = 2**32  # the block number under which the insert permutation is drawn


def _require_int(name: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"WorkloadSpec.{name}={value!r}: must be an integer from {low} to {high}")


def _require_share(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise ValueError(f"WorkloadSpec.{name}={value!r}: must be a number from 0 to 1")


def _is_utf8(value: object) -> bool:
    if not isinstance(value, str):
        return False
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


@dataclass(frozen=True)
class WorkloadSpec:
    """What to generate; see the module docstring for the rules. Invalid fields raise ValueError."""

    keys: int = 1000
    records: int = 10_000
    partitions: int = 1
    value_size: int = 100
    tombstone_share: float = 0.05
    out_of_order_share: float = 0.0
    start_ms: int = 1_700_000_000_000
    timestamp_spread_ms: int = 3_600_000
    header_versions: bool = False
    header_name: str = "version"
    malformed_header_share: float = 0.0
    unkeyed_share: float = 0.0
    key_prefix: str = "key-"
    padded_keys: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        _require_int("keys", self.keys, 1, MAX_KEYS)
        _require_int("records", self.records, 0, MAX_RECORDS)
        _require_int("partitions", self.partitions, 1, MAX_PARTITIONS)
        _require_int("value_size", self.value_size, 0, MAX_VALUE_SIZE)
        _require_share("tombstone_share", self.tombstone_share)
        _require_share("out_of_order_share", self.out_of_order_share)
        _require_int("start_ms", self.start_ms, 0, MAX_TIMESTAMP_MS)
        _require_int("timestamp_spread_ms", self.timestamp_spread_ms, 0, MAX_TIMESTAMP_MS - self.start_ms)
        for name in ("header_versions", "padded_keys"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"WorkloadSpec.{name}={getattr(self, name)!r}: must be true or false")
        if not _is_utf8(self.header_name) or not self.header_name:
            raise ValueError(f"WorkloadSpec.header_name={self.header_name!r}: must be a non-empty UTF-8 string")
        _require_share("malformed_header_share", self.malformed_header_share)
        _require_share("unkeyed_share", self.unkeyed_share)
        if not _is_utf8(self.key_prefix) or len(self.key_prefix.encode()) > MAX_KEY_PREFIX_BYTES:
            raise ValueError(
                f"WorkloadSpec.key_prefix={self.key_prefix!r}: must be a string of 0 to "
                f"{MAX_KEY_PREFIX_BYTES} UTF-8 bytes"
            )
        _require_int("seed", self.seed, 0, 2**63 - 1)
        if self.out_of_order_share > 0 and self.timestamp_spread_ms == 0:
            raise ValueError(
                f"WorkloadSpec.out_of_order_share={self.out_of_order_share!r}: must be 0 when "
                "timestamp_spread_ms is 0 (a late record would fall before start_ms)"
            )
        if self.malformed_header_share > 0 and not self.header_versions:
            raise ValueError(
                f"WorkloadSpec.malformed_header_share={self.malformed_header_share!r}: must be 0 unless "
                "header_versions is true"
            )

    @property
    def key_width(self) -> int:
        """Digits of a key id in a key: those of keys - 1."""
        return len(str(self.keys - 1))

    def key(self, key_id: int) -> bytes:
        """The key of key number `key_id` (0 ≤ key_id < keys)."""
        if not 0 <= key_id < self.keys:
            raise ValueError(f"key_id={key_id}: must be from 0 to {self.keys - 1}")
        return f"{self.key_prefix}{key_id:0{self.key_width if self.padded_keys else 1}d}".encode()


# --------------------------------------------------------------------------------------------
# Kafka's murmur2 and default partitioner


def kafka_murmur2(data: bytes) -> int:
    """Kafka's `Utils.murmur2`: the 32-bit MurmurHash2 with seed 0x9747b28c, as a signed int."""
    length = len(data)
    h = (MURMUR2_SEED ^ length) & _MASK32
    tail_start = length - length % 4
    for i in range(0, tail_start, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK32
        k ^= k >> 24
        k = (k * _M) & _MASK32
        h = ((h * _M) & _MASK32) ^ k
    tail = length % 4
    if tail >= 3:
        h ^= data[tail_start + 2] << 16
    if tail >= 2:
        h ^= data[tail_start + 1] << 8
    if tail >= 1:
        h ^= data[tail_start]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h >= 1 << 31 else h


def kafka_partition(key: bytes, partitions: int) -> int:
    """Kafka's default partition of a non-null key: toPositive(murmur2(key)) % partitions."""
    if partitions < 1:
        raise ValueError(f"partitions={partitions}: must be at least 1")
    return (kafka_murmur2(key) & 0x7FFFFFFF) % partitions


def kafka_murmur2_fixed(keys: NDArray[np.uint8]) -> NDArray[np.int32]:
    """`kafka_murmur2` of every row of a (n, length) uint8 matrix of equal-length keys, vectorised."""
    if keys.ndim != 2:
        raise ValueError(f"keys must be a (n, length) matrix, got shape {keys.shape}")
    n, length = keys.shape
    m = np.uint32(_M)
    h = np.full(n, (MURMUR2_SEED ^ length) & _MASK32, dtype=np.uint32)
    tail_start = length - length % 4
    if tail_start:
        words = np.ascontiguousarray(keys[:, :tail_start]).view("<u4")
        for column in range(words.shape[1]):  # one pass per 4-byte word of the key, over all keys
            k = words[:, column] * m
            k ^= k >> 24
            k *= m
            h *= m
            h ^= k
    tail = length % 4
    if tail >= 3:
        h ^= keys[:, tail_start + 2].astype(np.uint32) << 16
    if tail >= 2:
        h ^= keys[:, tail_start + 1].astype(np.uint32) << 8
    if tail >= 1:
        h ^= keys[:, tail_start].astype(np.uint32)
        h *= m
    h ^= h >> 13
    h *= m
    h ^= h >> 15
    return h.view(np.int32)


def kafka_partitions_fixed(keys: NDArray[np.uint8], partitions: int) -> NDArray[np.int64]:
    """`kafka_partition` of every row of a (n, length) uint8 matrix of equal-length keys."""
    if partitions < 1:
        raise ValueError(f"partitions={partitions}: must be at least 1")
    positive = kafka_murmur2_fixed(keys).view(np.uint32) & np.uint32(0x7FFFFFFF)
    return (positive % np.uint32(partitions)).astype(np.int64)


# --------------------------------------------------------------------------------------------
# Generation


def _rng(spec: WorkloadSpec, block: int, stream: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(spec.seed, spawn_key=(block, stream))))


def _block_records(spec: WorkloadSpec) -> int:
    return max(1, min(_BLOCK_RECORDS, _BLOCK_VALUE_BYTES // max(1, spec.value_size)))


def _validity(valid: NDArray[np.bool_]) -> pa.Buffer | None:
    return None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))


def _offsets(lengths: NDArray[np.int64]) -> pa.Buffer:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.py_buffer(offsets)


def _binary(
    data: NDArray[np.uint8], lengths: NDArray[np.int64], valid: NDArray[np.bool_], type_: pa.DataType
) -> pa.Array:
    """A binary (or string) array whose non-null values are the consecutive `lengths` slices of `data`."""
    nulls = int(len(valid) - np.count_nonzero(valid))
    return pa.Array.from_buffers(
        type_, len(valid), [_validity(valid), _offsets(lengths), pa.py_buffer(data)], null_count=nulls
    )


@dataclass
class _State:
    """What a block needs from the blocks before it."""

    keyed_before: int = 0  # keyed records produced so far
    unkeyed_before: int = 0  # unkeyed records produced so far (round-robin position)
    base_ms: int = 0  # nominal timestamp of the last on-time record
    lag_ms: int = 0  # how far the last record is behind base_ms (0 when it was on time)


class _Generator:
    """Produces the workload block by block, as pyarrow tables sorted by partition."""

    def __init__(self, spec: WorkloadSpec) -> None:
        self.spec = spec
        self.state = _State(base_ms=spec.start_ms)
        self.prefix = np.frombuffer(spec.key_prefix.encode(), dtype=np.uint8)
        self.powers = 10 ** np.arange(spec.key_width - 1, -1, -1, dtype=np.int64)
        self.step, self.step_rem = divmod(spec.timestamp_spread_ms, max(1, spec.records))
        self.max_lateness = max(1, spec.timestamp_spread_ms // 1000)
        self.name = spec.header_name.encode()
        # The insert order: key id of the o-th keyed record (o < keys) is (a * o + b) % keys.
        rng = _rng(spec, _S_PERMUTATION_BLOCK, 0)
        self.perm_b = int(rng.integers(0, spec.keys))
        self.perm_a = 1
        if spec.keys > 2:
            self.perm_a = int(rng.integers(1, spec.keys))
            while math.gcd(self.perm_a, spec.keys) != 1:
                self.perm_a = int(rng.integers(1, spec.keys))

    def blocks(self) -> Iterator[tuple[pa.Table, NDArray[np.int64]]]:
        """Yield (table sorted by partition, rows per partition) for each block in production order."""
        size = _block_records(self.spec)
        for block, first in enumerate(range(0, self.spec.records, size)):
            yield self._block(block, first, min(size, self.spec.records - first))

    def _key_matrix(self, key_ids: NDArray[np.int64]) -> NDArray[np.uint8]:
        digits = (key_ids[:, None] // self.powers[None, :]) % 10 + ord("0")
        matrix = np.empty((len(key_ids), len(self.prefix) + len(self.powers)), dtype=np.uint8)
        matrix[:, : len(self.prefix)] = self.prefix
        matrix[:, len(self.prefix) :] = digits
        return matrix

    def _key_bytes(self, key_ids: NDArray[np.int64]) -> NDArray[np.bool_] | None:
        """Which bytes of each row of the key matrix the key holds: None for all of them (padded
        keys), else the prefix and the id's digits, not the zeros before them."""
        if self.spec.padded_keys:
            return None
        kept = np.ones((len(key_ids), len(self.prefix) + len(self.powers)), dtype=np.bool_)
        digits = 1 + np.count_nonzero(key_ids[:, None] >= self.powers[None, :-1], axis=1)
        kept[:, len(self.prefix) :] = np.arange(len(self.powers))[None, :] >= len(self.powers) - digits[:, None]
        return kept

    def _partitions(self, keys: NDArray[np.uint8], kept: NDArray[np.bool_] | None) -> NDArray[np.int64]:
        """Kafka's partition of each key (its kept bytes), a key length at a time."""
        if kept is None:
            return kafka_partitions_fixed(keys, self.spec.partitions)
        lengths = kept.sum(axis=1)
        partition = np.zeros(len(keys), dtype=np.int64)
        for length in np.unique(lengths).tolist():
            rows = np.flatnonzero(lengths == length)
            matrix = keys[rows][kept[rows]].reshape(len(rows), length)
            partition[rows] = kafka_partitions_fixed(matrix, self.spec.partitions)
        return partition

    @staticmethod
    def _key_array(keys: NDArray[np.uint8], kept: NDArray[np.bool_] | None, keyed: NDArray[np.bool_]) -> pa.Array:
        """The keys of the keyed rows (each row's kept bytes), null for the others."""
        if kept is None:
            lengths = np.where(keyed, keys.shape[1], 0).astype(np.int64)
            return _binary(keys[keyed].reshape(-1), lengths, keyed, pa.binary())
        lengths = np.where(keyed, kept.sum(axis=1), 0).astype(np.int64)
        return _binary(keys[keyed][kept[keyed]], lengths, keyed, pa.binary())

    def _key_ids(self, block: int, keyed: NDArray[np.bool_]) -> NDArray[np.int64]:
        """Key id of every record of the block (0 for unkeyed ones)."""
        spec, state = self.spec, self.state
        ordinal = state.keyed_before + np.cumsum(keyed, dtype=np.int64) - 1
        inserting = ordinal < spec.keys
        ids = _rng(spec, block, _S_KEY_ID).integers(0, spec.keys, len(keyed), dtype=np.int64)
        ids[inserting] = (self.perm_a * ordinal[inserting] + self.perm_b) % spec.keys
        ids[~keyed] = 0
        return ids

    def _timestamps(self, block: int, sequence: NDArray[np.int64]) -> NDArray[np.int64]:
        spec, state = self.spec, self.state
        n = len(sequence)
        nominal = spec.start_ms + sequence * self.step + (sequence * self.step_rem) // max(1, spec.records)
        if spec.out_of_order_share == 0:
            return nominal
        late = _rng(spec, block, _S_LATE).random(n) < spec.out_of_order_share
        late &= sequence > 0
        lateness = _rng(spec, block, _S_LATENESS).integers(1, self.max_lateness + 1, n, dtype=np.int64)
        lag_sum = np.cumsum(np.where(late, lateness, 0))
        last_on_time = np.maximum.accumulate(np.where(late, -1, np.arange(n)))
        carried = last_on_time < 0  # late records continuing the previous block's late run
        anchor = np.maximum(last_on_time, 0)
        base = np.where(carried, state.base_ms, nominal[anchor])
        lag = np.where(carried, state.lag_ms + lag_sum, lag_sum - lag_sum[anchor])
        if last_on_time[-1] >= 0:
            state.base_ms = int(nominal[last_on_time[-1]])
        state.lag_ms = int(lag[-1]) if late[-1] else 0
        return np.where(late, np.maximum(base - lag, spec.start_ms), nominal)

    def _malformed(self, block: int, n: int) -> NDArray[np.bool_]:
        spec = self.spec
        if spec.malformed_header_share == 0:
            return np.zeros(n, dtype=np.bool_)
        return _rng(spec, block, _S_MALFORMED).random(n) < spec.malformed_header_share

    def _headers(self, sequence: NDArray[np.int64], malformed: NDArray[np.bool_]) -> pa.Array:
        """One version header per record (or none without header_versions), rows as given."""
        n = len(sequence)
        if not self.spec.header_versions:
            empty = pa.array([], HEADER_TYPE.value_type)
            return pa.ListArray.from_arrays(pa.array(np.zeros(n + 1, dtype=np.int32)), empty, type=HEADER_TYPE)
        versions = (sequence + 1).astype(">i8").view(np.uint8).reshape(n, 8)
        keep = ~malformed[:, None] | (np.arange(8) >= 4)[None, :]
        all_valid = np.ones(n, dtype=np.bool_)
        name_bytes = np.frombuffer(self.name * n, dtype=np.uint8)
        names = _binary(name_bytes, np.full(n, len(self.name), dtype=np.int64), all_valid, pa.string())
        values = _binary(versions[keep], np.where(malformed, 4, 8).astype(np.int64), all_valid, pa.binary())
        headers = pa.StructArray.from_arrays([names, values], fields=list(HEADER_TYPE.value_type))
        return pa.ListArray.from_arrays(pa.array(np.arange(n + 1, dtype=np.int32)), headers, type=HEADER_TYPE)

    def _block(self, block: int, first: int, n: int) -> tuple[pa.Table, NDArray[np.int64]]:
        spec, state = self.spec, self.state
        sequence = np.arange(first, first + n, dtype=np.int64)
        if spec.unkeyed_share > 0:
            keyed = _rng(spec, block, _S_KEYED).random(n) >= spec.unkeyed_share
        else:
            keyed = np.ones(n, dtype=np.bool_)
        key_ids = self._key_ids(block, keyed)
        keys = self._key_matrix(key_ids)
        kept = self._key_bytes(key_ids)
        partition = self._partitions(keys, kept)
        unkeyed_ordinal = state.unkeyed_before + np.cumsum(~keyed, dtype=np.int64) - 1
        partition[~keyed] = unkeyed_ordinal[~keyed] % spec.partitions
        state.keyed_before += int(np.count_nonzero(keyed))
        state.unkeyed_before += int(n - np.count_nonzero(keyed))
        tombstone = keyed & (_rng(spec, block, _S_TOMBSTONE).random(n) < spec.tombstone_share)
        timestamps = self._timestamps(block, sequence)
        malformed = self._malformed(block, n)

        order = np.argsort(partition, kind="stable")
        keyed, tombstone, keys = keyed[order], tombstone[order], keys[order]
        key_array = self._key_array(keys, None if kept is None else kept[order], keyed)
        has_value = ~tombstone
        value_bytes = int(np.count_nonzero(has_value)) * spec.value_size
        raw = _rng(spec, block, _S_VALUE).bit_generator.random_raw((value_bytes + 7) // 8)
        value_lengths = np.where(has_value, spec.value_size, 0).astype(np.int64)
        value_array = _binary(raw.view(np.uint8)[:value_bytes], value_lengths, has_value, pa.binary())
        table = pa.Table.from_arrays(
            [key_array, value_array, pa.array(timestamps[order]), self._headers(sequence[order], malformed[order])],
            schema=BATCH_SCHEMA,
        )
        return table, np.bincount(partition, minlength=spec.partitions)


def generate(spec: WorkloadSpec, batch_records: int = 100_000) -> Iterator[tuple[int, pa.Table]]:
    """Yield (partition, batch) pairs of the workload, batches in BATCH_SCHEMA.

    Each partition's batches come in production order and hold exactly `batch_records` rows,
    except the partition's last one (fewer, never empty); a batch may consist of several chunks.
    The pairs of different partitions interleave. The output is a function of `spec` alone:
    `batch_records` only decides where each partition's record sequence is cut.
    """
    if isinstance(batch_records, bool) or not isinstance(batch_records, int) or batch_records < 1:
        raise ValueError(f"batch_records={batch_records!r}: must be an integer of at least 1")
    pending: dict[int, pa.Table] = {}
    for table, counts in _Generator(spec).blocks():
        start = 0
        for partition in np.flatnonzero(counts).tolist():
            count = int(counts[partition])
            piece = table.slice(start, count)
            start += count
            held = pending.pop(partition, None)
            rows = piece if held is None else pa.concat_tables([held, piece])
            cut = 0
            while rows.num_rows - cut >= batch_records:
                yield partition, rows.slice(cut, batch_records)
                cut += batch_records
            if cut < rows.num_rows:
                pending[partition] = rows.slice(cut)
    for partition in sorted(pending):
        yield partition, pending[partition]
