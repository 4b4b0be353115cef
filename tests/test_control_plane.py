"""The control plane under concurrency, on a real S3 endpoint behind a fault-injecting proxy: a
partition whose manifest cannot be read (its GETs keep failing) is reported for that partition by
`status`, `plan`, the DAG's assessment and the dashboard, while every other partition, read
concurrently over the bounded metadata pool, proceeds; a lake of many topics is listed with one
delimited LIST. (Timings are bench/control_plane.py's business.)"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from lakecleaner.cli import cli
from lakecleaner.config import load_config
from lakecleaner.dashboard.app import Backend, create_app
from lakecleaner.lake import Lake
from lakecleaner.log.records import Record
from lakecleaner.orchestration import tasks
from tests.support.flaky_proxy import FlakyProxy
from tests.support.s3 import S3Endpoint

PARTITIONS = 24
BROKEN = (3, 17)
NOW_MS = 1_800_000_000_000


def _broken_manifest(method: str, path: str) -> bool:
    """The manifest reads of the broken partitions."""
    key = unquote(path.split("?")[0])
    return method == "GET" and any(key.endswith(f"/t/partition={p}/manifest.json") for p in BROKEN)


@pytest.fixture
def world(s3_endpoint: S3Endpoint, tmp_path: Path) -> Iterator[tuple[Path, FlakyProxy]]:
    """A topic of PARTITIONS partitions (each with a sealed segment) and 30 small topics, written
    directly; then a config that reaches them through a proxy failing every manifest GET of the
    BROKEN partitions, with 8 requests at a time."""
    prefix = f"cp-{tmp_path.name[-12:]}"
    direct = {"uri": f"s3://{s3_endpoint.bucket}/{prefix}", "storage": _storage(s3_endpoint, s3_endpoint.url)}
    lake = _lake(_write(tmp_path / "direct.yaml", direct))
    topic = lake.create_topic("t", partitions=PARTITIONS, config={"cleanup.policy": "compact,delete"})
    for p in range(PARTITIONS):
        log = topic.partition(p)
        log.append([Record(b"k", b"v1"), Record(b"k", b"v2")], now_ms=NOW_MS - 7_200_000)
        log.roll(now_ms=NOW_MS - 7_200_000)
    for i in range(30):
        lake.create_topic(f"small-{i:02d}", partitions=1)
    with FlakyProxy(s3_endpoint.url, 10**6, fail_when=_broken_manifest) as proxy:
        behind = {"uri": direct["uri"], "storage": _storage(s3_endpoint, proxy.url)}
        yield _write(tmp_path / "lakecleaner.yaml", behind), proxy


def _storage(endpoint: S3Endpoint, url: str) -> dict[str, Any]:
    return {
        "endpoint_url": url,
        "region": "us-east-1",
        "access_key_id": endpoint.access_key,
        "secret_access_key": endpoint.secret_key,
        "max_attempts": 2,
        "backoff_base_ms": 1,
        "backoff_max_ms": 5,
        "max_concurrency": 8,
    }


def _write(path: Path, lake: dict[str, Any]) -> Path:
    path.write_text(json.dumps({"lake": lake, "topics": {"t": {"partitions": PARTITIONS}}}))
    return path


def _lake(config: Path) -> Lake:
    return Lake.open(load_config(str(config)))


def _cli(config: Path, *args: str) -> tuple[int, Any, str]:
    result = CliRunner().invoke(cli, ["--config", str(config), "--json", *args])
    return result.exit_code, json.loads(result.stdout) if result.stdout.strip() else None, result.stderr


def test_status_and_plan_report_the_unreadable_partitions_and_show_the_others(world: tuple[Path, FlakyProxy]) -> None:
    config, _ = world
    code, status, errors = _cli(config, "status", "--topic", "t")
    assert code == 1
    rows = {row["partition"]: row for row in status["t"]}
    assert sorted(rows) == list(range(PARTITIONS))
    for p in BROKEN:
        assert "manifest.json" in rows[p]["error"] and "still failing" in rows[p]["error"]
        assert f"t-{p}: FAILED" in errors
    assert all(rows[p]["records"] == 2 for p in range(PARTITIONS) if p not in BROKEN)

    code, plan, errors = _cli(config, "plan", "--topic", "t", "--now", str(NOW_MS))
    assert code == 1
    assert sorted(int(p) for p in plan["unreadable"]) == list(BROKEN)
    assert sorted(p["partition"] for p in plan["partitions"]) == [p for p in range(PARTITIONS) if p not in BROKEN]


def test_the_dags_assessment_plans_and_rolls_the_others(world: tuple[Path, FlakyProxy]) -> None:
    config, _ = world
    result = tasks.assess(load_config(str(config)), "t", NOW_MS, {})
    assert sorted(int(p) for p in result["unreadable"]) == list(BROKEN)
    assert all("manifest.json" in reason for reason in result["unreadable"].values())
    assert not set(result["selected"]) & set(BROKEN)
    assert set(result["reasons"]) == {str(p) for p in range(PARTITIONS) if p not in BROKEN}


def test_the_assessment_rolls_each_idle_partition_with_one_put_on_the_manifest_it_read(
    world: tuple[Path, FlakyProxy],
) -> None:
    """★ KIP-354: an active segment whose first batch is older than segment.ms is rolled by the
    assessment, each partition by one conditional PUT that starts from the manifest the
    assessment read: no second GET of it (a thousand partitions 20 ms away would pay a round of
    reads for nothing)."""
    config, proxy = world
    readable = [p for p in range(PARTITIONS) if p not in BROKEN]
    topic = _lake(config).topic("t")
    long_ago = NOW_MS - topic.config.segment_ms - 60_000
    for p in readable:
        topic.partition(p).append([Record(b"k", b"v3", timestamp=long_ago)], now_ms=long_ago)
    before = len(proxy.seen)
    result = tasks.assess(load_config(str(config)), "t", NOW_MS, {})
    assert result["rolled"] == readable
    manifests = [
        method
        for method, path in proxy.seen[before:]
        if not _broken_manifest(method, path) and unquote(path.split("?")[0]).endswith("/manifest.json")
    ]
    assert Counter(manifests) == {"GET": len(readable), "PUT": len(readable)}
    assert all(topic.partition(p).manifest().active_segment is None for p in readable)


def test_the_dashboard_names_the_unreadable_partitions(world: tuple[Path, FlakyProxy]) -> None:
    config, _ = world

    class Everyone:
        def can_read(self, user: Any, dag_id: str | None) -> bool:
            return True

        def can_trigger(self, user: Any, dag_id: str) -> bool:
            return False

    backend = Backend(
        lambda: "someone", Everyone(), lambda dag_id, limit: [], lambda: Lake.open(load_config(str(config)))
    )
    client = TestClient(create_app(backend))
    overview = client.get("/api/topics", params={"now": str(NOW_MS)}).json()
    rows = {row["topic"]: row for row in overview["topics"]}
    assert len(rows) == 31 and all(row["error"] is None for row in rows.values())
    assert sorted(int(p) for p in rows["t"]["unreadable_partitions"]) == list(BROKEN)
    page = client.get("/api/topics/t", params={"now": str(NOW_MS)}).json()
    assert sorted(int(p) for p in page["unreadable_partitions"]) == list(BROKEN)
    assert len(page["partition_views"]) == PARTITIONS - len(BROKEN)
    assert client.get(f"/api/topics/t/partitions/{BROKEN[0]}", params={"now": str(NOW_MS)}).status_code == 503


def test_listing_the_topics_is_one_request_however_many_objects_lie_below(world: tuple[Path, FlakyProxy]) -> None:
    config, proxy = world
    before = proxy.requests
    code, topics, _ = _cli(config, "topics", "list")
    assert code == 0
    assert len(topics) == 31
    assert proxy.requests - before == 1
