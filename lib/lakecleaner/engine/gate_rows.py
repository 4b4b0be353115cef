"""The quality gate's checks in Spark tasks: each group's output, read back from storage after
staging, against what the group must hold.

What a group must hold (`Expected`) is settled in pass 2's task, which reads the group's input
anyway, by the gate's own statement of the record rule rather than pass 2's `clean_rows`: the
input records whose offsets won pass 1, keyed, at or after the log start, less the expired
tombstones (KIP-534: a tombstone whose delete_horizon_ms ≤ now) — each with the input's key,
value, timestamp and headers, and with the input's delete_horizon_ms or, on a tombstone without
one, now + delete.retention.ms. Their offsets travel to the gate as they are (through the store
for a partition in key buckets, `offsets_file.EXPECTED`); the rest as two digests (`digest`), so
the gate never reads the input a second time. Pass 1's decision of each
key's winner is not made again here: the reference-model tests check it.

A gate task (pass 2's own task, `recopy.gate_in_task`, or one of the gate's tasks) takes every
group of one partition, reads back the files the new log would hold for them (the staged file,
or the kept input files of a group that did not change) a row group at a time, holding no more
of a group than one row group and its offsets, and emits a row per violation,
(partition, offset, check):

- per output record: `is_winner` (its offset is one the group must hold), `has_key`,
  `offset_increasing` (strictly, through the file, inside the group's range);
- per offset the group must hold that the output lacks: `winner_kept`;
- per group, at its base offset: `entry_matches` (the staged file holds as many records as its
  manifest entry will say), `unchanged` and `horizon_as_expected` (the digests);
- per record whose key an earlier output record of the partition holds: `unique_key`, and
  `clean_keys_once` too when both lie in the cleaned section below `GateTask.clean_end` (which
  pass 1 trusted to hold each key once: the cleaner checkpoint was moved over records never
  cleaned).

A partition whose output holds more keys than one offset map (log.cleaner.dedupe.buffer.size) is
checked in two steps, as pass 1 maps it: a record task per share of its groups checks every record
and group rule of its share and spills their keys, hashed once, bucket after bucket, a group at a
time (`spill`: it holds one group's keys, not its share's); then a task per key bucket reads that
bucket from every record task's spill and checks `unique_key` (`gate_keys`). No task holds more
than its share of the records or its bucket of the keys, and each output record is read back and
its key hashed once, however many buckets there are (each bucket's task once read every group's
keys: a partition of 100M keys in 33 buckets read and hashed its keys 33 times).

A group that kept its files (pass 2 found every record of them a winner, with no tombstone to
stamp or expire) is read without values unless it holds tombstones: each of its records is
expected, and its tombstones must have a horizon (`horizon_as_expected`) that has not passed
(`is_winner`). Its offsets do not travel: a mostly clean log would otherwise send the driver an
offset per record.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

from lakecleaner.config import LONG_MAX, TopicConfig
from lakecleaner.engine.digest import RecordDigest
from lakecleaner.engine.keys import bool_mask, in_sorted, key_buckets, key_hash, key_order, rows_where
from lakecleaner.engine.offset_map import buckets_for
from lakecleaner.engine.offset_set import OffsetSet
from lakecleaner.engine.offsets_file import StoredOffsets, load_offsets
from lakecleaner.engine.spill import Spill, SpillWriter, read_spill
from lakecleaner.engine.storage import StoreSpec
from lakecleaner.engine.versions import HASH
from lakecleaner.errors import CorruptSegment, StorageError
from lakecleaner.io import ObjectStore
from lakecleaner.log.key_index import MAX_ROWS as MAX_INDEXED_ROWS
from lakecleaner.log.key_index import KeyIndex, write_key_index
from lakecleaner.log.manifest import SegmentFile
from lakecleaner.log.records import SEGMENT_SCHEMA
from lakecleaner.log.segment_files import (
    FetchedFiles,
    live_rows,
    read_file_key_index,
    read_segment_file,
    read_segment_row_groups,
)

VIOLATION_SCHEMA = pa.schema([("partition", pa.int32()), ("offset", pa.int64()), ("check", pa.string())])
RECORD_SCHEMA = pa.schema([SEGMENT_SCHEMA.field(name) for name in ("key", "value", "timestamp", "headers")])
HORIZON_SCHEMA = pa.schema([SEGMENT_SCHEMA.field("delete_horizon_ms")])
OFFSET_SCHEMA = pa.schema([SEGMENT_SCHEMA.field("offset")])
KEYS_SCHEMA = pa.schema([("key", pa.binary()), ("offset", pa.int64()), (HASH, pa.uint64())])
T = TypeVar("T", bound=np.generic)


@dataclass(frozen=True)
class GateRules:
    """What the checks need of the topic and the run."""

    now_ms: int
    horizon_ms: int

    @staticmethod
    def of(config: TopicConfig, now_ms: int) -> GateRules:
        return GateRules(now_ms, min(now_ms + config.delete_retention_ms, LONG_MAX))


@dataclass(frozen=True)
class Expectation:
    """What a rewritten group must hold: its offsets, and the digests of the records' key, value,
    timestamp and headers and of their delete_horizon_ms. All None for a group that keeps its
    files: pass 2 found every record of them a winner, and they stay as they are."""

    #: The offsets, or where pass 2's task wrote them (a partition in key buckets, `offsets_file`).
    offsets: OffsetSet | StoredOffsets | None = None
    records: str | None = None
    horizons: str | None = None


class Expected:
    """Builds the Expectation of the group [low, high) from its input files, read in offset order
    (pass 2)."""

    def __init__(self, rules: GateRules, low: int, high: int) -> None:
        self.rules = rules
        self.low, self.high = low, high
        self.offsets: list[NDArray[np.int64]] = []
        self.records = RecordDigest(RECORD_SCHEMA)
        self.horizons = RecordDigest(HORIZON_SCHEMA)

    def add(
        self,
        table: pa.Table,
        winners: NDArray[np.int64],
        log_start: int,
        taken: tuple[NDArray[np.bool_], pa.Table] | None = None,
    ) -> None:
        """Add the records of one input file's row group that the group must hold (`winners`:
        pass 1's winning offsets, sorted). `taken`: rows pass 2 already took from `table` (which,
        and the rows); when they are exactly the rows held here, their key, value, timestamp and
        headers are digested rather than taken a second time (the horizons always come from
        `table`)."""
        offsets = table.column("offset").to_numpy()
        tombstone = bool_mask(pc.is_null(table.column("value")))
        horizon = table.column("delete_horizon_ms")
        held = in_sorted(offsets, winners) & (offsets >= log_start) & bool_mask(pc.is_valid(table.column("key")))
        held &= ~_expired(tombstone, horizon, self.rules)
        if taken is not None and np.array_equal(taken[0], held):
            chosen = taken[1]
        else:
            chosen = rows_where(table.select(RECORD_SCHEMA.names), held)
        stamp = pa.array(np.full(chosen.num_rows, self.rules.horizon_ms, np.int64), mask=~tombstone[held])
        input_horizons = rows_where(pa.table({"h": horizon}), held).column("h")
        expected = pa.table({"delete_horizon_ms": pc.coalesce(input_horizons, stamp)})
        self.offsets.append(offsets[held])
        self.records.update(chosen)
        self.horizons.update(expected)

    def result(self) -> Expectation:
        offsets = np.concatenate(self.offsets) if self.offsets else np.zeros(0, np.int64)
        return Expectation(
            OffsetSet.of(offsets, self.low, self.high), self.records.hexdigest(), self.horizons.hexdigest()
        )


@dataclass(frozen=True)
class GateGroup:
    """One group as the new log would hold it: `files` are the staged file (none when the group
    keeps no record) or, when `reused`, the group's own input files."""

    base_offset: int
    next_offset: int
    files: tuple[SegmentFile, ...]
    reused: bool
    tombstone_count: int
    expected: Expectation


