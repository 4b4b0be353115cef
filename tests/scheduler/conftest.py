"""One real Airflow for every test of this package: API server, scheduler, DAG processor, LocalExecutor
on SQLite (`LocalAirflow`), set up the way `make airflow-ui` and docker-compose set it up (`airflow db
migrate`, then `lakecleaner airflow setup`), serving one lake on the S3 endpoint, with the compact
tasks as clients of the test session's Spark Connect server (a `spark_connect` connection).

Every topic of the lake has its own DAG, and every test its own topics, so tests do not see each
other's runs. All DAGs are paused at creation: nothing runs until a test unpauses a DAG or triggers it.
The cron topics are scheduled daily at the hour twelve hours from the session's start, so no tick
falls within hours of the tests, and their latest tick (the one a live scheduler creates a run for
when the DAG is unpaused, catchup being off) stays `ticks[-1]` throughout.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from lakecleaner.audit import audit_key
from lakecleaner.config import load_config
from lakecleaner.engine.connect_server import ConnectServer
from lakecleaner.lake import Lake
from lakecleaner.orchestration.compact_task import connection_of_url
from lakecleaner.runs.naming import dag_id_of
from tests.scheduler.topics import (
    ADOPTED,
    BACKFILLED,
    CDC_BACKFILLED,
    CDC_CONFIG,
    CDC_REST,
    CDC_REST_NULL,
    CDC_SCHEDULED,
    CRON_TOPICS,
    ERASURE_TOPICS,
    MANUAL_TOPICS,
    MIRRORED,
    SCHEDULED,
    SUBJECT,
    daily_schedule,
    erasure_spec,
    fill_cdc,
    fill_erasure,
    fill_views,
    views_spec,
)
from tests.support.kafka_mock import MockCluster
from tests.support.local_airflow import LocalAirflow
from tests.support.s3 import S3Endpoint


@dataclass
class World:
    """The shared Airflow, the lake it serves, and the cron topics' ticks (oldest first)."""

    airflow: LocalAirflow
    lake: Lake
    ticks: list[datetime]
    config_path: Path
    kafka: MockCluster
    mirrored_source: str

    def diagnostics(self) -> str:
        """Component logs and the logs of tasks that raised, for assertion messages."""
        task_logs = sorted((self.airflow.home / "logs").glob("dag_id=*/**/*.log"))
        failing = [p for p in task_logs if "Traceback" in p.read_text(errors="replace")]
        tails = "\n".join(f"--- {p} ---\n{p.read_text(errors='replace')[-3000:]}" for p in failing[:4])
        return f"{self.airflow.log_tail()}\n{tails}"

    def trigger(self, topic: str, body: dict[str, Any]) -> str:
        """POST a DAG run of `topic` through the REST API, as API clients do; returns its run id."""
        status, run = self.airflow.api("POST", f"/api/v2/dags/{dag_id_of(topic)}/dagRuns", user="admin", body=body)
        assert status == 200, (status, run)
        return str(run["dag_run_id"])

    def run_failing(self, topic: str) -> tuple[str, dict[str, tuple[str, int]]]:
        """Trigger a run of `topic` now and wait until it failed; its id and each task's state and
        try number."""
        run_id = self.trigger(topic, {"logical_date": datetime.now(UTC).isoformat(), "conf": {}})
        run = self.airflow.wait_for_run(dag_id_of(topic), run_id, timeout_s=600)
        assert run["state"] == "failed", self.diagnostics()
        return run_id, {t["task_id"]: (t["state"], t["try_number"]) for t in self.task_instances(topic, run_id)}

    def task_instances(self, topic: str, run_id: str) -> list[dict[str, Any]]:
        """The task instances of one of `topic`'s runs, as the REST API gives them."""
        status, body = self.airflow.api(
            "GET", f"/api/v2/dags/{dag_id_of(topic)}/dagRuns/{run_id}/taskInstances", user="admin"
        )
        assert status == 200
        instances: list[dict[str, Any]] = body["task_instances"]
        return instances

    def run_now(self, topic: str) -> tuple[str, dict[str, tuple[str, str]]]:
        """Trigger a run of `topic` now, unpause its DAG and wait until the run succeeded; its id
        and each task's state and pool."""
        run_id = self.trigger(topic, {"logical_date": datetime.now(UTC).isoformat(), "conf": {}})
        self.airflow.set_paused(dag_id_of(topic), False)
        run = self.airflow.wait_for_run(dag_id_of(topic), run_id, timeout_s=600)
        assert run["state"] == "success", self.diagnostics()
        return run_id, {t["task_id"]: (t["state"], t["pool"]) for t in self.task_instances(topic, run_id)}


