"""The `--topics` shape of bench/control_plane.py (issue 50): the dashboard's overview of a lake of
many topics, read from their summaries, through a store far away.

Builds, straight on the server, `topics` topics of `partitions` partitions each: every partition's
manifest is a copy of one real partition's (three sealed segments and an active one, written by
lakecleaner's own append and roll on a local lake, renamed to its topic and partition), and every
topic's summary is the one `lakecleaner summaries refresh` would write, built from those manifests by
the same code (`summary_of_plan`) without reading them back (which would take 100,000 requests).
A second lake beside it holds 10 such topics (1,000 partitions), with and without summaries.
"""

from __future__ import annotations

import json
import random
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench.s3_servers import S3Server

from lakecleaner.cleaner_state import CleanerState
from lakecleaner.config import LakeConfig, load_config
from lakecleaner.io.concurrent import map_ordered
from lakecleaner.lake import Lake, TopicMetadata
from lakecleaner.log.layout import partition_marker_key, summary_key, topic_metadata_key
from lakecleaner.log.manifest import Manifest
from lakecleaner.log.records import Record
from lakecleaner.policy import plan_topic
from lakecleaner.summaries.model import summary_of_plan

HOUR = 3_600_000
OVERRIDES = {"cleanup.policy": "compact", "max.compaction.lag.ms": 7 * 24 * HOUR}
#: Where each lake lives in the bucket.
BIG_LAKE, SMALL_LAKE = "lake-topics", "lake-ten"
SMALL_TOPICS = 10


@dataclass(frozen=True)
class LakeOfTopics:
    """A lake's config file and its topics' names."""

    config_file: Path
    topics: list[str]


def template_manifest(now_ms: int) -> Manifest:
    """One partition as lakecleaner writes it: three sealed segments of 20 records over 10 keys
    (tombstones among them) and an active segment, on a local lake."""
    with tempfile.TemporaryDirectory() as directory:
        lake = Lake.open(f"file://{directory}/lake")
        log = lake.create_topic("template", 1, OVERRIDES, now_ms=now_ms - 10 * HOUR).partition(0)
        for batch in range(4):
            at = now_ms - (8 - 2 * batch) * HOUR
            records = [Record(f"k{i % 10}".encode(), None if i == 7 else b"v" * 40, at) for i in range(20)]
            log.append(records, now_ms=at)
            if batch < 3:
                log.roll(now_ms=at + 1)
        return log.manifest()


def write_config(path: Path, server: S3Server, endpoint: str, prefix: str, topics: list[str], partitions: int) -> Path:
    """A lakecleaner.yaml on `prefix` of the bucket through `endpoint`, declaring every topic."""
    config = {
        "lake": {
            "uri": f"s3://{server.bucket}/{prefix}",
            "storage": {
                "endpoint_url": endpoint,
                "region": "us-east-1",
                "access_key_id": server.access_key,
                "secret_access_key": server.secret_key,
                "max_concurrency": 64,
            },
        },
        "topics": {t: {"partitions": partitions, "schedule": None, "config": OVERRIDES} for t in topics},
    }
    path.write_text(json.dumps(config))  # JSON is YAML
    return path


def build(config: LakeConfig, topics: list[str], partitions: int, now_ms: int, summaries: bool) -> int:
    """Write every topic's topic.json and manifests (and summary, when `summaries`) on the lake of
    `config`, 64 at a time; returns the number of objects written."""
    lake = Lake.open(config)
    template = template_manifest(now_ms)

    def topic_objects(name: str) -> list[tuple[str, bytes]]:
        metadata = TopicMetadata(name, partitions, OVERRIDES, now_ms - 10 * HOUR)
        data = metadata.to_json()
        manifests = {p: replace(template, topic=name, partition=p) for p in range(partitions)}
        objects = [(topic_metadata_key(name), data)]
        objects += [(f"topics/{name}/partition={p}/manifest.json", m.to_json()) for p, m in manifests.items()]
        if summaries:
            config_of = lake.config.topic_config(name, OVERRIDES)
            plan = plan_topic(name, manifests, config_of, {}, now_ms)
            summary = summary_of_plan(plan, manifests, {}, data, partitions, CleanerState(name), [])
            objects.append((summary_key(name), summary.to_json()))
        return objects

    objects = [o for name in topics for o in topic_objects(name)]
    map_ordered(lambda o: lake.store.write(o[0], o[1]), objects, 64)
    return len(objects)


def mark_committed(
    config: LakeConfig, topics: list[str], partitions: int, share: float, now_ms: int, seed: int = 1
) -> int:
    """Leave the pending marker of a commit on `share` of the partitions (a random sample), as a
    commit since the summaries were written does: the overview must read those manifests."""
    lake = Lake.open(config)
    rng = random.Random(seed)
    every = [(t, p) for t in topics for p in range(partitions)]
    chosen = rng.sample(every, max(1, int(len(every) * share)))
    version = template_manifest(now_ms).version
    map_ordered(lambda tp: lake.store.write(partition_marker_key(tp[0], tp[1], version + 1), b""), chosen, 64)
    return len(chosen)


def drop_summaries(config: LakeConfig, topics: list[str]) -> None:
    lake = Lake.open(config)
    lake.store.delete_many([summary_key(t) for t in topics])


def overview_check(client: Any, now_ms: int, topics: int, from_manifests: int | None) -> Callable[[], str]:
    """GET /api/topics and check the rows: every topic, and how many partitions were read from
    their manifests (None: do not check)."""

    def run() -> str:
        response = client.get("/api/topics", params={"now": str(now_ms)})
        if response.status_code != 200:
            raise RuntimeError(f"GET /api/topics: {response.status_code} {response.text[:500]}")
        rows = response.json()["topics"]
        errors = [r["error"] for r in rows if r["error"]]
        read = sum(r["source"]["partitions_from_manifests"] for r in rows)
        if len(rows) != topics or errors or (from_manifests is not None and read != from_manifests):
            raise RuntimeError(f"{len(rows)} rows, {read} partitions from manifests, errors {errors[:3]}")
        return f"{len(response.content):,} bytes; {read} partitions read from manifests"

    return run


def erasure_check(client: Any, now_ms: int, deadlines: int) -> Callable[[], str]:
    """GET /api/erasure (its first page) and check that it counts every partition's deadline."""

    def run() -> str:
        response = client.get("/api/erasure", params={"now": str(now_ms)})
        if response.status_code != 200:
            raise RuntimeError(f"GET /api/erasure: {response.status_code} {response.text[:500]}")
        page = response.json()
        found, unreadable = page["paging"]["deadlines"], page["unreadable_topics"]
        if found != deadlines or unreadable or not page["deadlines"]:
            raise RuntimeError(f"{found} deadlines of {deadlines}, unreadable topics {list(unreadable)[:3]}")
        return f"{len(response.content):,} bytes; {found:,} deadlines"

    return run


def lake_config(path: Path) -> LakeConfig:
    return load_config(str(path))