def gate_buckets(groups: Sequence[GateGroup], budget_bytes: int) -> int:
    """Key buckets the gate of a partition's `groups` needs: as many as a map of the records the
    new log holds for them (`offset_map.buckets_for`)."""
    return buckets_for(sum(f.record_count for g in groups for f in g.files), budget_bytes)


@dataclass(frozen=True)
class GateTask:
    """The groups of one partition, checked by `buckets` tasks: this one checks the groups whose
    index falls to `bucket`; with one bucket it checks the keys' uniqueness too, with more it
    spills its groups' keys, bucket after bucket, to `spill` (relative to the partition) for the
    partition's `KeysTask`s."""

    partition: int
    prefix: str
    groups: tuple[GateGroup, ...]
    clean_end: int
    bucket: int = 0
    buckets: int = 1
    spill: str = ""

    def checks(self, index: int) -> bool:
        """Whether this task checks the group at `index` record by record."""
        return index % self.buckets == self.bucket


def _expired(tombstone: NDArray[np.bool_], horizons: pa.Array | pa.ChunkedArray, rules: GateRules) -> NDArray[np.bool_]:
    """Tombstones whose delete_horizon_ms has passed (KIP-534)."""
    return tombstone & bool_mask(pc.fill_null(pc.less_equal(horizons, rules.now_ms), False))


