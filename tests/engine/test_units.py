"""Pure parts of the engine: requests, grouping, KIP-280 versions, the record rule, the writer."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import pstats
import tracemalloc
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from lakecleaner.config import ENV_PROFILE_DIR, StorageSettings, TopicConfig
from lakecleaner.engine import offset_set
from lakecleaner.engine.digest import RecordDigest
from lakecleaner.engine.gate_rows import HORIZON_SCHEMA, RECORD_SCHEMA, Expected, GateRules, _all_different
from lakecleaner.engine.inputs import StalePlan, compaction_input, group_segments
from lakecleaner.engine.keys import in_sorted, key_buckets, key_hash, key_order
from lakecleaner.engine.memory import Growth
from lakecleaner.engine.offset_map import MapBudget, MapTask, planned_buckets
from lakecleaner.engine.offset_set import Members, OffsetSet
from lakecleaner.engine.profiling import profiled
from lakecleaner.engine.recopy import RowCounts, _to_prefetch, clean_rows
from lakecleaner.engine.requests import CompactionRequest, requests_for
from lakecleaner.engine.run import failures_text
from lakecleaner.engine.sparkio import Overlap
from lakecleaner.engine.storage import StoreSpec
from lakecleaner.engine.versions import header_versions, latest_per_key, order_table
from lakecleaner.log.key_index import KeyIndex
from lakecleaner.log.manifest import Manifest, Segment, SegmentFile
from lakecleaner.log.records import HEADER_TYPE, SEGMENT_SCHEMA, decode_version, encode_version
from tests.engine.reference_model import malformed, version


def seg(
    base: int, end: int, size: int = 10, *, sealed: bool = True, max_ts: int = 0, horizon: int | None = None
) -> Segment:
    return Segment(
        f"s{base}", base, end, size_bytes=size, sealed=sealed, max_timestamp=max_ts, earliest_delete_horizon_ms=horizon
    )


def manifest(*segments: Segment, checkpoint: int | None = None, start: int = 0) -> Manifest:
    end = segments[-1].next_offset if segments else 0
    return Manifest("t", 0, 5, start, end, checkpoint, segments)


COMPACT = TopicConfig(cleanup_policy=frozenset({"compact"}))


def test_requests_for_stops_at_the_active_segment() -> None:
    m = manifest(seg(0, 10), seg(10, 20), seg(20, 25, sealed=False))
    assert requests_for(m, COMPACT, 1000) == CompactionRequest("t", 0, 0, 20, 5)


def test_requests_for_applies_the_min_compaction_lag_as_a_prefix_rule() -> None:
    config = TopicConfig(cleanup_policy=frozenset({"compact"}), min_compaction_lag_ms=100)
    m = manifest(seg(0, 10, max_ts=850), seg(10, 20, max_ts=950), seg(20, 30, max_ts=10))
    request = requests_for(m, config, 1000)
    assert request is not None and request.first_uncleanable_offset == 10


def test_requests_for_resets_a_checkpoint_out_of_range_and_skips_clean_logs() -> None:
    m = manifest(seg(0, 10), seg(10, 20))
    assert requests_for(manifest(seg(0, 10), seg(10, 20), checkpoint=99), COMPACT, 0) == CompactionRequest(
        "t", 0, 0, 20, 5
    )
    assert requests_for(manifest(seg(0, 10), seg(10, 20), checkpoint=15), COMPACT, 0) == CompactionRequest(
        "t", 0, 15, 20, 5
    )  # Kafka's F: the checkpoint itself, inside a segment
    assert requests_for(manifest(*m.segments, checkpoint=20), COMPACT, 0) is None
    expired = manifest(seg(0, 10, horizon=500), seg(10, 20), checkpoint=20)
    assert requests_for(expired, COMPACT, 499) is None
    assert requests_for(expired, COMPACT, 500) == CompactionRequest("t", 0, 20, 20, 5)
    assert requests_for(manifest(), COMPACT, 0) is None


def test_grouping_is_greedy_by_bytes_and_keeps_big_segments_alone() -> None:
    segments = [seg(0, 1, 40), seg(1, 2, 60), seg(2, 3, 1), seg(3, 4, 500), seg(4, 4, 0), seg(4, 5, 99)]
    groups = group_segments(segments, 100)
    assert [[s.base_offset for s in g] for g in groups] == [[0, 1], [2], [3], [4, 4]]


def test_with_vectors_the_cleaned_and_dirty_sections_are_grouped_apart() -> None:
    """Issue 79: where deletion vectors may serve, no group spans the first dirty offset (a
    segment holding it counts as dirty); without them Kafka's greedy grouping crosses it."""
    segments = [seg(0, 10, 30), seg(10, 20, 30), seg(20, 30, 10), seg(30, 40, 10)]
    m = manifest(*segments, checkpoint=20)
    request = CompactionRequest("t", 0, 20, 40, 5)
    kafka = compaction_input(m, request, 100)
    assert [[s.base_offset for s in g.segments] for g in kafka.groups] == [[0, 10, 20, 30]]
    apart = compaction_input(m, request, 100, vectors=True)
    assert [[s.base_offset for s in g.segments] for g in apart.groups] == [[0, 10], [20, 30]]
    inside = compaction_input(manifest(*segments, checkpoint=15), CompactionRequest("t", 0, 15, 40, 5), 100, True)
    assert [[s.base_offset for s in g.segments] for g in inside.groups] == [[0], [10, 20, 30]]
    assert group_segments(segments, 100, apart_at=0) == [tuple(segments)]


