"""The synthetic CDC workload: Kafka's partitioner, determinism, shares, headers, timestamps, validation."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakecleaner.log.records import BATCH_SCHEMA, decode_version
from lakecleaner.workload import (
    WorkloadSpec,
    generate,
    kafka_murmur2,
    kafka_murmur2_fixed,
    kafka_partition,
    kafka_partitions_fixed,
)

# Kafka's UtilsTest.testMurmur2.
KAFKA_MURMUR2_VECTORS = {
    "21": -973932308,
    "foobar": -790332482,
    "a-little-bit-long-string": -985981536,
    "a-little-bit-longer-string": -1486304829,
    "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    "abc": 479470107,
}


def collect(spec: WorkloadSpec, batch_records: int = 100_000) -> dict[int, pa.Table]:
    """Every partition's records, batches concatenated in the order they were yielded."""
    batches: dict[int, list[pa.Table]] = defaultdict(list)
    for partition, batch in generate(spec, batch_records):
        batches[partition].append(batch)
    return {p: pa.concat_tables(tables) for p, tables in sorted(batches.items())}


def rows(spec: WorkloadSpec) -> list[dict[str, Any]]:
    return [row for table in collect(spec).values() for row in table.to_pylist()]


# --------------------------------------------------------------------------------------------
# murmur2 and the partitioner


@pytest.mark.parametrize(("text", "expected"), KAFKA_MURMUR2_VECTORS.items())
def test_murmur2_matches_kafka(text: str, expected: int) -> None:
    assert kafka_murmur2(text.encode()) == expected
    matrix = np.frombuffer(text.encode(), dtype=np.uint8).reshape(1, -1)
    assert kafka_murmur2_fixed(matrix).tolist() == [expected]


@pytest.mark.parametrize("length", range(14))
def test_vectorised_murmur2_equals_scalar(length: int) -> None:
    keys = np.random.default_rng(length).integers(0, 256, size=(200, length), dtype=np.uint8)
    expected = [kafka_murmur2(bytes(row)) for row in keys]
    assert kafka_murmur2_fixed(keys).tolist() == expected
    assert kafka_partitions_fixed(keys, 7).tolist() == [kafka_partition(bytes(row), 7) for row in keys]


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 40).flatmap(lambda n: st.lists(st.binary(min_size=n, max_size=n), min_size=1, max_size=20)))
def test_vectorised_murmur2_equals_scalar_property(keys: list[bytes]) -> None:
    matrix = np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(len(keys), -1)
    assert kafka_murmur2_fixed(matrix).tolist() == [kafka_murmur2(k) for k in keys]


def test_partition_is_to_positive_murmur2_modulo() -> None:
    # murmur2("foobar") is negative: toPositive masks the sign bit rather than taking abs().
    assert kafka_partition(b"foobar", 10) == (-790332482 & 0x7FFFFFFF) % 10
    assert kafka_partition(b"foobar", 1) == 0
    with pytest.raises(ValueError, match="partitions=0"):
        kafka_partition(b"foobar", 0)


# --------------------------------------------------------------------------------------------
# generate


def test_batches_have_the_schema_and_size_and_cover_every_record() -> None:
    spec = WorkloadSpec(keys=50, records=1234, partitions=3)
    counts: Counter[int] = Counter()
    last_seen: dict[int, int] = {}
    for partition, batch in generate(spec, batch_records=100):
        assert batch.schema == BATCH_SCHEMA
        assert 0 < batch.num_rows <= 100
        assert partition not in last_seen or last_seen[partition] == 100, "only a partition's last batch is short"
        last_seen[partition] = batch.num_rows
        counts[partition] += batch.num_rows
        batch.validate(full=True)
    assert sum(counts.values()) == 1234
    assert set(counts) == {0, 1, 2}


def test_deterministic_for_a_seed_and_independent_of_batch_size() -> None:
    spec = WorkloadSpec(keys=300, records=5000, partitions=4, header_versions=True, out_of_order_share=0.2, seed=7)
    first = collect(spec)
    assert collect(spec) == first
    small = collect(spec, batch_records=37)
    assert {p: t.combine_chunks() for p, t in small.items()} == {p: t.combine_chunks() for p, t in first.items()}
    assert collect(WorkloadSpec(keys=300, records=5000, partitions=4, header_versions=True, seed=8)) != first


def test_records_zero_yields_nothing() -> None:
    assert list(generate(WorkloadSpec(records=0))) == []