def _increasing(offsets: NDArray[np.int64], group: GateGroup, after: int | None) -> NDArray[np.bool_]:
    """Which offsets lie in the group's range and exceed the one before them (`after`: the last
    offset of the group's rows before these)."""
    ok = (offsets >= group.base_offset) & (offsets < group.next_offset)
    ok[1:] &= offsets[1:] > offsets[:-1]
    if after is not None and ok.size:
        ok[0] &= offsets[0] > after
    return ok


#: Rows read back, and which of them are the file's records as the new log holds them (None: all).
ReadBack = tuple[pa.Table, NDArray[np.bool_] | None]


def _read_back(
    store: ObjectStore, prefix: str, group: GateGroup, file: SegmentFile, fetched: FetchedFiles | None
) -> Iterator[ReadBack]:
    """A file of the group as the new log would hold it, a row group at a time. A rewritten
    group's staged file is read from the store. A kept group's without its values, timestamps and
    headers (its horizons only when it holds tombstones): through its key index when it has one
    (`_indexed`), else its keys and offsets as the task that cleaned it parsed them (`fetched`:
    the very object the new log keeps)."""
    if not group.reused:
        yield from ((t, None) for t in read_segment_row_groups(store, prefix + file.path, size_bytes=file.size_bytes))
    elif file.key_index is not None:
        yield _indexed(store, prefix, group, file, fetched)
    else:
        columns = ["offset", "key"] + (["delete_horizon_ms"] if group.tombstone_count else [])
        tables = read_segment_row_groups(store, prefix + file.path, columns=columns, expected=file, fetched=fetched)
        yield from ((t, None) for t in tables)


def _indexed(
    store: ObjectStore, prefix: str, group: GateGroup, file: SegmentFile, fetched: FetchedFiles | None
) -> ReadBack:
    """A kept file's rows as its key index holds them (offsets, keys and their hashes), with the
    file's horizons when the group holds tombstones, and which of them its deletion vector leaves
    (the index is read whole, as a group holds its keys anyway, `_Keys`; its rows are not taken
    apart: the keys are gathered only where two hashes repeat)."""
    rows = read_file_key_index(store, prefix, file, fetched)
    if group.tombstone_count:
        stored = read_segment_file(
            store, prefix + file.path, columns=["delete_horizon_ms"], expected=file, fetched=fetched, physical=True
        )
        rows = rows.append_column("delete_horizon_ms", stored.column("delete_horizon_ms"))
    return rows, None if file.deletion_vector is None else live_rows(store, prefix, file)


Violations = list[tuple[str, NDArray[np.int64]]]


class _GroupCheck:
    """The checks of one group, fed its records as read back, a row group at a time in order, so
    that a task holds one row group of the group's records (and the offsets) however large the
    group is."""

    def __init__(self, group: GateGroup, rules: GateRules, expected: OffsetSet | None) -> None:
        self.group, self.rules, self.expected = group, rules, expected
        self.found: Violations = []
        self.offsets: list[NDArray[np.int64]] = []  # a rewritten group's, for `_winner_violations`
        self.last: int | None = None
        self.increasing = True
        self.records = RecordDigest(RECORD_SCHEMA)
        self.horizons = RecordDigest(HORIZON_SCHEMA)

    def add(self, table: pa.Table, live: NDArray[np.bool_] | None) -> None:
        """The checks of each record of `table` (its `live` rows only, of a kept file)."""
        offsets = _live(table.column("offset").to_numpy(), live)
        increasing = _increasing(offsets, self.group, self.last)
        self.found += [
            ("has_key", offsets[~_live(bool_mask(pc.is_valid(table.column("key"))), live)]),
            ("offset_increasing", offsets[~increasing]),
        ]
        if offsets.size:
            self.last = int(offsets[-1])
        if self.group.reused:
            self.found += _kept_file_violations(table, live, self.group, self.rules)
        else:
            assert live is None  # a staged file is read back as written
            self.increasing &= bool(increasing.all())
            self.offsets.append(offsets)
            self.records.update(table)
            self.horizons.update(table)

    def violations(self) -> Violations:
        """Every violation found in the group's records, and those of what the group must hold
        and of the group as a whole."""
        if self.group.reused:
            return self.found
        offsets = np.concatenate(self.offsets) if self.offsets else np.zeros(0, np.int64)
        return self.found + self._winner_violations(offsets) + self._group_violations(offsets.size)

    def _winner_violations(self, offsets: NDArray[np.int64]) -> Violations:
        """A rewritten group holds exactly the offsets it must hold."""
        assert self.expected is not None
        expected = self.expected.offsets()
        if np.array_equal(offsets, expected):  # exactly the offsets it must hold, in order
            return []
        ascending = offsets if self.increasing else np.sort(offsets)  # sorted already, unless a check fails
        lacking = ~in_sorted(expected, ascending)
        return [("is_winner", offsets[~in_sorted(offsets, expected)]), ("winner_kept", expected[lacking])]

    def _group_violations(self, rows: int) -> Violations:
        """The checks of a rewritten group as a whole, flagged at its base offset."""
        group = self.group
        entry = group.files[0].record_count if group.files else 0
        checks = {
            "entry_matches": entry == rows,
            "unchanged": self.records.hexdigest() == group.expected.records,
            "horizon_as_expected": self.horizons.hexdigest() == group.expected.horizons,
        }
        base = np.array([group.base_offset], np.int64)
        return [(check, base) for check, ok in checks.items() if not ok]


