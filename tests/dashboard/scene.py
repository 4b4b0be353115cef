"""A small lake whose partitions show every part of the dashboard's drawing.

`customers` (compacted): partition 0 has a clean range (cleaner checkpoint 100), a dirty range, a
segment held back by min.compaction.lag.ms, and an active segment; it is overdue by KIP-354.
`page-views` (delete): its oldest segment is past retention.ms, the next one is consumed by both
groups (consumed retention deletes it), and billing's offset holds back the rest.
`scratch` exists only in the lake (no DAG). Times are relative to `now_ms`.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import yaml

from lakecleaner.config import load_config
from lakecleaner.lake import Lake
from lakecleaner.log.manifest import Manifest
from lakecleaner.log.records import Record
from tests.support.s3 import S3Endpoint

HOUR = 3_600_000
MINUTE = 60_000
#: Recognisable credentials in the storage settings: no page or API response may contain them.
SECRET_KEY = "LC-TEST-SECRET-5b1f0c8e9d"
ACCESS_KEY = "LC-TEST-ACCESS-77aa41"
CHECKPOINT = 100
ANALYTICS, BILLING = 450, 210


def write_config(directory: Path, lake_dir: Path, endpoint: S3Endpoint | None = None) -> Path:
    """The scene's config file (schedules off: runs start only when a test triggers them): its
    lake in `lake_dir`, or in a fresh prefix of `endpoint`'s bucket."""
    config = {
        "lake": (
            {
                "uri": f"file://{lake_dir}",
                "storage": {"access_key_id": ACCESS_KEY, "secret_access_key": SECRET_KEY, "region": "us-east-1"},
            }
            if endpoint is None
            else {
                "uri": f"s3://{endpoint.bucket}/{uuid.uuid4().hex[:12]}",
                "storage": {
                    "endpoint_url": endpoint.url,
                    "access_key_id": endpoint.access_key,
                    "secret_access_key": endpoint.secret_key,
                    "region": "us-east-1",
                },
            }
        ),
        "topics": {
            "customers": {
                "partitions": 2,
                "schedule": None,
                "config": {
                    "cleanup.policy": "compact",
                    "min.compaction.lag.ms": 2 * HOUR,
                    "max.compaction.lag.ms": 12 * HOUR,
                    "delete.retention.ms": HOUR,
                },
            },
            "page-views": {
                "partitions": 1,
                "schedule": None,
                "consumer_groups": ["analytics", "billing"],
                "config": {
                    "cleanup.policy": "delete",
                    "retention.ms": 48 * HOUR,
                    "retention.commitoffset.ms": HOUR,
                    "file.delete.delay.ms": 0,
                },
            },
        },
    }
    path = directory / "lakecleaner.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _records(topic: str, count: int, timestamp: int, first_key: int = 0) -> list[Record]:
    return [
        Record(f"{topic}-key-{(first_key + i) % 50}".encode(), b"v" * 120, timestamp=timestamp) for i in range(count)
    ]


def _segments(lake: Lake, topic: str, partition: int, batches: list[tuple[int, int]], now_ms: int) -> None:
    """Append (record count, age in ms) batches, each rolled into its own segment but the last."""
    log = lake.topic(topic).partition(partition)
    for index, (count, age) in enumerate(batches):
        log.append(_records(topic, count, now_ms - age, index * 7), now_ms=now_ms)
        if index + 1 < len(batches):
            log.roll(now_ms=now_ms)


def build_scene(config_path: Path, now_ms: int) -> Lake:
    """Create and fill the scene's topics in the config's lake."""
    lake = Lake.open(load_config(config_path))
    for name in ("customers", "page-views"):
        lake.create_topic(name, now_ms=now_ms - 60 * HOUR)
    lake.create_topic("scratch", partitions=1, now_ms=now_ms - 60 * HOUR)
    _segments(
        lake,
        "customers",
        0,
        [(100, 20 * HOUR), (100, 16 * HOUR), (100, 10 * HOUR), (50, HOUR), (30, 10 * MINUTE)],
        now_ms,
    )
    lake.topic("customers").partition(0).commit(lambda m: m.next_version(now_ms, cleaner_checkpoint=CHECKPOINT))
    _segments(lake, "customers", 1, [(80, 5 * HOUR), (20, 30 * MINUTE)], now_ms)
    _segments(
        lake,
        "page-views",
        0,
        [(100, 50 * HOUR), (100, 24 * HOUR), (100, 18 * HOUR), (100, 12 * HOUR), (100, 6 * HOUR), (30, 20 * MINUTE)],
        now_ms,
    )
    lake.offsets.commit("analytics", "page-views", {0: ANALYTICS}, now_ms=now_ms)
    lake.offsets.commit("billing", "page-views", {0: BILLING}, now_ms=now_ms)
    _segments(lake, "scratch", 0, [(10, HOUR)], now_ms)
    return lake


def expected_regions(manifest: Manifest, first_dirty: int, first_uncleanable: int) -> dict[str, tuple[int, int]]:
    """The ranges the drawing must show for a compacted partition with an active segment."""
    assert manifest.active_segment is not None
    active = manifest.active_segment.base_offset
    return {
        "clean": (manifest.segments[0].base_offset, first_dirty),
        "dirty": (first_dirty, first_uncleanable),
        "uncleanable": (first_uncleanable, active),
        "active": (active, manifest.next_offset),
    }