def test_a_pass_erases_what_it_supersedes_by_its_dirty_sections_earliest_kip_354_deadline() -> None:
    """The deadline a vector written by the pass carries: the earliest rolling timestamp of the
    dirty section's segments + max.compaction.lag.ms; now without a dirty segment; None without
    the lag."""
    segments = [
        dataclasses.replace(seg(0, 10), first_batch_max_timestamp=100),
        dataclasses.replace(seg(10, 20), first_batch_max_timestamp=700),
        dataclasses.replace(seg(20, 30), first_batch_max_timestamp=500),
    ]
    lag = TopicConfig(cleanup_policy=frozenset({"compact"}), max_compaction_lag_ms=1000)
    plan = compaction_input(manifest(*segments, checkpoint=10), CompactionRequest("t", 0, 10, 30, 5), 100, True)
    assert plan.erase_by_ms(lag, 9999) == 1500
    assert plan.erase_by_ms(COMPACT, 9999) is None
    clean = compaction_input(manifest(*segments, checkpoint=30), CompactionRequest("t", 0, 30, 30, 5), 100, True)
    assert clean.erase_by_ms(lag, 9999) == 9999


def test_plan_rejects_a_first_uncleanable_offset_that_is_no_longer_a_boundary() -> None:
    m = manifest(seg(0, 10), seg(10, 20, sealed=False))
    with pytest.raises(StalePlan, match="not a segment boundary"):
        compaction_input(m, CompactionRequest("t", 0, 0, 5, 5), 100)
    with pytest.raises(StalePlan, match="active segment"):
        compaction_input(m, CompactionRequest("t", 0, 0, 20, 5), 100)
    plan = compaction_input(manifest(seg(0, 10), seg(10, 20), start=12), CompactionRequest("t", 0, 0, 20, 5), 100)
    assert [s.base_offset for s in plan.input_segments] == [10]


def test_pass_1_maps_the_dirty_section_and_streams_the_cleaned_one_past_it() -> None:
    """The cleaned section ends at the last input boundary at or below the checkpoint (none when a
    trim moved the log start into a segment never cleaned); buckets are planned from the dirty
    section's records, except that a large partition is split over idle cores, and then into
    enough buckets for all of its rows."""
    million = 1_000_000
    segments = [
        Segment(f"s{b}", b, b + million, record_count=million, size_bytes=10) for b in (0, million, 2 * million)
    ]
    segments.append(Segment("new", 3 * million, 3 * million + 10_000, record_count=10_000, size_bytes=10, sealed=True))
    request = CompactionRequest("t", 0, 0, 3 * million + 10_000, 5)
    budget = MapBudget(buffer_bytes=million, load_factor=1.0)  # 25,000 records a map
    mostly_clean = compaction_input(manifest(*segments, checkpoint=3 * million), request, 100)
    assert (mostly_clean.clean_end, mostly_clean.dirty_record_count) == (3 * million, 10_000)
    assert planned_buckets([mostly_clean], budget, parallelism=1) == {0: 1}
    assert planned_buckets([mostly_clean], budget, parallelism=2) == {0: budget.buckets(3 * million + 10_000)}
    inside = compaction_input(manifest(*segments, checkpoint=2 * million + 5), request, 100)
    assert (inside.clean_end, inside.dirty_record_count) == (2 * million, million + 10_000)
    uncleaned = compaction_input(manifest(*segments), request, 100)
    assert (uncleaned.clean_end, uncleaned.dirty_record_count) == (0, 3 * million + 10_000)
    assert planned_buckets([uncleaned], budget, parallelism=1) == {0: budget.buckets(3 * million + 10_000)}
    trimmed = manifest(*segments, start=million + 5, checkpoint=million - 5)  # into a segment never cleaned
    inside_uncleaned = compaction_input(trimmed, request, 100)
    assert (inside_uncleaned.clean_end, inside_uncleaned.dirty_record_count) == (million, 2 * million + 10_000)