def _kept_file_violations(
    table: pa.Table, live: NDArray[np.bool_] | None, group: GateGroup, rules: GateRules
) -> Violations:
    """A group that keeps its files holds each of its records (`live`) but its expired
    tombstones: a horizon that has passed (KIP-534) is a tombstone's that should have gone. Only
    tombstones carry a horizon (the writer stamps no other record, appends none), so the values
    are not read."""
    if not group.tombstone_count:
        return []
    offsets = table.column("offset").to_numpy()
    expired = bool_mask(pc.fill_null(pc.less_equal(table.column("delete_horizon_ms"), rules.now_ms), False))
    return [("is_winner", offsets[expired if live is None else expired & live])]


def _live(values: NDArray[T], live: NDArray[np.bool_] | None) -> NDArray[T]:
    """The `live` ones of `values` (all, without a mask)."""
    return values if live is None else values[live]


def _unstamped_tombstones(
    store: ObjectStore, prefix: str, group: GateGroup, fetched: FetchedFiles | None
) -> Violations:
    """A group that keeps its files has a horizon on each of its tombstones: its files store as
    many horizons as the manifest counts tombstones (both as stored, deletion vectors aside);
    flagged at the group's base offset when they store fewer."""
    if not group.reused or not group.tombstone_count:
        return []
    stamped = 0
    for file in group.files:
        table = read_segment_file(
            store, prefix + file.path, columns=["delete_horizon_ms"], expected=file, fetched=fetched, physical=True
        )
        stamped += table.num_rows - table.column("delete_horizon_ms").null_count
    return [] if stamped >= group.tombstone_count else [("horizon_as_expected", np.array([group.base_offset]))]


def _joined(parts: Sequence[NDArray[T]], dtype: type[T]) -> NDArray[T]:
    """`parts` end to end (none: empty)."""
    return np.concatenate(parts) if parts else np.zeros(0, dtype)


_UPPER = np.uint64(32)
_SLOTS = 1 << 20
_SLOT_MASK = np.uint32(_SLOTS - 1)


def _all_different(hashes: NDArray[np.uint64]) -> bool:
    """Whether no two of `hashes` are equal, without a sort of the 64-bit numbers: their upper
    halves are sorted (32-bit numbers: 44 ms for 1.37M hashes, 73 ms for the hashes themselves),
    and only the hashes whose upper half another shares (about n^2 / 2^33 pairs, 200 of 1.37M
    uniform hashes) are then sorted whole. They are found through a bitmap of those halves' low
    bits (`_SLOTS`), which lets in a few hashes besides: sorted with them, those compare as different."""
    upper = (hashes >> _UPPER).astype(np.uint32)
    ordered = np.sort(upper)
    shared = ordered[1:][ordered[1:] == ordered[:-1]]
    if shared.size == 0:
        return True
    slots = np.zeros(_SLOTS, bool)
    slots[shared & _SLOT_MASK] = True
    candidates = np.sort(hashes[slots[upper & _SLOT_MASK]])
    return not np.any(candidates[1:] == candidates[:-1])


