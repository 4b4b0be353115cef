"""The engine against the reference model, over random logs on both storage backends.

Random partitions mix keyed and unkeyed records, tombstones, out-of-order and tied timestamps,
and headers with valid, missing and malformed versions; segments roll at random. Each example
compacts a two-partition topic with a random strategy, appends more, and compacts again at a
later `now`, sometimes exactly at or after the tombstone horizons of the first pass: once as
Kafka's cleaner does (every changed group rewritten: its segments and counters exactly), once with
deletion vectors (issue 79: what every reader reads).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from lakecleaner.engine import CompactionRequest, EngineOptions, compact_topic, requests_for
from lakecleaner.engine.report import COMMITTED, NOTHING_TO_DO
from lakecleaner.lake import Lake, Topic
from lakecleaner.log.records import Record, encode_version
from lakecleaner.log.segment_files import read_segment_file
from lakecleaner.retention import retain_topic, trim_partition
from tests.engine.helpers import new_topic, rows
from tests.engine.reference_model import Expected, expected_pass

HEADER = "v"
RETENTION_MS = 100
KEYS = [b"a", b"b", b"c", b"d", b"e"]

header_value = st.one_of(
    st.integers(-3, 3).map(encode_version),
    st.just(encode_version(-(2**63))),
    st.just(encode_version(2**63 - 1)),
    st.binary(max_size=9),
    st.none(),
)
headers = st.lists(st.tuples(st.sampled_from([HEADER, "x"]), header_value), max_size=3)

#: The reference model with deletion vectors is the engine's semantics, not the session's:
#: `test_engine_matches_reference_model` and test_vectored_clean.py compact on Connect.
WITH_VECTORS = pytest.mark.classic_pass("the reference model with vectors; the model without them runs on Connect")


def record(unkeyed: bool) -> st.SearchStrategy[Record]:
    key = st.one_of(st.none(), st.sampled_from(KEYS)) if unkeyed else st.sampled_from(KEYS)
    value = st.one_of(st.none(), st.binary(max_size=4))
    return st.builds(Record, key=key, value=value, timestamp=st.integers(0, 20), headers=headers.map(tuple))


def appends(unkeyed: bool) -> st.SearchStrategy[list[tuple[list[Record], bool]]]:
    """Batches, each followed by a roll or not."""
    return st.lists(st.tuples(st.lists(record(unkeyed), min_size=1, max_size=5), st.booleans()), max_size=5)


@dataclass
class Scenario:
    strategy: str
    segment_bytes: int
    first: list[list[tuple[list[Record], bool]]]
    more: list[list[tuple[list[Record], bool]]]
    gap_ms: int
    dedupe_buffer_size: int


scenarios = st.builds(
    Scenario,
    strategy=st.sampled_from(["offset", "timestamp", "header"]),
    segment_bytes=st.sampled_from([3000, 8000, 100_000]),
    first=st.lists(appends(unkeyed=True), min_size=2, max_size=2),
    more=st.lists(appends(unkeyed=False), min_size=2, max_size=2),
    gap_ms=st.sampled_from([RETENTION_MS - 1, RETENTION_MS, RETENTION_MS + 50]),
    # 1 KB: pass 1 and the gate split each partition's keys into hash buckets, a task each, and
    # maps outgrow their budget and run again with more buckets; the default: a task per partition
    dedupe_buffer_size=st.sampled_from([1024, EngineOptions().dedupe_buffer_size]),
)


def _append(lake: Lake, topic: Topic, batches: list[list[tuple[list[Record], bool]]], now: int) -> Topic:
    """Append with the policy at delete (so unkeyed records are accepted), then back to compact."""
    topic = lake.alter_topic(topic.name, {"cleanup.policy": "delete"})
    for partition, steps in enumerate(batches):
        log = topic.partition(partition)
        for batch, roll in steps:
            log.append(batch, now_ms=now)
            if roll:
                log.roll(now_ms=now)
    return lake.alter_topic(topic.name, {"cleanup.policy": "compact"})


def _check_pass(
    spark: SparkSession, lake: Lake, topic: Topic, now: int, options: EngineOptions, *, kafkas_layout: bool = True
) -> None:
    """One pass against the reference model: the rows every reader reads, and, with
    `kafkas_layout` (no deletion vectors: `lakecleaner.rewrite.dead.ratio` 0), Kafka's segments,
    counters and replaced files exactly."""
    plans: dict[int, tuple[CompactionRequest, Expected, Any]] = {}
    for p in range(topic.partitions):
        manifest = topic.partition(p).manifest()
        request = requests_for(manifest, topic.config, now)
        if request is not None:
            expected = expected_pass(rows(topic, p), manifest, request.first_uncleanable_offset, topic.config, now)
            plans[p] = (request, expected, manifest)
    report = compact_topic(spark, lake, topic.name, [r for r, _, _ in plans.values()], now, options=options)
    for p, (request, expected, before) in plans.items():
        part = report.partition(p)
        assert part.status in (COMMITTED, NOTHING_TO_DO), part.message
        assert rows(topic, p) == expected.rows
        after = topic.partition(p).manifest()
        assert after.problems() == []
        assert after.cleaner_checkpoint == request.first_uncleanable_offset or part.status == NOTHING_TO_DO
        u = request.first_uncleanable_offset
        assert [s for s in after.segments if s.base_offset >= u] == [s for s in before.segments if s.base_offset >= u]
        if kafkas_layout:
            _check_kafkas_layout(part, before, after, expected)
        else:  # a vectored group's lost records count as superseded, whatever made them lose
            assert sum(_counts(part.stats)) == sum(
                (expected.superseded, expected.unkeyed, expected.stamped, expected.removed)
            )


def _counts(stats: Any) -> tuple[int, int, int, int]:
    """What the record rule did: superseded, unkeyed dropped, tombstones stamped and removed."""
    return (stats.records_superseded, stats.unkeyed_dropped, stats.tombstones_stamped, stats.tombstones_removed)


def _check_kafkas_layout(part: Any, before: Any, after: Any, expected: Expected) -> None:
    """Kafka's segments after the pass, its counters, and the files replaced pending deletion."""
    stats = part.stats
    assert [(s.base_offset, s.next_offset, s.record_count) for s in after.segments] == expected.segments
    assert _counts(stats) == (expected.superseded, expected.unkeyed, expected.stamped, expected.removed)
    assert stats.malformed_version_headers == expected.malformed
    assert stats.groups_rewritten == sum(expected.changed_groups) and stats.groups_vectored == 0
    live = {f.path for s in after.segments for f in s.files}
    replaced = {f.path for s in before.segments for f in s.files} - live
    assert replaced <= {d.path for d in after.pending_deletes}
    before_ids, after_ids = {s.id for s in before.segments}, {s.id for s in after.segments}
    assert (part.segments_replaced, part.segments_written) == (
        len(before_ids - after_ids),
        len(after_ids - before_ids),
    )


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
@given(scenario=scenarios)
def test_engine_matches_reference_model(spark: SparkSession, lake: Lake, scenario: Scenario) -> None:
    """Kafka's cleaner exactly: every group that changes is rewritten (no deletion vectors)."""
    _scenario_passes(spark, lake, scenario, dead_ratio=0, kafkas_layout=True)


