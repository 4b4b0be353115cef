"""The topics of the scheduler tests' lake: what each holds, and what its DAG runs must leave."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from lakecleaner.lake import Lake
from lakecleaner.log.records import Record

HOUR = 3_600_000
#: cleanup.policy=compact topics: winners by a header version (KIP-280); min.compaction.lag.ms
#: holds back segments newer than 12 hours, so a backfill's earlier tick cleans less.
CDC_CONFIG = {
    "cleanup.policy": "compact",
    "compaction.strategy": "header",
    "compaction.strategy.header": "version",
    "min.compaction.lag.ms": 12 * HOUR,
    "min.cleanable.dirty.ratio": 0.01,
    "delete.retention.ms": 24 * HOUR,
    "file.delete.delay.ms": 0,
}
#: The compacted topics, each with its own DAG: one per way a run reaches the scheduler.
CDC_SCHEDULED = "cdc-scheduled"  # a run the scheduler creates itself
CDC_BACKFILLED = "cdc-backfilled"  # an Airflow backfill of two intervals
CDC_REST = "cdc-rest"  # POST /api/v2/dags/{dag}/dagRuns with a logical date
CDC_REST_NULL = "cdc-rest-null"  # ... with "logical_date": null
CDC_DASHBOARD = "cdc-dashboard"  # the dashboard's Force button
CDC_UI = "cdc-ui"  # the Airflow UI's Trigger button
MIRRORED = "mirrored"  # a Kafka topic of the session's mock cluster, mirrored by the DAG's first task
ADOPTED = "adopted"  # Kafka Connect S3 sink output beside the lake, adopted by the DAG's first task
CRON_TOPICS = (CDC_SCHEDULED, CDC_BACKFILLED)
MANUAL_TOPICS = (CDC_REST, CDC_REST_NULL, CDC_DASHBOARD, CDC_UI)


def daily_schedule(now: datetime) -> tuple[str, datetime]:
    """A daily cron at the hour twelve hours from `now`, and its latest tick at or before `now`."""
    hour = (now.hour + 12) % 24
    tick = now.replace(hour=hour, minute=0, second=0, microsecond=0)
    return f"0 {hour} * * *", tick - timedelta(days=1) if tick > now else tick


def version(v: int) -> tuple[tuple[str, bytes], ...]:
    return (("version", v.to_bytes(8, "big", signed=True)),)


#: Three sealed segments, each (hours before the latest tick, records as (key, value, version)).
#: The versions disagree with the offsets (a late producer): c1's version 3 comes first. At the
#: tick a day earlier, only the first segment is older than min.compaction.lag.ms.
CDC_SEGMENTS = (
    (40, [(b"c4", b"v0", 0), (b"c1", b"v3", 3), (b"c2", b"v1", 1), (b"c4", b"v1", 1)]),
    (30, [(b"c1", b"v2-late", 2), (b"c3", b"v1", 1), (b"c4", b"v2", 2)]),
    (20, [(b"c2", None, 2), (b"c3", b"v5", 5)]),
)
#: KIP-280's header strategy over the whole log: each key's record with the highest version.
CDC_WINNERS = {b"c1": (b"v3", 3), b"c2": (None, 2), b"c3": (b"v5", 5), b"c4": (b"v2", 2)}


def fill_cdc(lake: Lake, topic: str, latest_tick_ms: int) -> None:
    log = lake.create_topic(topic).partition(0)
    for age_h, records in CDC_SEGMENTS:
        ts = latest_tick_ms - age_h * HOUR
        log.append([Record(k, v, ts, version(ver)) for k, v, ver in records], now_ms=ts)
        log.roll(now_ms=ts)


def cdc_log(lake: Lake, topic: str) -> dict[bytes, tuple[bytes | None, int]]:
    """Each key's record in the log, as (value, version); fails on a key that appears twice."""
    out: dict[bytes, tuple[bytes | None, int]] = {}
    for row in lake.topic(topic).partition(0).read().to_pylist():
        assert row["key"] not in out, f"key {row['key']!r} appears twice in {topic}"
        out[row["key"]] = (row["value"], int.from_bytes(row["headers"][-1]["value"], "big", signed=True))
    return out