def _violation_rows(partition: int, found: Violations) -> pa.Table:
    found = [(check, at) for check, at in found if at.size]
    offsets = [at for _, at in found]
    checks = [np.full(at.size, check, object) for check, at in found]
    every = np.concatenate(offsets) if offsets else np.zeros(0, np.int64)
    return pa.table(
        {
            "partition": pa.array(np.full(every.size, partition, np.int32)),
            "offset": pa.array(every, pa.int64()),
            "check": pa.array(np.concatenate(checks) if checks else [], pa.string()),
        },
        schema=VIOLATION_SCHEMA,
    )


@dataclass(frozen=True)
class GateOutcome:
    """A gate task's result: a VIOLATION_SCHEMA row per violation, or the reason a file of the
    partition could not be read back (the partition then fails the gate); and a record task's
    spilled keys, a Spill per bucket."""

    partition: int
    violations: pa.Table
    unreadable: str | None = None
    spills: tuple[Spill, ...] = ()
    #: The key index written of each file read back that gets one (`_index_of`), by its path.
    indexes: tuple[tuple[str, KeyIndex], ...] = ()


def _expected_offsets(store: ObjectStore, prefix: str, group: GateGroup) -> OffsetSet | None:
    """The offsets a rewritten group must hold, read from the store where pass 2 wrote them."""
    offsets = group.expected.offsets
    return load_offsets(store, prefix, offsets) if isinstance(offsets, StoredOffsets) else offsets


class _Keys:
    """The keys of the records read back, with their offsets and `key_hash`es (taken once, or as
    a kept file's key index holds them). A kept file's keys are held as its index holds them,
    with which rows its deletion vector leaves: its offsets and hashes are taken apart (numbers),
    its keys only when they are gathered (`keys`)."""

    def __init__(self) -> None:
        self.added: list[tuple[pa.ChunkedArray, NDArray[np.bool_] | None]] = []
        self.keyed: list[NDArray[np.bool_] | None] = []  # None: every one keyed
        self.offsets: list[NDArray[np.int64]] = []
        self.hashes: list[NDArray[np.uint64]] = []

    def add(self, table: pa.Table, live: NDArray[np.bool_] | None = None) -> None:
        """The records of `table` (its `live` rows), with its `HASH` column when it has one (an
        index's rows)."""
        keys = table.column("key")
        hashes = table.column(HASH).to_numpy() if HASH in table.column_names else key_hash(keys)
        self.added.append((keys, live))
        self.keyed.append(None if keys.null_count == 0 else _live(bool_mask(pc.is_valid(keys)), live))
        self.offsets.append(_live(table.column("offset").to_numpy(), live))
        self.hashes.append(_live(hashes, live))

    def repeated(self, clean_end: int) -> Violations:
        """The records whose key an earlier one of these holds (null keys are `has_key`'s), and
        those of them below `clean_end`. Only when two hashes repeat are the keys and offsets
        gathered and the keys compared (different hashes are different keys)."""
        keyed = self._keyed()
        hashes = _joined(self.hashes, np.uint64)
        hashed = hashes if keyed is None else hashes[keyed]
        if _all_different(hashed):
            return []
        keys, at = self.keys(), _joined(self.offsets, np.int64)
        if keyed is not None:
            keys, at = rows_where(pa.table({"key": keys}), keyed).column("key"), at[keyed]
        order, repeated = key_order(keys, hashed, [at])
        later = at[order[1:][repeated]]
        return [("unique_key", later), ("clean_keys_once", later[later < clean_end])]

    def _keyed(self) -> NDArray[np.bool_] | None:
        """Which of the records have a key (None: every one)."""
        if all(k is None for k in self.keyed):
            return None
        return np.concatenate(
            [np.ones(h.size, bool) if k is None else k for k, h in zip(self.keyed, self.hashes, strict=True)]
        )

    def keys(self, first: int = 0) -> pa.ChunkedArray:
        """The records' keys from the `first` table added on, in order."""
        parts = [
            keys if live is None else rows_where(pa.table({"key": keys}), live).column("key")
            for keys, live in self.added[first:]
        ]
        return pa.chunked_array([c for k in parts for c in k.chunks], pa.binary())

    def table(self, first: int = 0) -> pa.Table:
        """These keys from the `first` table added on: (key, offset, hash), in order."""
        return pa.table(
            {
                "key": self.keys(first),
                "offset": pa.array(_joined(self.offsets[first:], np.int64)),
                HASH: pa.array(_joined(self.hashes[first:], np.uint64)),
            },
            schema=KEYS_SCHEMA,
        )

    def spill(self, writer: SpillWriter) -> None:
        """Add these keys to a record task's spill, bucket after bucket."""
        rows = self.table()
        writer.write(rows, key_buckets(rows.column(HASH).to_numpy(), writer.n))