def test_every_key_appears_with_the_prefix_and_a_fixed_width() -> None:
    spec = WorkloadSpec(keys=1000, records=3000, key_prefix="user-")
    keys = [r["key"] for r in rows(spec)]
    assert len(set(keys)) == 1000
    assert all(re.fullmatch(rb"user-\d{3}", k) for k in keys)
    assert set(keys) == {spec.key(i) for i in range(1000)}


def test_unpadded_keys_have_as_many_lengths_as_ids_have_digits_and_kafkas_partitions() -> None:
    spec = WorkloadSpec(keys=1000, records=3000, partitions=6, key_prefix="user-", padded_keys=False, unkeyed_share=0.1)
    per_partition = collect(spec)
    keys = {k: p for p, table in per_partition.items() for k in table.column("key").to_pylist() if k is not None}
    assert set(keys) == {f"user-{i}".encode() for i in range(1000)} == {spec.key(i) for i in range(1000)}
    assert {len(k) for k in keys} == {6, 7, 8}
    assert all(kafka_partition(k, 6) == p for k, p in keys.items())


def test_fewer_records_than_keys_gives_distinct_keys() -> None:
    keys = [r["key"] for r in rows(WorkloadSpec(keys=10_000, records=500))]
    assert len(set(keys)) == 500


def test_partition_of_each_keyed_record_is_kafkas() -> None:
    spec = WorkloadSpec(keys=500, records=4000, partitions=6)
    per_partition = collect(spec)
    assert set(per_partition) == set(range(6))
    for partition, table in per_partition.items():
        for key in table.column("key").to_pylist():
            assert kafka_partition(key, 6) == partition


def test_unkeyed_records_are_spread_round_robin() -> None:
    spec = WorkloadSpec(keys=10, records=6000, partitions=4, unkeyed_share=0.25, tombstone_share=0.5)
    per_partition = collect(spec)
    unkeyed = {p: t.column("key").null_count for p, t in per_partition.items()}
    assert max(unkeyed.values()) - min(unkeyed.values()) <= 1
    total = sum(unkeyed.values())
    assert abs(total / 6000 - 0.25) < 0.03
    for table in per_partition.values():
        for row in table.to_pylist():
            if row["key"] is None:
                assert row["value"] is not None, "an unkeyed record is never a tombstone"


def test_tombstone_share_and_value_size() -> None:
    spec = WorkloadSpec(keys=100, records=20_000, partitions=2, tombstone_share=0.2, value_size=37)
    records = rows(spec)
    tombstones = sum(r["value"] is None for r in records)
    assert abs(tombstones / len(records) - 0.2) < 0.02
    assert {len(r["value"]) for r in records if r["value"] is not None} == {37}
    assert all(r["key"] is not None for r in records)


def test_values_differ_between_records() -> None:
    values = [r["value"] for r in rows(WorkloadSpec(records=2000, tombstone_share=0.0))]
    assert len(set(values)) == 2000


def test_zero_value_size_gives_empty_non_null_values() -> None:
    records = rows(WorkloadSpec(records=100, value_size=0, tombstone_share=0.0))
    assert {r["value"] for r in records} == {b""}


def test_no_headers_without_header_versions() -> None:
    assert all(r["headers"] == [] for r in rows(WorkloadSpec(records=100)))


def test_header_versions_increase_per_key_in_production_order() -> None:
    spec = WorkloadSpec(keys=40, records=3000, partitions=3, header_versions=True, header_name="lsn")
    seen: set[int] = set()
    for table in collect(spec).values():
        last_version: dict[bytes, int] = {}
        previous = 0
        for row in table.to_pylist():
            assert [h["key"] for h in row["headers"]] == ["lsn"]
            version = decode_version(row["headers"][0]["value"])
            assert version is not None
            assert version > previous, "versions follow production order within a partition"
            assert version > last_version.get(row["key"], 0)
            last_version[row["key"]] = previous = version
            seen.add(version)
    assert seen == set(range(1, 3001)), "the version is the 1-based production sequence number"


def test_malformed_header_share() -> None:
    spec = WorkloadSpec(records=20_000, header_versions=True, malformed_header_share=0.1)
    values = [r["headers"][0]["value"] for r in rows(spec)]
    malformed = [v for v in values if len(v) != 8]
    assert abs(len(malformed) / len(values) - 0.1) < 0.015
    assert {len(v) for v in malformed} == {4}
    assert all(decode_version(v) is None for v in malformed)