def world_config(endpoint: S3Endpoint, prefix: str, topics: dict[str, Any], bootstrap: str) -> dict[str, Any]:
    return {
        "lake": {"uri": f"s3://{endpoint.bucket}/{prefix}", "storage": {"region": "us-east-1"}},
        "airflow": {"pool_slots": 2},
        "kafka": {"clusters": {"mock": {"bootstrap.servers": bootstrap}}},
        "topics": topics,
    }


@pytest.fixture(scope="package")
def world(
    tmp_path_factory: pytest.TempPathFactory,
    s3_endpoint: S3Endpoint,
    connect_server: ConnectServer,
    kafka_mock: MockCluster,
) -> Iterator[World]:
    cron, latest = daily_schedule(datetime.now(UTC))
    ticks = [latest - timedelta(days=2), latest - timedelta(days=1), latest]
    home = tmp_path_factory.mktemp("scheduler")
    topics: dict[str, Any] = {name: views_spec(cron) for name in (SCHEDULED, BACKFILLED)}
    for name in CRON_TOPICS + MANUAL_TOPICS:
        topics[name] = {"partitions": 1, "schedule": cron if name in CRON_TOPICS else None, "config": CDC_CONFIG}
    for name in ERASURE_TOPICS:
        topics[name] = erasure_spec(name, cron)
    mirrored_source = kafka_mock.new_topic()
    topics[MIRRORED] = {
        "schedule": None,
        "mirror": {"cluster": "mock", "topic": mirrored_source},
        "config": {"cleanup.policy": "compact"},  # the mock cluster does not answer DescribeConfigs
    }
    prefix = f"scheduler-{home.name[-12:]}"
    topics[ADOPTED] = {
        "schedule": None,
        "partitions": 2,
        "adopt": {
            "connect": {"from": f"s3://{s3_endpoint.bucket}/{prefix}-sink/topics/{ADOPTED}", "settle_seconds": 0}
        },
        "config": {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.01, "segment.bytes": 1024},
    }
    config_path = home / "lakecleaner.yaml"
    config_path.write_text(yaml.safe_dump(world_config(s3_endpoint, prefix, topics, kafka_mock.bootstrap)))
    lake = Lake.open(replace(load_config(config_path), storage=s3_endpoint.settings()))
    latest_ms = int(latest.timestamp() * 1000)
    for topic in (SCHEDULED, BACKFILLED):
        fill_views(lake, topic, latest_ms)
    for topic in CRON_TOPICS + MANUAL_TOPICS:
        fill_cdc(lake, topic, latest_ms)
    for topic in ERASURE_TOPICS:
        fill_erasure(lake, topic, int(ticks[0].timestamp() * 1000))
    env = {
        "LAKECLEANER_S3_ENDPOINT_URL": s3_endpoint.url,
        "AWS_ACCESS_KEY_ID": s3_endpoint.access_key,
        "AWS_SECRET_ACCESS_KEY": s3_endpoint.secret_key,
        "AWS_REGION": "us-east-1",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",  # nothing runs before a test says so
        # The compact tasks are clients of the session's Spark Connect server (no JVM per run); the
        # spark-submit task runs in real Airflow in test_airflow_e2e.py and test_wheel.py.
        "AIRFLOW_CONN_SPARK_LAKECLEANER": json.dumps(connection_of_url(connect_server.url)),
    }
    with LocalAirflow(home / "airflow", config_path, extra_env=env) as airflow:
        airflow.wait_for_dags([dag_id_of(t) for t in topics])
        yield World(airflow, lake, ticks, config_path, kafka_mock, mirrored_source)


@pytest.fixture(scope="package")
def started(world: World) -> dict[str, Any]:
    """Start every scenario's runs; returns the REST-triggered runs' ids by topic, and, under
    "erasure_before", each erasure topic's audit of the subject's key before its runs."""
    airflow, latest = world.airflow, world.ticks[-1]
    before_first_tick = int(world.ticks[0].timestamp() * 1000) - 60_000
    ids: dict[str, Any] = {
        "erasure_before": {t: audit_key(world.lake, t, SUBJECT, before_first_tick) for t in ERASURE_TOPICS},
        CDC_REST: world.trigger(CDC_REST, {"logical_date": latest.isoformat(), "conf": {}}),
        CDC_REST_NULL: world.trigger(CDC_REST_NULL, {"logical_date": None}),
    }
    airflow.backfill(dag_id_of(CDC_BACKFILLED), world.ticks[1].isoformat(), latest.isoformat())
    for topic in ERASURE_TOPICS:
        airflow.backfill(dag_id_of(topic), world.ticks[0].isoformat(), latest.isoformat())
    for topic in (CDC_SCHEDULED, CDC_BACKFILLED, CDC_REST, CDC_REST_NULL, *ERASURE_TOPICS):
        airflow.set_paused(dag_id_of(topic), False)
    return ids