def _index_of(
    store: ObjectStore, prefix: str, file: SegmentFile, keys: _Keys, first: int
) -> list[tuple[str, KeyIndex]]:
    """The key index of a file, from its records as read back (`keys` from `first`): none for a
    file past `key_index.MAX_ROWS`, when a record has no key (the gate fails the file), when they
    are not all of the file's rows, or when the store would not take it (the file is then read as
    one without)."""
    if file.record_count > MAX_INDEXED_ROWS:
        return []
    rows = keys.table(first)
    if rows.column("key").null_count or rows.num_rows != file.record_count:
        return []
    try:
        return [(file.path, write_key_index(store, prefix, file.path, rows))]
    except StorageError:
        return []


def gate_check(spec: StoreSpec, rules: GateRules, task: GateTask, fetched: FetchedFiles | None = None) -> GateOutcome:
    """One record task: every violation in its groups, and every repeated key among them when the
    partition has one bucket, else its groups' keys spilled by bucket, a group at a time (the task
    holds one group's keys however many groups it checks). `fetched`: what the task that cleaned
    the partition read of its kept groups' files (`_read_back`). Each staged file read back gets
    its key index (`log.key_index`), from its keys as read, for the commit to reference."""
    store = spec.open()
    found: Violations = []
    keys = _Keys()
    indexes: list[tuple[str, KeyIndex]] = []
    sink = SpillWriter(store, task.prefix, task.spill, KEYS_SCHEMA, task.buckets) if task.buckets > 1 else None
    try:
        with sink or nullcontext():
            for index, group in enumerate(task.groups):
                if not task.checks(index):
                    continue
                check = _GroupCheck(group, rules, _expected_offsets(store, task.prefix, group))
                for file in group.files:
                    indexes += _check_file(store, task.prefix, group, file, fetched, check, keys)
                found += check.violations() + _unstamped_tombstones(store, task.prefix, group, fetched)
                if sink is not None:
                    keys.spill(sink)
                    keys = _Keys()
        spills = sink.spills() if sink is not None else ()
        if sink is None:
            found += keys.repeated(task.clean_end)
    except (CorruptSegment, StorageError) as exc:  # the partition fails the gate; the others go on
        return GateOutcome(task.partition, VIOLATION_SCHEMA.empty_table(), str(exc))
    return GateOutcome(task.partition, _violation_rows(task.partition, found), spills=spills, indexes=tuple(indexes))


def _check_file(
    store: ObjectStore,
    prefix: str,
    group: GateGroup,
    file: SegmentFile,
    fetched: FetchedFiles | None,
    check: _GroupCheck,
    keys: _Keys,
) -> list[tuple[str, KeyIndex]]:
    """Read back one file of a group into its checks and the task's keys; returns the key index
    written from what was read of a staged file, or of a kept file that has none and whose rows
    were all read (no deletion vector): a log's files get theirs at its next clean."""
    first = len(keys.added)
    for table, live in _read_back(store, prefix, group, file, fetched):
        check.add(table, live)
        keys.add(table, live)
    if group.reused and (file.key_index is not None or file.deletion_vector is not None):
        return []
    return _index_of(store, prefix, file, keys, first)


@dataclass(frozen=True)
class KeysTask:
    """One key bucket of a partition checked in several tasks: the bucket's share of every record
    task's spill, checked for repeated keys."""

    partition: int
    prefix: str
    clean_end: int
    spills: tuple[Spill, ...]


def gate_keys(spec: StoreSpec, task: KeysTask) -> GateOutcome:
    """One key task: every repeated key of its bucket."""
    store = spec.open()
    try:
        tables = [read_spill(store, task.prefix, s) for s in task.spills]
    except StorageError as exc:  # the partition fails the gate
        return GateOutcome(task.partition, VIOLATION_SCHEMA.empty_table(), f"a spill of the gate's keys: {exc}")
    spilled = _Keys()
    for table in tables:
        spilled.add(table)
    found = spilled.repeated(task.clean_end)
    return GateOutcome(task.partition, _violation_rows(task.partition, found))