def test_timestamps_spread_evenly_and_in_order_by_default() -> None:
    spec = WorkloadSpec(records=1000, start_ms=5_000, timestamp_spread_ms=10_000)
    timestamps = collect(spec)[0].column("timestamp").to_pylist()
    assert timestamps == [5_000 + 10 * i for i in range(1000)]


def test_zero_spread_gives_one_timestamp() -> None:
    spec = WorkloadSpec(records=100, start_ms=42, timestamp_spread_ms=0)
    assert set(collect(spec)[0].column("timestamp").to_pylist()) == {42}


@pytest.mark.parametrize("share", [0.05, 0.3, 1.0])
def test_out_of_order_share_and_span(share: float) -> None:
    spec = WorkloadSpec(records=20_000, start_ms=1_000_000, timestamp_spread_ms=3_600_000, out_of_order_share=share)
    timestamps = np.array(collect(spec, batch_records=999)[0].column("timestamp").to_pylist())
    assert timestamps.min() >= 1_000_000
    assert timestamps.max() < 1_000_000 + 3_600_000
    late = np.count_nonzero(timestamps[1:] < timestamps[:-1])
    if share == 1.0:
        # Every record after the first is late, until the floor at start_ms stops them.
        assert timestamps[0] == 1_000_000 and late == np.count_nonzero(timestamps[1:] > 1_000_000)
    else:
        assert abs(late / len(timestamps) - share) < 0.02
        nominal = 1_000_000 + np.arange(20_000) * 180
        assert np.all(timestamps <= nominal)
        assert np.all(nominal - timestamps <= 3_600 * 60), "lateness stays bounded"


def test_late_runs_continue_across_blocks() -> None:
    # 200_000 records span several internal blocks; a late run must stay strictly decreasing there too.
    spec = WorkloadSpec(records=200_000, value_size=1, out_of_order_share=0.5, timestamp_spread_ms=10**9)
    timestamps = np.concatenate([t.column("timestamp").to_numpy() for _, t in generate(spec)])
    late = np.count_nonzero(timestamps[1:] < timestamps[:-1])
    assert abs(late / len(timestamps) - 0.5) < 0.01


# --------------------------------------------------------------------------------------------
# validation


@pytest.mark.parametrize(
    ("field", "value", "rule"),
    [
        ("keys", 0, "from 1 to"),
        ("keys", 1.5, "integer"),
        ("records", -1, "from 0 to"),
        ("partitions", 0, "from 1 to"),
        ("partitions", True, "integer"),
        ("value_size", -5, "from 0 to"),
        ("tombstone_share", 1.5, "from 0 to 1"),
        ("tombstone_share", float("nan"), "from 0 to 1"),
        ("out_of_order_share", -0.1, "from 0 to 1"),
        ("start_ms", -1, "from 0 to"),
        ("timestamp_spread_ms", -1, "from 0 to"),
        ("header_versions", "yes", "true or false"),
        ("padded_keys", 1, "true or false"),
        ("header_name", "", "non-empty"),
        ("malformed_header_share", 2, "from 0 to 1"),
        ("unkeyed_share", "0.1", "from 0 to 1"),
        ("key_prefix", 7, "string"),
        ("seed", -1, "from 0 to"),
    ],
)
def test_validation_names_field_value_and_range(field: str, value: object, rule: str) -> None:
    with pytest.raises(ValueError) as info:
        WorkloadSpec(**{field: value})  # type: ignore[arg-type]
    message = str(info.value)
    assert f"WorkloadSpec.{field}={value!r}" in message
    assert rule in message


def test_cross_field_validation() -> None:
    with pytest.raises(ValueError, match=r"malformed_header_share=0\.1: .*header_versions"):
        WorkloadSpec(malformed_header_share=0.1)
    with pytest.raises(ValueError, match=r"out_of_order_share=0\.2: .*timestamp_spread_ms"):
        WorkloadSpec(out_of_order_share=0.2, timestamp_spread_ms=0)


def test_batch_records_and_key_id_validation() -> None:
    with pytest.raises(ValueError, match="batch_records=0"):
        next(generate(WorkloadSpec(), batch_records=0))
    with pytest.raises(ValueError, match="key_id=10"):
        WorkloadSpec(keys=10).key(10)
    assert WorkloadSpec(keys=10).key(3) == b"key-3"
    assert WorkloadSpec(keys=11).key(3) == b"key-03"