def _scenario_passes(
    spark: SparkSession, lake: Lake, scenario: Scenario, *, dead_ratio: float, kafkas_layout: bool
) -> tuple[Topic, EngineOptions]:
    """The scenario's two passes, each checked (`_check_pass`), on a new two-partition topic
    whose `lakecleaner.rewrite.dead.ratio` is `dead_ratio`; the topic after them."""
    topic = new_topic(
        lake,
        partitions=2,
        segment_bytes=scenario.segment_bytes,
        delete_retention_ms=RETENTION_MS,
        compaction_strategy=scenario.strategy,
        compaction_strategy_header=HEADER,
        lakecleaner_rewrite_dead_ratio=dead_ratio,
    )
    options = EngineOptions(dedupe_buffer_size=scenario.dedupe_buffer_size)
    topic = _append(lake, topic, scenario.first, now=500)
    _check_pass(spark, lake, topic, now=1000, options=options, kafkas_layout=kafkas_layout)
    topic = _append(lake, topic, scenario.more, now=1000)
    _check_pass(spark, lake, topic, now=1000 + scenario.gap_ms, options=options, kafkas_layout=kafkas_layout)
    return topic, options


@WITH_VECTORS
@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
@given(scenario=scenarios)
def test_with_deletion_vectors_every_reader_reads_what_the_reference_model_keeps(
    spark: SparkSession, lake: Lake, scenario: Scenario
) -> None:
    """Issue 79: with groups kept and their lost records removed by deletion vectors wherever
    fewer than all but one record in a hundred lost (the ratio 0.99), every pass leaves what
    the reference model keeps, to every reader of the log: after the scenario's two passes, a
    third over updates without tombstones (so groups keep their files), and a fourth over more
    (the vectors grow, or their groups are rewritten)."""
    topic, options = _scenario_passes(spark, lake, scenario, dead_ratio=0.99, kafkas_layout=False)
    for step in (1, 2):
        topic = _append(lake, topic, _values_only(scenario.more), now=1000 + scenario.gap_ms)
        _check_pass(spark, lake, topic, now=1000 + scenario.gap_ms + step, options=options, kafkas_layout=False)


def _values_only(batches: list[list[tuple[list[Record], bool]]]) -> list[list[tuple[list[Record], bool]]]:
    """The appends with every record keyed and a value (updates, no tombstone), each rolled."""
    return [
        [([Record(r.key or b"a", r.value or b"v", r.timestamp, r.headers) for r in batch], True) for batch, _ in steps]
        for steps in batches
    ]


