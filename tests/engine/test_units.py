"""Pure parts of the engine: requests, grouping, KIP-280 versions, the record rule, the writer."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakecleaner.config import TopicConfig
from lakecleaner.engine.gate_rows import GateRules, prune
from lakecleaner.engine.plan import StalePlan, group_segments, plan_partition
from lakecleaner.engine.recopy import RowCounts, clean_rows
from lakecleaner.engine.requests import CompactionRequest, requests_for
from lakecleaner.engine.versions import header_versions, latest_per_key, order_table
from lakecleaner.log.manifest import Manifest, Segment
from lakecleaner.log.records import HEADER_TYPE, SEGMENT_SCHEMA, decode_version, encode_version
from tests.engine.reference_model import beats, malformed, version


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
        "t", 0, 10, 20, 5
    )
    assert requests_for(manifest(*m.segments, checkpoint=20), COMPACT, 0) is None
    expired = manifest(seg(0, 10, horizon=500), seg(10, 20), checkpoint=20)
    assert requests_for(expired, COMPACT, 499) is None
    assert requests_for(expired, COMPACT, 500) == CompactionRequest("t", 0, 20, 20, 5)
    assert requests_for(manifest(), COMPACT, 0) is None


def test_grouping_is_greedy_by_bytes_and_keeps_big_segments_alone() -> None:
    segments = [seg(0, 1, 40), seg(1, 2, 60), seg(2, 3, 1), seg(3, 4, 500), seg(4, 4, 0), seg(4, 5, 99)]
    groups = group_segments(segments, 100)
    assert [[s.base_offset for s in g] for g in groups] == [[0, 1], [2], [3], [4, 4]]


def test_plan_rejects_a_first_uncleanable_offset_that_is_no_longer_a_boundary() -> None:
    m = manifest(seg(0, 10), seg(10, 20, sealed=False))
    with pytest.raises(StalePlan, match="not a segment boundary"):
        plan_partition(m, CompactionRequest("t", 0, 0, 5, 5), 100)
    with pytest.raises(StalePlan, match="active segment"):
        plan_partition(m, CompactionRequest("t", 0, 0, 20, 5), 100)
    plan = plan_partition(manifest(seg(0, 10), seg(10, 20), start=12), CompactionRequest("t", 0, 0, 20, 5), 100)
    assert [s.base_offset for s in plan.input_segments] == [10]


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
    kept = clean_rows(table, np.array([10, 11, 13, 14], np.int64), 10, 100, 600, counts)
    assert kept.column("offset").to_pylist() == [10, 11, 14]
    assert kept.column("delete_horizon_ms").to_pylist() == [None, 600, 101]
    assert counts == RowCounts(superseded=1, unkeyed=1, below_log_start=0, tombstones_stamped=1, tombstones_removed=1)


candidate_rows = st.lists(
    st.tuples(
        st.sampled_from([b"a", b"b", b"c"]),
        st.integers(0, 3),
        st.lists(st.tuples(st.sampled_from(["v", "w"]), st.one_of(st.none(), st.binary(max_size=9))), max_size=2),
    ),
    max_size=25,
)


@settings(deadline=None)
@given(candidate_rows, st.sampled_from(["offset", "timestamp", "header"]))
def test_the_gate_prunes_only_records_that_cannot_win(rows: list[tuple[bytes, int, list[Any]]], strategy: str) -> None:
    table = pa.table(
        {
            "offset": pa.array(range(len(rows)), pa.int64()),
            "key": pa.array([k for k, _, _ in rows], pa.binary()),
            "timestamp": pa.array([t for _, t, _ in rows], pa.int64()),
            "headers": pa.array([[{"key": n, "value": v} for n, v in hs] for _, _, hs in rows], HEADER_TYPE),
            "delete_horizon_ms": pa.nulls(len(rows), pa.int64()),
        }
    )
    config = TopicConfig(compaction_strategy=strategy, compaction_strategy_header="v")
    kept = set(prune(table, GateRules.of(config, 0)).column("offset").to_pylist())
    winners: dict[bytes, dict[str, Any]] = {}
    for row in table.to_pylist():
        if row["key"] not in winners or beats(row, winners[row["key"]], config):
            winners[row["key"]] = row
    assert {w["offset"] for w in winners.values()} <= kept
