"""End to end in real Airflow (dag.test on SQLite) against the S3 endpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from lakecleaner.config import LakeConfig, load_config
from lakecleaner.lake import Lake
from lakecleaner.log.records import Record
from lakecleaner.orchestration.local import DagRunResult, migrate, run_dag

REPO = Path(__file__).resolve().parent.parent
HOUR = 3_600_000
T0_ISO = "2026-03-01T00:00:00+00:00"
T0 = 1_772_323_200_000  # 2026-03-01T00:00:00Z


@pytest.fixture(scope="module")
def airflow_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("airflow")
    migrate(home, REPO / "config" / "lakecleaner.yaml")
    return home


class Harness:
    def __init__(self, home: Path, config_path: Path, s3: Any) -> None:
        self.home, self.config_path, self.s3 = home, config_path, s3
        self.config: LakeConfig = load_config(config_path)
        self.lake = Lake.open(
            LakeConfig(self.config.lake_uri, s3.settings(), self.config.defaults, self.config.topics, self.config.spark)
        )

    def run(self, topic: str, when: str, conf: dict[str, Any] | None = None) -> DagRunResult:
        env = {
            "LAKECLEANER_S3_ENDPOINT_URL": self.s3.url,
            "AWS_ACCESS_KEY_ID": self.s3.access_key,
            "AWS_SECRET_ACCESS_KEY": self.s3.secret_key,
            "AWS_REGION": "us-east-1",
        }
        return run_dag(self.home, self.config_path, f"lakecleaner__{topic}", when, conf, env, timeout_s=900)


@pytest.fixture
def harness(airflow_home: Path, tmp_path: Path, s3_endpoint: Any) -> Harness:
    uri = f"s3://{s3_endpoint.bucket}/e2e-{tmp_path.name[-12:]}"
    config = {
        "lake": {"uri": uri, "storage": {"region": "us-east-1", "max_attempts": 3}},
        "topics": {
            "page-views": {
                "partitions": 1,
                "schedule": "@hourly",
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
    path = tmp_path / "lakecleaner.yaml"
    path.write_text(yaml.safe_dump(config))
    return Harness(airflow_home, path, s3_endpoint)


def fill_events(h: Harness) -> None:
    """Five sealed segments of 10 records, each an hour older than the next, plus an active one."""
    log = h.lake.create_topic("page-views").partition(0)
    for i in range(5):
        log.append([Record(f"u{i}-{j}".encode(), b"view", T0 - (10 - i) * HOUR) for j in range(10)], now_ms=T0)
        log.roll(now_ms=T0)
    log.append([Record(b"late", b"view", T0)], now_ms=T0)
    h.lake.offsets.commit("analytics", "page-views", {0: 45})
    h.lake.offsets.commit("billing", "page-views", {0: 30})


def bases(h: Harness) -> list[int]:
    return [s.base_offset for s in h.lake.topic("page-views").partition(0).manifest().segments]


def test_delete_topic_consumed_retention_idempotence_and_dry_run(harness: Harness) -> None:
    fill_events(harness)
    dry = harness.run("page-views", T0_ISO, {"dry_run": True})
    assert dry.state == "success", dry.log[-3000:]
    assert dry.tasks["compaction_gate"] == "skipped" and dry.tasks["physical_deletion"] == "skipped"
    assert bases(harness) == [0, 10, 20, 30, 40, 50]

    first = harness.run("page-views", T0_ISO)
    assert first.state == "success", first.log[-3000:]
    assert first.tasks["compact"] == "skipped"  # a delete-policy topic has nothing to compact
    # billing has consumed [0, 30): exactly those segments go, by consumed retention
    assert bases(harness) == [30, 40, 50]
    log = harness.lake.topic("page-views").partition(0)
    assert log.manifest().pending_deletes == ()  # file.delete.delay.ms = 0: deleted by the same run

    manifest = log.manifest()
    again = harness.run("page-views", T0_ISO)
    assert again.state == "success"
    assert log.manifest().segments == manifest.segments  # a second run at the same now changes nothing
    assert again.tasks["publish_change"] == "skipped"


def test_invalid_parameters_fail_the_first_task_with_the_reason(harness: Harness) -> None:
    fill_events(harness)
    result = harness.run("page-views", T0_ISO, {"partitions": [7]})
    assert result.state == "failed"
    assert result.tasks["assess"] == "failed"
    assert "partitions: 7 is not a partition of this topic (0..0)" in result.log
    assert bases(harness) == [0, 10, 20, 30, 40, 50]