#: The erasure deadline of the vectors' scenarios: KIP-354's max.compaction.lag.ms.
LAG_MS = 1_000


@dataclass
class Step:
    """One step of a vectors' scenario: `batches` appended (each rolled or not), then a clean
    `advance_ms` later, then (with `trim`) a trim to that share of the log's offsets and a
    retention run."""

    batches: list[tuple[list[Record], bool]]
    advance_ms: int
    trim: float | None


def keyed_record(now: int) -> st.SearchStrategy[Record]:
    return st.builds(
        Record, key=st.sampled_from(KEYS), value=st.one_of(st.none(), st.binary(max_size=4)), timestamp=st.just(now)
    )


steps = st.lists(
    st.builds(
        Step,
        batches=st.lists(st.tuples(st.lists(keyed_record(0), min_size=1, max_size=6), st.booleans()), max_size=3),
        advance_ms=st.sampled_from([1, LAG_MS // 2, LAG_MS]),
        trim=st.one_of(st.none(), st.floats(0, 1)),
    ),
    min_size=2,
    max_size=5,
)


@WITH_VECTORS
@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
@given(scenario=steps, segment_bytes=st.sampled_from([3000, 100_000]))
@example(
    scenario=[
        Step(
            [
                ([Record(b"a", None, 0)], False),
                ([Record(b"b", None, 0), Record(b"c", None, 0), Record(b"e", b"\t\xa0", 0)], True),
                ([Record(b"a", None, 0)] * 3, False),
            ],
            LAG_MS // 2,
            0.76,
        ),
        Step([([Record(b"b", b"x", 0)], True), ([Record(b"d", b"", 0)], False)], LAG_MS, None),
    ],
    segment_bytes=100_000,
)
@example(
    scenario=[
        Step([([Record(b"a", b"1", 0), Record(b"b", b"1", 0), Record(b"c", b"1", 0)], True)], 1, 0.34),
        Step([([Record(b"b", b"2", 0)], True)], 1, None),
    ],
    segment_bytes=100_000,
)
def test_with_vectors_a_deadline_trims_and_retention_the_log_is_the_models_and_erased_values_are_gone(
    spark: SparkSession, lake: Lake, scenario: list[Step], segment_bytes: int
) -> None:
    """Issue 79 on a topic with max.compaction.lag.ms: appends, cleans (with deletion vectors
    wherever they may serve), trims and retention runs interleaved. After every clean every reader
    reads what the reference model keeps, after every trim the rows below the new log start are
    gone; and at a clean after every deadline has passed, no superseded record at or above the
    log start is physically stored in any file of the log, vectors or not."""
    topic = new_topic(
        lake,
        segment_bytes=segment_bytes,
        delete_retention_ms=100 * LAG_MS,
        max_compaction_lag_ms=LAG_MS,
        lakecleaner_rewrite_dead_ratio=0.99,
        min_cleanable_dirty_ratio=0.99,
    )
    options = EngineOptions()
    now = 1_000
    for step in scenario:
        log = topic.partition(0)
        for batch, roll in step.batches:
            log.append([Record(r.key, r.value, now) for r in batch], now_ms=now)
            if roll:
                log.roll(now_ms=now)
        now += step.advance_ms
        _check_pass(spark, lake, topic, now=now, options=options, kafkas_layout=False)
        if step.trim is not None:
            _trimmed(lake, topic, step.trim, now)
    log = topic.partition(0)
    log.roll(now_ms=now)
    now += LAG_MS + 1
    _check_pass(spark, lake, topic, now=now, options=options, kafkas_layout=False)
    manifest = log.manifest()
    assert not [f for s in manifest.segments for f in s.files if f.deletion_vector is not None]
    stored = _physical_rows(log, manifest)
    latest = {r["key"]: r["offset"] for r in rows(topic)}
    superseded = [r for r in stored if r["offset"] >= manifest.log_start_offset and r["offset"] < latest[r["key"]]]
    assert superseded == []


def _trimmed(lake: Lake, topic: Topic, share: float, now: int) -> None:
    """Trim partition 0 to `share` of its offsets and run retention: the rows below the new log
    start are gone to every reader, the rest as they were."""
    log = topic.partition(0)
    manifest = log.manifest()
    offset = manifest.log_start_offset + int(share * (manifest.next_offset - manifest.log_start_offset))
    before = rows(topic)
    trim_partition(lake, topic.name, 0, offset, now_ms=now)
    retain_topic(lake, topic.name, now_ms=now)
    assert rows(topic) == [r for r in before if r["offset"] >= offset]


def _physical_rows(log: Any, manifest: Any) -> list[dict[str, Any]]:
    """Every row the log's files store, deletion vectors or not."""
    out: list[dict[str, Any]] = []
    for segment in manifest.segments:
        for file in segment.files:
            table = read_segment_file(log.store, log.prefix + file.path, columns=["offset", "key"], physical=True)
            out += table.to_pylist()
    return out