header_lists = st.lists(
    st.lists(
        st.tuples(
            st.sampled_from(["v", "w"]),
            st.one_of(st.none(), st.binary(max_size=10), st.integers(-(2**63), 2**63 - 1).map(encode_version)),
        ),
        max_size=4,
    ),
    max_size=20,
)


@settings(deadline=None)
@given(header_lists)
def test_header_versions_match_the_rule(lists: list[list[tuple[str, bytes | None]]]) -> None:
    array = pa.array([[{"key": k, "value": v} for k, v in hs] for hs in lists], HEADER_TYPE)
    got = header_versions(array.slice(1) if len(lists) > 1 else array, "v")
    rows = [{"headers": [{"key": k, "value": v} for k, v in hs]} for hs in (lists[1:] if len(lists) > 1 else lists)]
    expected = [version(r, "v") for r in rows]
    assert [int(v) if h else None for h, v in zip(got.has_version, got.version, strict=True)] == expected
    assert got.malformed_records == sum(malformed(r, "v") for r in rows)


def test_decode_version_is_the_engine_rule() -> None:
    for value in (-(2**63), -1, 0, 1, 2**63 - 1):
        got = header_versions(pa.array([[{"key": "v", "value": encode_version(value)}]], HEADER_TYPE), "v")
        assert int(got.version[0]) == decode_version(encode_version(value)) == value


def test_latest_per_key_breaks_ties_by_offset() -> None:
    table = pa.table(
        {
            "offset": pa.array([1, 2, 3, 4, 5], pa.int64()),
            "key": pa.array([b"a", b"a", None, b"b", b"a"], pa.binary()),
            "timestamp": pa.array([9, 9, 0, 1, 8], pa.int64()),
            "headers": pa.nulls(5, HEADER_TYPE),
        }
    )
    ordered, bad = order_table(table, TopicConfig(compaction_strategy="timestamp"))
    winners = latest_per_key(ordered)
    assert sorted(winners.column("offset").to_pylist()) == [2, 4] and bad == 0


def test_latest_per_key_by_offset_drops_null_keys_and_keeps_each_keys_highest_offset() -> None:
    table = pa.table({"offset": pa.array([1, 2, 3, 4, 5], pa.int64()), "key": pa.array([b"a", None, b"a", b"b", None])})
    ordered, _ = order_table(table, TopicConfig(compaction_strategy="offset"))
    winners = sorted(latest_per_key(ordered).to_pylist(), key=lambda r: r["offset"])
    assert winners == [{"key": b"a", "offset": 3}, {"key": b"b", "offset": 4}]


def test_clean_rows_applies_the_record_rule() -> None:
    table = pa.table(
        {
            "offset": [10, 11, 12, 13, 14, 15],
            "timestamp": [0] * 6,
            "key": [b"a", b"b", None, b"c", b"d", b"e"],
            "value": [b"x", None, b"y", None, None, b"z"],
            "headers": [[]] * 6,
            "delete_horizon_ms": [None, None, None, 100, 101, None],
        },
        schema=SEGMENT_SCHEMA,
    )
    counts = RowCounts()
    kept, rows = clean_rows(table, np.array([10, 11, 13, 14], np.int64), 10, 100, 600, counts)
    assert kept.column("offset").to_pylist() == [10, 11, 14]
    assert rows.tolist() == [True, True, False, False, True, False]
    assert kept.column("delete_horizon_ms").to_pylist() == [None, 600, 101]
    assert counts == RowCounts(superseded=1, unkeyed=1, below_log_start=0, tombstones_stamped=1, tombstones_removed=1)


