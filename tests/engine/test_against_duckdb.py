"""The engine against an independent reference: DuckDB's window query over the same records.

Random small topics (three partitions; keyed and unkeyed records, tombstones, tied timestamps,
valid, missing and malformed version headers) are compacted twice with every KIP-280 strategy,
the second time over a partly cleaned log and at a `now` at, before or past the first pass's
tombstone horizons, with Kafka's default offset map and with one so small that every partition is
split into key buckets. Before each pass, DuckDB computes what [log start, U) must become from
the records as stored: each key's latest record by (order columns…, offset), tombstones whose
horizon has passed dropped, others stamped now + delete.retention.ms, unkeyed records dropped,
[U, end) untouched. The only Python beside the query decodes the version header, whose
big-endian bytes SQL cannot read directly.
"""

from __future__ import annotations

import struct
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from lakecleaner.engine import EngineOptions, compact_topic, requests_for
from lakecleaner.engine.report import COMMITTED, NOTHING_TO_DO
from lakecleaner.lake import Lake, Topic
from tests.engine.helpers import new_topic
from tests.engine.test_semantics import HEADER, RETENTION_MS, appends

PARTITIONS = 3
_ORDER = {
    "offset": '"offset" DESC',
    "timestamp": 'timestamp DESC, "offset" DESC',
    "header": 'has_version DESC, version DESC, "offset" DESC',
}


def _versions(headers: list[Any] | None) -> tuple[int, int]:
    """(has a valid version, the version): the last header named HEADER of exactly 8 bytes."""
    found = None
    for h in headers or []:
        if h["key"] == HEADER and h["value"] is not None and len(h["value"]) == 8:
            found = struct.unpack(">q", h["value"])[0]
    return (0, 0) if found is None else (1, found)


def duckdb_pass(records: pa.Table, start: int, u: int, strategy: str, now: int) -> list[dict[str, Any]]:
    """What the log from `start` holds after one pass over [start, u) at `now`, by DuckDB."""
    versions = [_versions(h) for h in records.column("headers").to_pylist()]
    rows = records.select(["offset", "timestamp", "key", "value", "delete_horizon_ms"]).append_column(
        "has_version", pa.array([v[0] for v in versions], pa.int8())
    )
    rows = rows.append_column("version", pa.array([v[1] for v in versions], pa.int64()))
    query = f"""
        WITH cleaned AS (
            SELECT *, row_number() OVER (PARTITION BY key ORDER BY {_ORDER[strategy]}) AS rank
            FROM rows WHERE "offset" >= {start} AND "offset" < {u} AND key IS NOT NULL
        )
        SELECT "offset", timestamp, key, value,
               CASE WHEN value IS NULL AND delete_horizon_ms IS NULL THEN {now + RETENTION_MS}
                    ELSE delete_horizon_ms END AS delete_horizon_ms
        FROM cleaned
        WHERE rank = 1 AND NOT (value IS NULL AND delete_horizon_ms IS NOT NULL AND delete_horizon_ms <= {now})
        UNION ALL
        SELECT "offset", timestamp, key, value, delete_horizon_ms FROM rows WHERE "offset" >= {u}
        ORDER BY "offset"
    """
    with duckdb.connect() as con:
        con.register("rows", rows)
        cursor = con.execute(query)
        names = [column[0] for column in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _stored(topic: Topic, partition: int) -> list[dict[str, Any]]:
    table = topic.partition(partition).read()
    return table.select(["offset", "timestamp", "key", "value", "delete_horizon_ms"]).to_pylist()


def _pass_matches_duckdb(spark: SparkSession, lake: Lake, topic: Topic, now: int, options: EngineOptions) -> None:
    topic = lake.topic(topic.name)
    wanted, requests = {}, []
    for p in range(PARTITIONS):
        manifest = topic.partition(p).manifest()
        request = requests_for(manifest, topic.config, now)
        if request is not None:
            records = topic.partition(p).read()
            u = request.first_uncleanable_offset
            wanted[p] = duckdb_pass(records, manifest.log_start_offset, u, topic.config.compaction_strategy, now)
            requests.append(request)
    report = compact_topic(spark, lake, topic.name, requests, now, options=options)
    for p, rows in wanted.items():
        assert report.partition(p).status in (COMMITTED, NOTHING_TO_DO), report.partition(p).message
        assert _stored(topic, p) == rows


def _append(lake: Lake, topic: Topic, batches: list[Any], now: int) -> None:
    """Append with the policy at delete (so unkeyed records are accepted), then back to compact."""
    lake.alter_topic(topic.name, {"cleanup.policy": "delete"})
    for partition, steps in enumerate(batches):
        log = lake.topic(topic.name).partition(partition)
        for batch, roll in steps:
            log.append(batch, now_ms=now)
            if roll:
                log.roll(now_ms=now)
    lake.alter_topic(topic.name, {"cleanup.policy": "compact"})


#: On Connect, the key-buckets case runs: most other engine tests there compact in one offset map.
ONE_MAP_ON_CLASSIC = pytest.mark.classic_pass("most engine tests compact in one offset map on Connect")


@pytest.mark.parametrize(
    "buffer",
    [
        pytest.param(EngineOptions().dedupe_buffer_size, marks=ONE_MAP_ON_CLASSIC, id="one-map"),
        pytest.param(1024, id="key-buckets"),
    ],
)
@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
@given(
    strategy=st.sampled_from(["offset", "timestamp", "header"]),
    first=st.lists(appends(unkeyed=True), min_size=PARTITIONS, max_size=PARTITIONS),
    more=st.lists(appends(unkeyed=True), min_size=PARTITIONS, max_size=PARTITIONS),
    gap_ms=st.sampled_from([RETENTION_MS - 1, RETENTION_MS, RETENTION_MS + 50]),
)
def test_compaction_matches_duckdb(
    spark: SparkSession, lake: Lake, buffer: int, strategy: str, first: list[Any], more: list[Any], gap_ms: int
) -> None:
    topic = new_topic(
        lake,
        partitions=PARTITIONS,
        segment_bytes=3000,
        delete_retention_ms=RETENTION_MS,
        compaction_strategy=strategy,
        compaction_strategy_header=HEADER,
    )
    options = EngineOptions(dedupe_buffer_size=buffer)
    _append(lake, topic, first, now=500)
    _pass_matches_duckdb(spark, lake, topic, 1000, options)
    _append(lake, topic, more, now=1000)
    _pass_matches_duckdb(spark, lake, topic, 1000 + gap_ms, options)
