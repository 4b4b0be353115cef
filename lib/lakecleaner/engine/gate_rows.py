"""The quality gate's scan (runs in Spark tasks): input and staged output, side by side.

A task takes consecutive groups of one partition and reads, for each, the input files (every
column but the values) and the output file pass 2 staged — both from storage, after staging.
It emits two kinds of rows.

Output rows, one per record of the staged output (or of the kept files of a group that did not
change), with the facts that need only that record and the input record at its offset, settled
here with pyarrow so that values never travel to Spark: the record exists in the input and is
unchanged — key, timestamp and headers compared record by record, the values of the whole
group by digest (`digest`: the staged file's values against the input values pass 2 took at
the offsets it wrote, so a changed, added or lost value fails every record of the group, and
the input's values are not read a second time); delete_horizon_ms is the input's, or now +
delete.retention.ms on a tombstone that had none (KIP-534); offsets strictly increase through
the file and stay in the segment's range; the file holds as many records as its manifest entry
will say; the input record is a candidate (keyed, at or after the log start) and not an expired
tombstone. They also carry the input record's raw ordering columns.

Candidate rows: the input records that could be their key's winner. Only rows that cannot win
are left out, by rules that need no KIP-280 parsing (`prune`), so that the winner of every key
is decided in Spark, from the raw columns, by `quality`; and a candidate for which an output
row already stands (its offset, with the input's ordering columns) is not emitted twice.

Horizons are set only on tombstones, so "an expired tombstone" is read from the horizon alone
(horizon ≤ now); a tombstone of the output is one of the input when the values' digests match.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

from lakecleaner.config import LONG_MAX, TopicConfig
from lakecleaner.engine.digest import value_digest
from lakecleaner.engine.keys import LOWEST, is_highest, key_codes
from lakecleaner.engine.sparkio import Collector, batches
from lakecleaner.engine.storage import StoreSpec
from lakecleaner.errors import CorruptSegment
from lakecleaner.io import ObjectStore
from lakecleaner.log.manifest import SegmentFile
from lakecleaner.log.records import HEADER_TYPE, SEGMENT_SCHEMA
from lakecleaner.log.segment_files import read_segment_file

GATE_SCHEMA = pa.schema(
    [
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("is_output", pa.bool_()),
        ("key", pa.binary()),
        ("timestamp", pa.int64()),
        ("headers", HEADER_TYPE),
        ("candidate", pa.bool_()),
        ("expired", pa.bool_()),
        ("has_key", pa.bool_()),
        ("in_input", pa.bool_()),
        ("unchanged", pa.bool_()),
        ("horizon_as_expected", pa.bool_()),
        ("increasing", pa.bool_()),
        ("entry_matches", pa.bool_()),
    ]
)
_CHEAP = ["offset", "key", "timestamp", "headers", "delete_horizon_ms"]
Columns = dict[str, pa.Array | pa.ChunkedArray]


@dataclass(frozen=True)
class GateGroup:
    """One group: its input files and its staged output. `reused`: the group kept its files;
    otherwise `output` is the staged file, or None when the group kept no record, and
    `value_digest` digests the input values of the records pass 2 says it wrote (`digest`)."""

    base_offset: int
    next_offset: int
    inputs: tuple[SegmentFile, ...]
    reused: bool
    output: SegmentFile | None
    tombstone_count: int
    value_digest: str | None = None

    @property
    def size_bytes(self) -> int:
        return sum(f.size_bytes for f in self.inputs) + (0 if self.output is None else self.output.size_bytes)


@dataclass(frozen=True)
class GateTask:
    """Consecutive groups of one partition, checked by one task."""

    partition: int
    prefix: str
    log_start_offset: int
    groups: tuple[GateGroup, ...]

    @property
    def size_bytes(self) -> int:
        return sum(g.size_bytes for g in self.groups)


@dataclass(frozen=True)
class GateRules:
    """What the scan needs of the topic and the run."""

    now_ms: int
    horizon_ms: int
    strategy: str
    header: str

    @staticmethod
    def of(config: TopicConfig, now_ms: int) -> GateRules:
        horizon = min(now_ms + config.delete_retention_ms, LONG_MAX)
        return GateRules(now_ms, horizon, config.compaction_strategy, config.compaction_strategy_header)


def _read(store: ObjectStore, prefix: str, files: tuple[SegmentFile, ...], columns: list[str] | None) -> pa.Table:
    tables = [read_segment_file(store, prefix + f.path, columns=columns, expected=f) for f in files]
    if not tables:
        return pa.schema([SEGMENT_SCHEMA.field(c) for c in columns or SEGMENT_SCHEMA.names]).empty_table()
    return pa.concat_tables(tables).combine_chunks()


def _rows(partition: int, n: int, columns: Columns, rules: GateRules) -> pa.Table:
    """A GATE_SCHEMA table of `n` rows: the given columns, the others null, and null too the
    ordering columns the strategy does not rank by (less to send to Spark)."""
    given = {**columns, "partition": pa.array(np.full(n, partition, np.int32))}
    if rules.strategy != "header":
        given.pop("headers", None)
    if rules.strategy != "timestamp":
        given.pop("timestamp", None)
    return pa.table({f.name: given.get(f.name, pa.nulls(n, f.type)) for f in GATE_SCHEMA}).cast(GATE_SCHEMA)


def _np(values: pa.Array | pa.ChunkedArray) -> NDArray[np.bool_]:
    return np.asarray(values.to_numpy(zero_copy_only=False), bool)


def _equal(a: pa.Array, b: pa.Array) -> NDArray[np.bool_]:
    """Null-safe element equality of two arrays of a primitive or binary type."""
    both_null = pc.and_(pc.is_null(a), pc.is_null(b))
    return _np(pc.or_(both_null, pc.fill_null(pc.equal(a, b), False)))


def _lists_equal(a: pa.Array, b: pa.Array) -> NDArray[np.bool_]:
    """Null-safe equality of two header lists, row by row (order and duplicates matter)."""
    result = _equal(pc.list_value_length(a), pc.list_value_length(b))
    rows = np.flatnonzero(_np(pc.fill_null(pc.equal(pc.list_value_length(a), pc.list_value_length(b)), False)))
    if rows.size:
        left, right = a.take(pa.array(rows)), b.take(pa.array(rows))
        flat_left, flat_right = pc.list_flatten(left), pc.list_flatten(right)
        same = _equal(flat_left.field("key"), flat_right.field("key")) & _equal(
            flat_left.field("value"), flat_right.field("value")
        )
        parents = pc.list_parent_indices(left).to_numpy()
        result[rows[np.unique(parents[~same])]] = False
    return result


def _same_records(before: pa.Table, after: pa.Table) -> NDArray[np.bool_]:
    """Whether each row of `after` has the key, timestamp and headers of the row of `before`
    beside it (values are compared by digest, for the whole group)."""
    if after.num_rows == 0:
        return np.zeros(0, bool)
    before, after = before.combine_chunks(), after.combine_chunks()

    def both(name: str) -> tuple[pa.Array, pa.Array]:
        return before.column(name).chunk(0), after.column(name).chunk(0)

    return _equal(*both("key")) & _equal(*both("timestamp")) & _lists_equal(*both("headers"))


def _increasing(offsets: NDArray[np.int64], group: GateGroup) -> NDArray[np.bool_]:
    ok = (offsets >= group.base_offset) & (offsets < group.next_offset)
    ok[1:] &= offsets[1:] > offsets[:-1]
    return ok


def _candidates(table: pa.Table, task: GateTask) -> NDArray[np.bool_]:
    in_range: NDArray[np.bool_] = table.column("offset").to_numpy() >= task.log_start_offset
    return _np(pc.is_valid(table.column("key"))) & in_range


def _expired(tombstone: NDArray[np.bool_] | None, horizons: pa.Array, rules: GateRules) -> NDArray[np.bool_]:
    passed = _np(pc.fill_null(pc.less_equal(horizons, rules.now_ms), False))
    return passed if tombstone is None else passed & tombstone


def _output_side(
    inputs: pa.Table, output: pa.Table, matched: NDArray[np.bool_], values_match: bool, rules: GateRules
) -> Columns:
    """Flags of output records against the input record beside each (`inputs` row-aligned,
    without values: the output's values match the input's when `values_match`, so a null value
    in the output is a tombstone of the input)."""
    tombstone = _np(pc.is_null(output.column("value")))
    horizon = inputs.column("delete_horizon_ms")
    expected = np.where(tombstone, rules.horizon_ms, 0)
    expected_horizon = pa.array(expected, pa.int64(), mask=~tombstone)
    expected_horizon = pc.coalesce(horizon, expected_horizon)
    return {
        "has_key": pc.is_valid(output.column("key")),
        "in_input": pa.array(matched),
        "unchanged": pa.array(matched & values_match & _same_records(inputs, output)),
        "horizon_as_expected": pa.array(matched & _equal(output.column("delete_horizon_ms"), expected_horizon)),
        "expired": pa.array(_expired(tombstone, horizon, rules)),
    }


def _reused_rows(store: ObjectStore, task: GateTask, group: GateGroup, rules: GateRules) -> tuple[pa.Table, pa.Table]:
    """(output rows, input rows) of a group that kept its files: each record is both, unchanged.
    Values are read only when the group holds tombstones, to check they all have a horizon."""
    with_values = [*_CHEAP, "value"] if group.tombstone_count else _CHEAP
    table = _read(store, task.prefix, group.inputs, with_values)
    n = table.num_rows
    true = pa.array(np.ones(n, bool))
    horizon = table.column("delete_horizon_ms")
    tombstone = _np(pc.is_null(table.column("value"))) if group.tombstone_count else np.zeros(n, bool)
    output = _rows(
        task.partition,
        n,
        {
            "offset": table.column("offset"),
            "is_output": true,
            "key": table.column("key"),
            "timestamp": table.column("timestamp"),
            "headers": table.column("headers"),
            "candidate": pa.array(_candidates(table, task)),
            "expired": pa.array(_expired(tombstone, horizon, rules)),
            "has_key": pc.is_valid(table.column("key")),
            "in_input": true,
            "unchanged": true,
            "horizon_as_expected": pa.array(~tombstone | _np(pc.is_valid(horizon))),
            "increasing": pa.array(_increasing(table.column("offset").to_numpy(), group)),
            "entry_matches": true,
        },
        rules,
    )
    return output, table


def _rewritten_rows(
    store: ObjectStore, task: GateTask, group: GateGroup, rules: GateRules
) -> tuple[pa.Table, pa.Table]:
    """(output rows, input rows) of a group whose staged file replaces its input files. The
    input is read without its values: they are compared by digest with what pass 2 read."""
    inputs = _read(store, task.prefix, group.inputs, _CHEAP)
    output = (
        SEGMENT_SCHEMA.empty_table()
        if group.output is None
        else read_segment_file(store, task.prefix + group.output.path)
    )
    in_offsets, out_offsets = inputs.column("offset").to_numpy(), output.column("offset").to_numpy()
    n = len(out_offsets)
    position = np.minimum(np.searchsorted(in_offsets, out_offsets), max(len(in_offsets) - 1, 0))
    matched = in_offsets[position] == out_offsets if len(in_offsets) else np.zeros(n, bool)
    if len(in_offsets):
        beside = inputs.take(pa.array(position, pa.int64(), mask=~matched))
    else:
        beside = pa.table({f.name: pa.nulls(n, f.type) for f in inputs.schema})
    columns = {
        "offset": output.column("offset"),
        "is_output": pa.array(np.ones(n, bool)),
        "key": beside.column("key"),
        "timestamp": beside.column("timestamp"),
        "headers": beside.column("headers"),
        "candidate": pa.array(matched & _candidates(beside, task)),
        **_output_side(beside, output, matched, value_digest(output.column("value")) == group.value_digest, rules),
        "increasing": pa.array(_increasing(out_offsets, group)),
        "entry_matches": pa.array(np.full(n, group.output is not None and group.output.record_count == n)),
    }
    return _rows(task.partition, n, columns, rules), inputs


def prune(candidates: pa.Table, rules: GateRules) -> pa.Table:
    """The candidates (keyed rows) that can still be their key's winner. `offset`: the highest
    offset per key. `timestamp`: the highest offset among the rows with the key's highest
    timestamp. `header`: every row carrying a header with the version's name (it may hold a
    version), and the highest offset among the rows without one (none of them has a version)."""
    if candidates.num_rows == 0:
        return candidates
    codes, keys = key_codes(candidates.column("key"))
    offsets = candidates.column("offset").to_numpy()
    if rules.strategy == "timestamp":
        latest = is_highest(codes, candidates.column("timestamp").to_numpy(), keys)
        keep = latest & is_highest(codes, np.where(latest, offsets, LOWEST), keys)
    elif rules.strategy == "header":
        headers = candidates.column("headers").combine_chunks()
        named = pc.fill_null(pc.equal(pc.list_flatten(headers).field("key"), rules.header), False)
        has_name = np.zeros(candidates.num_rows, bool)
        has_name[pc.list_parent_indices(headers).to_numpy()[_np(named)]] = True
        keep = has_name | (~has_name & is_highest(codes, np.where(has_name, LOWEST, offsets), keys))
    else:
        keep = is_highest(codes, offsets, keys)
    return candidates.filter(pa.array(keep))


def _in_sorted(values: NDArray[np.int64], sorted_arrays: list[pa.Array]) -> NDArray[np.bool_]:
    """Whether each value is in the concatenation of `sorted_arrays` (ascending, in order)."""
    members = np.concatenate([a.to_numpy() for a in sorted_arrays])
    if members.size == 0:
        return np.zeros(values.size, bool)
    at = np.minimum(np.searchsorted(members, values), members.size - 1)
    return np.asarray(members[at] == values, bool)


def _candidate_rows(inputs: list[pa.Table], outputs: list[pa.Array], task: GateTask, rules: GateRules) -> pa.Table:
    """The task's candidates, less the records an output row already stands for (`outputs`:
    offsets of output rows that are candidates, which carry the same ordering columns)."""
    table = pa.concat_tables(inputs).combine_chunks() if inputs else SEGMENT_SCHEMA.empty_table().select(_CHEAP)
    keyed = prune(table.filter(pa.array(_candidates(table, task))).select(_CHEAP), rules)
    if outputs:
        keyed = keyed.filter(pa.array(~_in_sorted(keyed.column("offset").to_numpy(), outputs)))
    return _rows(
        task.partition,
        keyed.num_rows,
        {
            "offset": keyed.column("offset"),
            "is_output": pa.array(np.zeros(keyed.num_rows, bool)),
            "key": keyed.column("key"),
            "timestamp": keyed.column("timestamp"),
            "headers": keyed.column("headers"),
            "expired": pa.array(_expired(None, keyed.column("delete_horizon_ms"), rules)),
        },
        rules,
    )


def gate_scan(spec: StoreSpec, rules: GateRules, errors: Collector, task: GateTask) -> Iterator[pa.RecordBatch]:
    """One gate task: output rows of every group, then the task's candidate rows. An unreadable
    file is reported through `errors` (the partition then fails the gate)."""
    store = spec.open()
    inputs: list[pa.Table] = []
    outputs: list[pa.Array] = []
    try:
        for group in task.groups:
            scan = _reused_rows if group.reused else _rewritten_rows
            output, table = scan(store, task, group, rules)
            inputs.append(table.select(_CHEAP))
            candidate = output.column("candidate").combine_chunks()
            outputs.append(output.column("offset").combine_chunks().filter(pc.fill_null(candidate, False)))
            yield from batches(output)
        candidates = _candidate_rows(inputs, outputs, task, rules)
    except CorruptSegment as exc:
        errors.add(task.partition, str(exc))
        return
    yield from batches(candidates)