cell_values = (
    st.one_of(st.none(), st.sampled_from([b"a", b"b", b"c"])),
    st.one_of(st.none(), st.binary(max_size=6)),
    st.integers(0, 3),
    st.one_of(
        st.none(),
        st.lists(st.tuples(st.sampled_from(["v", "w"]), st.one_of(st.none(), st.binary(max_size=4))), max_size=2),
    ),
    st.one_of(st.none(), st.integers(0, 200)),
)
segment_rows = st.lists(st.tuples(*cell_values), max_size=25)


def segment_table(rows: list[tuple[Any, ...]]) -> pa.Table:
    return pa.table(
        {
            "offset": pa.array(range(10, 10 + len(rows)), pa.int64()),
            "timestamp": pa.array([r[2] for r in rows], pa.int64()),
            "key": pa.array([r[0] for r in rows], pa.binary()),
            "value": pa.array([r[1] for r in rows], pa.binary()),
            "headers": pa.array(
                [None if r[3] is None else [{"key": n, "value": v} for n, v in r[3]] for r in rows], HEADER_TYPE
            ),
            "delete_horizon_ms": pa.array([r[4] for r in rows], pa.int64()),
        },
        schema=SEGMENT_SCHEMA,
    )


@settings(deadline=None)
@given(segment_rows, st.lists(st.integers(0, 25), max_size=3), st.data())
def test_a_record_digest_is_the_same_however_the_records_are_cut_and_changes_with_any_cell(
    rows: list[tuple[Any, ...]], cuts: list[int], data: st.DataObject
) -> None:
    table = segment_table(rows)
    whole = RecordDigest(SEGMENT_SCHEMA).update(table).hexdigest()
    bounds = sorted({0, len(rows), *[min(c, len(rows)) for c in cuts]})
    pieces = RecordDigest(SEGMENT_SCHEMA)
    for lo, hi in itertools.pairwise(bounds):
        pieces.update(table.slice(lo, hi - lo))
    assert pieces.hexdigest() == whole
    if rows:
        i = data.draw(st.integers(0, len(rows) - 1))
        column = data.draw(st.integers(0, 4))
        changed = list(rows[i])
        changed[column] = data.draw(
            segment_rows.map(lambda r: r[0][column] if r else None).filter(lambda v: v != rows[i][column])
        )
        other = segment_table([*rows[:i], tuple(changed), *rows[i + 1 :]])
        assert RecordDigest(SEGMENT_SCHEMA).update(other).hexdigest() != whole