#: Delete-policy topics (the backfill test): the same data, one backfilled, one scheduled.
SCHEDULED, BACKFILLED = "views-scheduled", "views-backfilled"
VIEWS_CONFIG = {
    "cleanup.policy": "delete",
    "retention.ms": 48 * HOUR,
    "retention.commitoffset.ms": 36 * HOUR,
    "file.delete.delay.ms": 12 * HOUR,
}
#: The newest record of each sealed segment (10 records each), relative to T3 (hours); then
#: one record in the active segment. Segment i covers offsets [10 i, 10 i + 10).
SEGMENT_AGES_H = (108, 77, 65, 58, 46)
ACTIVE_AGE_H = 2
#: billing has consumed offsets [0, 30), analytics more: consumed retention may delete up to 30.
COMMITTED = {"analytics": 45, "billing": 30}


def fill_views(lake: Lake, topic: str, end_ms: int) -> None:
    log = lake.create_topic(topic).partition(0)
    for i, age_h in enumerate(SEGMENT_AGES_H):
        log.append([Record(f"u{i}-{j}".encode(), b"view", end_ms - age_h * HOUR) for j in range(10)])
        log.roll()
    log.append([Record(b"late", b"view", end_ms - ACTIVE_AGE_H * HOUR)])
    for group, offset in COMMITTED.items():
        lake.offsets.commit(group, topic, {0: offset})


def views_spec(cron: str) -> dict[str, Any]:
    return {"partitions": 1, "schedule": cron, "consumer_groups": sorted(COMMITTED), "config": VIEWS_CONFIG}


#: Erasure topics (test_erasure.py, issue #20): a data subject's key, its two values and their
#: tombstone, in a partition that then goes idle; backfilled over the three ticks. Each deadline
#: is KIP-354's: the values are compacted away at the first tick, the tombstone once its horizon
#: (delete.retention.ms after that cleaning) has passed, at the second.
ERASURE_COMPACT, ERASURE_COMPACT_DELETE, ERASURE_FAILING = (
    "erasure-compact",
    "erasure-compact-delete",
    "erasure-failing",
)
ERASURE_TOPICS = (ERASURE_COMPACT, ERASURE_COMPACT_DELETE, ERASURE_FAILING)
ERASURE_CONFIG = {
    "cleanup.policy": "compact",
    "max.compaction.lag.ms": HOUR,
    "delete.retention.ms": HOUR,
    "file.delete.delay.ms": 0,
}
SUBJECT = b"erasure-subject-7c1e5a"
SECRETS = (b"erasure-secret-v1-93ab0c", b"erasure-secret-v2-41fd77")


def erasure_spec(topic: str, cron: str) -> dict[str, Any]:
    config = dict(ERASURE_CONFIG)
    if topic == ERASURE_COMPACT_DELETE:
        config.update({"cleanup.policy": "compact,delete", "retention.ms": 30 * HOUR})
    return {"partitions": 1, "schedule": cron, "config": config}


def fill_erasure(lake: Lake, topic: str, first_tick_ms: int) -> None:
    """The subject's values 50 and 49 hours before the first tick, other keys around them, and the
    subject's tombstone 48 hours before it in the active segment, which then stays idle. On
    `erasure-failing` a segment of other keys is damaged, so its compaction fails."""
    log = lake.create_topic(topic).partition(0)
    t = first_tick_ms
    log.append([Record(SUBJECT, SECRETS[0], t - 50 * HOUR), Record(b"other-1", b"o1", t - 50 * HOUR)], now_ms=t)
    log.roll(now_ms=t - 50 * HOUR)
    log.append([Record(b"other-2", b"o2", t - 49 * HOUR)], now_ms=t)
    log.roll(now_ms=t - 49 * HOUR)
    log.append([Record(SUBJECT, SECRETS[1], t - 49 * HOUR)], now_ms=t)
    log.roll(now_ms=t - 49 * HOUR)
    log.append([Record(SUBJECT, None, t - 48 * HOUR)], now_ms=t)
    if topic == ERASURE_FAILING:
        damaged = log.manifest().segments[1].files[0].path
        lake.store.write(log.prefix + damaged, b"not a parquet file")