@settings(deadline=None)
@given(segment_rows, st.data())
def test_the_gates_expectation_is_what_the_record_rule_keeps(rows: list[tuple[Any, ...]], data: st.DataObject) -> None:
    table = segment_table(rows)
    offsets = table.column("offset").to_pylist()
    winners = np.array(sorted(data.draw(st.sets(st.sampled_from(offsets)))) if offsets else [], np.int64)
    log_start = data.draw(st.integers(10, 12))
    expected = Expected(GateRules(now_ms=100, horizon_ms=600), 10, 10 + len(rows))
    first, second = table.slice(0, len(rows) // 2), table.slice(len(rows) // 2)
    expected.add(first, winners, log_start)  # taking the rows itself
    expected.add(second, winners, log_start, taken=clean_rows(second, winners, log_start, 100, 600, RowCounts()))
    result = expected.result()
    kept, _ = clean_rows(table, winners, log_start, 100, 600, RowCounts())
    assert result.offsets is not None and result.offsets.offsets().tolist() == kept.column("offset").to_pylist()
    assert result.records == RecordDigest(RECORD_SCHEMA).update(kept).hexdigest()
    assert result.horizons == RecordDigest(HORIZON_SCHEMA).update(kept).hexdigest()
    nothing = (np.zeros(table.num_rows, bool), table.slice(0, 0))  # rows taken that are not the ones held
    other = Expected(GateRules(now_ms=100, horizon_ms=600), 10, 10 + len(rows))
    other.add(table, winners, log_start, taken=nothing)
    assert other.result() == result


@given(st.lists(st.integers(-50, 400)), st.sets(st.integers(-50, 400)))
def test_in_sorted_is_membership(values: list[int], members: set[int]) -> None:
    found = in_sorted(np.array(values, np.int64), np.array(sorted(members), np.int64))
    assert found.tolist() == [v in members for v in values]


_EDGE_HASHES = [0, 1, 2**32, 2**52, 2**52 + 1, 2**63, 2**64 - 1]  # halves shared, slots shared


@given(st.lists(st.one_of(st.integers(0, 2**64 - 1), st.sampled_from(_EDGE_HASHES)), max_size=60))
def test_all_different_is_whether_no_hash_repeats(hashes: list[int]) -> None:
    assert _all_different(np.array(hashes, np.uint64)) == (len(set(hashes)) == len(hashes))


binary_keys = st.lists(st.one_of(st.binary(max_size=20), st.sampled_from([b"", b"k", b"key-0001"])), max_size=40)


@given(binary_keys, st.integers(0, 5))
def test_key_hash_depends_only_on_the_key(keys: list[bytes], cut: int) -> None:
    """Equal keys hash alike wherever they are stored: in one array or another, after a slice,
    among keys of one width or of many."""
    whole = key_hash(pa.array(keys, pa.binary()))
    alone = [int(key_hash(pa.array([k], pa.binary()))[0]) for k in keys]
    assert whole.tolist() == alone
    sliced = pa.array([b"x" * cut, *keys], pa.binary()).slice(1)
    assert key_hash(sliced).tolist() == alone
    chunked = pa.chunked_array([pa.array(keys[:cut], pa.binary()), pa.array(keys[cut:], pa.binary())], pa.binary())
    assert key_hash(chunked).tolist() == alone


def test_key_hash_spreads_keys_over_buckets() -> None:
    keys = pa.array([b"key-%07d" % i for i in range(100_000)], pa.binary())
    counts = np.bincount(key_buckets(key_hash(keys), 16).astype(np.int64), minlength=16)
    assert counts.min() > 100_000 / 16 * 0.9 and counts.max() < 100_000 / 16 * 1.1
    assert len(set(key_hash(keys).tolist())) == 100_000


@given(st.sets(st.integers(0, 300)), st.integers(0, 20), st.integers(0, 20), st.sampled_from([301, 10**12]))
def test_an_offset_set_holds_its_members(members: set[int], cut_low: int, cut_high: int, span: int) -> None:
    """Dense or sparse (the same members over 301 offsets or over a trillion), a set holds its
    members, cuts into its groups' shares and joins disjoint sets."""
    offsets = np.array(sorted(members), np.int64) + 1000
    whole = OffsetSet.of(offsets[::-1].copy(), 1000, 1000 + span)
    assert whole.offsets().tolist() == offsets.tolist() and len(whole) == len(members)
    low, high = 1000 + cut_low, 1301 - cut_high
    pieces = whole.split([(1000, low), (low, high), (high, 1000 + span)])
    assert [p.offsets().tolist() for p in pieces] == [
        [o for o in offsets.tolist() if a <= o < b] for a, b in ((1000, low), (low, high), (high, 1000 + span))
    ]
    joined = Members(1000, 1000 + span, len(members))
    for parity in (0, 1):
        joined.join(OffsetSet.of(offsets[offsets % 2 == parity], 1000, 1000 + span))
    assert joined.result().offsets().tolist() == offsets.tolist()


@given(st.sets(st.integers(0, 999)), st.lists(st.integers(0, 1000), max_size=6))
def test_a_dense_offset_set_cuts_at_any_bit(members: set[int], cuts: list[int]) -> None:
    """A bitmap cut where its groups start and end, at any bit of any byte, gives each group
    exactly its members, whatever the set's low offset."""
    offsets = np.array(sorted(members), np.int64) + 7
    whole = OffsetSet.of(offsets, 7, 1007)
    bounds = sorted({0, 1000, *cuts})
    ranges = [(7 + a, 7 + b) for a, b in itertools.pairwise(bounds)]
    for (low, high), piece in zip(ranges, whole.split(ranges), strict=True):
        assert (piece.low, piece.high, len(piece)) == (low, high, int(((offsets >= low) & (offsets < high)).sum()))
        assert piece.offsets().tolist() == [o for o in offsets.tolist() if low <= o < high]


class Allocated:
    """The most bytes held at once inside a `peak_allocated` block, by numpy and Python (tracemalloc)
    plus by Arrow's pool (a proxy installed as the default): an upper bound, as the two peaks
    need not coincide."""

    peak = 0


#: Every proxy pool installed: a buffer allocated from one is freed through it, maybe after the
#: block, so each lives as long as the tests.
_PROXIES: list[pa.MemoryPool] = []


@contextlib.contextmanager
def peak_allocated() -> Iterator[Allocated]:
    found, previous = Allocated(), pa.default_memory_pool()
    pool = pa.proxy_memory_pool(previous)
    _PROXIES.append(pool)
    pa.set_memory_pool(pool)
    tracemalloc.start()
    try:
        yield found
        found.peak = tracemalloc.get_traced_memory()[1] + pool.max_memory()
    finally:
        tracemalloc.stop()
        pa.set_memory_pool(previous)


def test_a_dense_offset_set_takes_a_bit_per_offset_not_a_byte() -> None:
    """A large partition's winners (half of 32M offsets, in 64 key buckets as pass 1 returns them,
    each sparse over the range): joining them, cutting the result into groups and reading a group
    take about a bit per offset of the range, never a byte per offset (32 MB per step before)."""
    span = 32_000_000
    offsets = np.flatnonzero(np.random.default_rng(3).random(span) < 0.5).astype(np.int64)
    buckets = [OffsetSet.of(offsets[offsets % 64 == b], 0, span) for b in range(64)]
    with peak_allocated() as allocated:
        joined = Members(0, span, offsets.size)
        for bucket in buckets:
            joined.join(bucket)
        whole = joined.result()
        groups = whole.split([(g, g + 400_000) for g in range(0, span, 400_000)])
        first = groups[7].offsets()
    assert whole.bitmap and len(whole) == offsets.size and not any(b.bitmap for b in buckets)
    assert np.array_equal(first, offsets[(offsets >= 2_800_000) & (offsets < 3_200_000)])
    assert allocated.peak < 5 * span // 8  # five bitmaps of span / 8 bytes at most; a byte per offset alone is span


def test_an_offset_set_over_a_sparse_range_takes_memory_per_member_not_per_offset() -> None:
    """A cleaned section's winners: 100k records left over 10^11 offsets. A bitmap would be 12.5 GB;
    the set keeps the gaps, and building, reading and cutting it never allocates per offset."""
    offsets = np.sort(np.random.default_rng(5).choice(10**11, 100_000, replace=False)).astype(np.int64)
    with peak_allocated() as allocated:
        members = OffsetSet.of(offsets, 0, 10**11)
        shares = members.split([(0, 5 * 10**10), (5 * 10**10, 10**11)])
        assert np.array_equal(np.concatenate([s.offsets() for s in shares]), offsets)
    assert not members.bitmap and len(members) == 100_000
    assert allocated.peak < 20 * 8 * offsets.size  # a few arrays of the members' 8-byte offsets


@settings(deadline=None)
@given(
    st.lists(st.integers(0, 5_000), max_size=400),
    st.integers(1, 4),
    st.sampled_from([5_001, 40_000, 10**12]),
    st.sampled_from([0, 10**9]),
)
def test_a_set_is_the_same_however_its_members_were_gathered(
    offsets: list[int], parts: int, span: int, sparse_bytes: int
) -> None:
    """Gathered as a bitmap or as a list (the `expected` a task gives), in parts, in any order,
    with repeats, and encoded a slice at a time at every slice boundary (slices of 3 members and
    3 bytes here, a bitmap's slices listed from their nonzero bytes or from every byte), the
    result is one set: equal, with its members ascending once each."""
    members = np.array(offsets, np.int64) + 1000
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(offset_set, "_GAPS_AT_ONCE", 3)
        patch.setattr(offset_set, "_LIST_BYTES", 3)
        patch.setattr(offset_set, "_SPARSE_BYTES", sparse_bytes)
        made = []
        for expected in [span, 1] if span < 10**6 else [1]:  # a bitmap when span <= GATHER_SPAN * expected
            gathered = Members(1000, 1000 + span, expected)
            for part in np.array_split(members[::-1], parts):
                gathered.add(part.copy())
            made.append(gathered.result())
        made.append(OffsetSet.of(np.unique(members), 1000, 1000 + span))
    assert all(m == made[-1] for m in made)
    assert made[0].offsets().tolist() == sorted(set(members.tolist()))


@pytest.mark.parametrize("span", [20_000_000, 100_000_000])
def test_a_buckets_winners_are_gathered_and_made_a_set_in_less_than_twice_their_offsets(span: int) -> None:
    """A key bucket's winners (1.45M of a bucket's 2.9M records) arrive a batch at a time, in key
    order, a fourteenth or a sixty-ninth of a wide range: gathering them (in a bitmap: 2.5 or 12.5
    MB, no more than their list) and making their set hold less than twice their 8-byte offsets,
    not the list, its sorted copy and the gaps (2.0 times at 100M, five times before that)."""
    winners = np.random.default_rng(11).choice(span, 1_450_000, replace=False).astype(np.int64)
    with peak_allocated() as allocated:
        gathered = Members(0, span, 2 * winners.size)
        for batch in np.array_split(winners, 12):
            gathered.add(batch.copy())  # each batch the caller's own, as a probe's flushed rows are
        made = gathered.result()
    assert not made.bitmap and np.array_equal(made.offsets(), np.sort(winners))
    assert allocated.peak < 1.7 * 8 * winners.size


def test_a_buckets_bitmap_is_drawn_from_arrows_pool_where_its_map_was_reduced() -> None:
    """A key bucket's task gathers its winners right after reducing its map in Arrow's memory: the
    bitmap (a bit per offset of the partition, 12.5 MB at 100M offsets) comes from Arrow's pool,
    which keeps what the map freed, not from malloc, which would add it to the task's peak."""
    span = 100_000_000
    with peak_allocated():
        pool = pa.default_memory_pool()
        before = pool.bytes_allocated()
        tracemalloc.reset_peak()
        gathered = Members(0, span, 2_900_000)
        from_pool, from_malloc = pool.bytes_allocated() - before, tracemalloc.get_traced_memory()[1]
    assert from_pool >= span // 8 and from_malloc < span // 80
    gathered.add(np.array([5, 99_999_999], np.int64))
    assert gathered.result().offsets().tolist() == [5, 99_999_999]


def test_a_buckets_sparse_winners_are_joined_a_slice_at_a_time() -> None:
    """The driver joins each key bucket's winners (1.47M over 100M offsets, kept as gaps) into the
    partition's bitmap a slice at a time: beyond the bitmap, under 12 MB (a batch of bits set), not
    also the bucket's gaps and their sums at once (two 12 MB arrays, which stayed in the driver's
    heap)."""
    span = 100_000_000
    winners = np.sort(np.random.default_rng(13).choice(span, 1_470_000, replace=False)).astype(np.int64)
    bucket = OffsetSet.of(winners, 0, span)
    with peak_allocated() as allocated:
        united = Members(0, span, span // 2)
        united.join(bucket)
    assert not bucket.bitmap and allocated.peak < span // 8 + 12 * 1024 * 1024
    assert np.array_equal(united.result().offsets(), winners)


def test_a_set_of_gaps_cut_short_raises_as_it_is_read_a_slice_at_a_time() -> None:
    """Read a slice at a time, a set whose compressed gaps were cut short (or are not whole
    8-byte gaps) raises, as decompressing it whole did, rather than listing the members before
    the cut."""
    gaps = OffsetSet.of(np.arange(0, 10**9, 997, dtype=np.int64), 0, 10**9)
    assert not gaps.bitmap
    with pytest.raises(zlib.error, match="truncated"):
        dataclasses.replace(gaps, packed=gaps.packed[:-5]).offsets()
    with pytest.raises(ValueError, match="whole 8-byte gap"):
        dataclasses.replace(gaps, packed=zlib.compress(b"1234567")).offsets()


@given(st.lists(st.sampled_from([b"a", b"b", b"", b"dd"]), max_size=30), st.booleans())
def test_key_order_keeps_each_keys_rows_together_even_when_hashes_collide(keys: list[bytes], collide: bool) -> None:
    """Rows of one key end up together in ascending rank, and `same` says where a row repeats the
    key before it; with every hash equal (colliding), keys are still told apart exactly."""
    array = pa.array(keys, pa.binary())
    hashes = np.zeros(len(keys), np.uint64) if collide else key_hash(array)
    order, same = key_order(array, hashes, [np.arange(len(keys), dtype=np.int64)])
    ordered = [keys[i] for i in order]
    assert sorted(order.tolist()) == list(range(len(keys)))
    assert same.tolist() == [ordered[i] == ordered[i - 1] for i in range(1, len(ordered))]
    runs = [k for i, k in enumerate(ordered) if i == 0 or not same[i - 1]]
    assert len(runs) == len(set(keys))
    for key in set(keys):
        mine = [i for i in order.tolist() if keys[i] == key]
        assert mine == sorted(mine)


@pytest.mark.classic_only
def test_a_local_session_binds_the_loopback_address(spark: SparkSession) -> None:
    """Issue #51: `build_session` on a local master keeps the driver on 127.0.0.1
    (`config.spark_loopback_env`), not on the first interface Spark finds."""
    assert spark.sparkContext.getConf().get("spark.driver.host") in {"127.0.0.1", "localhost"}  # not vm, 192.0.2.2


def test_a_partitions_failed_groups_are_named_up_to_three_and_the_rest_counted() -> None:
    """A full disk fails every group of a 100M-record partition: its message named each of them
    (twelve copies of one error); now the first three, then how many more."""
    errors = [f"StorageError: write file:///lake/g{i}.parquet: No space left on device" for i in range(12)]
    text = failures_text(errors)
    assert text == "; ".join(errors[:3]) + "; and 9 more groups failed"
    assert failures_text(errors[:3]) == "; ".join(errors[:3]) and failures_text(errors[:4]).endswith(
        "and 1 more group failed"
    )


def test_items_overlap_on_a_store_far_away_and_run_in_order_on_a_local_lake() -> None:
    """A task's items overlap where the store's replies are waited for (S3), under the lake's
    max_concurrency; on a local directory they run one after another (`Overlap.of`)."""
    settings = StorageSettings(max_concurrency=12)
    assert Overlap.of(StoreSpec("s3://bucket/lake", settings)) == Overlap(12)
    assert Overlap.of(StoreSpec("file:///data/lake", settings)) is None


def test_a_partitions_task_fetches_what_pass_1_decodes_and_on_a_store_far_away_the_rest_too() -> None:
    """Before pass 1 a partition's task fetches the files it decodes: the dirty section's, and a
    cleaned file without a key index or under a KIP-280 order. A cleaned file read through its
    index is fetched too only on a store far away (its group may keep it by a deletion vector;
    pass 2 then reads only its horizons), after the others; on a local lake it is left."""
    index = KeyIndex("segments/a.parquet.keys-000000000000.arrow", 10, 0, 10)
    indexed = SegmentFile("segments/a.parquet", 0, 10, 10, 100, key_index=index)
    plain = SegmentFile("segments/b.parquet", 10, 20, 10, 100)
    dirty = SegmentFile("segments/c.parquet", 20, 30, 10, 100)
    task = MapTask("t", 0, 0, 0, 30, 20, (indexed, plain, dirty), 0, 1, 1 << 20)
    by_offset, by_version = TopicConfig(), TopicConfig(compaction_strategy="header", compaction_strategy_header="v")
    settings = StorageSettings()
    local, far = StoreSpec("file:///data/lake", settings), StoreSpec("s3://bucket/lake", settings)
    assert _to_prefetch(local, by_offset, task) == [plain, dirty]
    assert _to_prefetch(far, by_offset, task) == [plain, dirty, indexed]
    assert _to_prefetch(local, by_version, task) == [indexed, plain, dirty]


def test_a_task_gives_back_once_its_memory_grew_past_the_slack() -> None:
    """A long task (pass 2's groups, a partition's key buckets) gives back only when what the worker
    holds after an item has grown by more than the slack over what it held after the first item
    since the last give-back; where its resident memory is not to be read, never."""
    mb = 1 << 20
    after_items = [500 * mb, 520 * mb, 564 * mb, 565 * mb, 480 * mb, 530 * mb, 545 * mb, 575 * mb]
    read: list[int] = []
    released: list[int] = []

    def resident() -> int:
        read.append(after_items[len(read)])
        return read[-1]

    growth = Growth(64 * mb, resident, lambda: released.append(len(read)))
    for _ in after_items:
        growth.item_done()
    assert released == [4, 7]  # 565 > 500 + 64; then 545 > 480 + 64, and 575 is the new floor
    unread = Growth(64 * mb, lambda: None, lambda: released.append(0))
    for _ in range(5):
        unread.item_done()
    assert released == [4, 7]


def test_an_item_is_profiled_into_the_profile_dir_only_when_it_is_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LAKECLEANER_PROFILE_DIR unset: the task's function runs as it is. Set: each call writes
    its own cProfile statistics there (the folder made if missing), and its result is the
    function's."""

    def square(n: int) -> int:
        return n * n

    monkeypatch.delenv(ENV_PROFILE_DIR, raising=False)
    assert profiled(square) is square
    folder = tmp_path / "profiles"
    monkeypatch.setenv(ENV_PROFILE_DIR, str(folder))
    run = profiled(square)
    assert [run(3), run(4)] == [9, 16]
    written = sorted(folder.glob("*.prof"))
    assert len(written) == 2
    for path in written:
        calls = {name for (_, _, name) in pstats.Stats(str(path)).stats}
        assert "square" in calls
