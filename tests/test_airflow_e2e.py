"""End to end in real Airflow (dag.test on SQLite) against the S3 endpoint."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from contextlib import closing
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
import yaml

from lakecleaner.clock import wall_clock_ms
from lakecleaner.config import LakeConfig, load_config
from lakecleaner.engine.connect_server import ConnectServer
from lakecleaner.lake import Lake
from lakecleaner.log.manifest import Manifest
from lakecleaner.log.records import Record
from lakecleaner.orchestration.airflow_setup import SETUP_VARIABLE
from lakecleaner.orchestration.compact_task import connection_of_url
from lakecleaner.orchestration.local import (
    DagRunRequest,
    DagRunResult,
    airflow_env,
    prepare_airflow,
    run_dag,
    run_dags,
)
from lakecleaner.runs.reports import runs_prefix
from lakecleaner.summaries.store import SummaryStore
from tests.support.samples import write_sample

REPO = Path(__file__).resolve().parent.parent
HOUR = 3_600_000
T0_ISO = "2026-03-01T00:00:00+00:00"
T0 = 1_772_323_200_000  # 2026-03-01T00:00:00Z


@pytest.fixture(scope="module")
def airflow_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("airflow")
    prepare_airflow(home, write_sample(home))
    return home


class Harness:
    def __init__(self, home: Path, config_path: Path, s3: Any) -> None:
        self.home, self.config_path, self.s3 = home, config_path, s3
        self.config: LakeConfig = load_config(config_path)
        self.lake = Lake.open(
            LakeConfig(self.config.lake_uri, s3.settings(), self.config.defaults, self.config.topics, self.config.spark)
        )

    def run(
        self, topic: str, when: str, conf: dict[str, Any] | None = None, extra_env: dict[str, str] | None = None
    ) -> DagRunResult:
        return run_dag(self.home, self.config_path, f"lakecleaner__{topic}", when, conf, self.env(extra_env), 900)

    def runs(
        self,
        topic: str,
        runs: list[tuple[str, dict[str, Any]]],
        extra_env: dict[str, str] | None = None,
        between: Callable[[], None] | None = None,
    ) -> list[DagRunResult]:
        """DAG runs (logical date, conf) one after another in one process (`run_dags`: it stops at
        the first that fails); `between` is called as each ends, before the next begins."""
        requests = [DagRunRequest(f"lakecleaner__{topic}", when, conf) for when, conf in runs]
        heard = None if between is None else lambda _request, _result: between()
        return run_dags(self.home, self.config_path, requests, self.env(extra_env), 900, heard)

    def env(self, extra: dict[str, str] | None) -> dict[str, str]:
        return {
            **(extra or {}),
            "LAKECLEANER_S3_ENDPOINT_URL": self.s3.url,
            "AWS_ACCESS_KEY_ID": self.s3.access_key,
            "AWS_SECRET_ACCESS_KEY": self.s3.secret_key,
            "AWS_REGION": "us-east-1",
        }


@pytest.fixture(params=["s3"])
def harness(airflow_home: Path, tmp_path: Path, request: pytest.FixtureRequest) -> Harness:
    """The DAGs' harness on moto's S3 server, or (parametrized indirectly) on SeaweedFS."""
    s3_endpoint = request.getfixturevalue("seaweedfs_endpoint" if request.param == "seaweedfs" else "s3_endpoint")
    uri = f"s3://{s3_endpoint.bucket}/e2e-{tmp_path.name[-12:]}"
    config = {
        "lake": {"uri": uri, "storage": {"region": "us-east-1", "max_attempts": 3}},
        "topics": {
            "customers-cdc": {
                "partitions": 2,
                "schedule": "@hourly",
                "config": {
                    "cleanup.policy": "compact",
                    "compaction.strategy": "header",
                    "compaction.strategy.header": "version",
                    "delete.retention.ms": HOUR,
                    "file.delete.delay.ms": 0,
                },
            },
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


def bases(h: Harness, manifest: Manifest | None = None) -> list[int]:
    """The base offsets of page-views' segments: in `manifest` (read earlier), or as they are now."""
    read = manifest or h.lake.topic("page-views").partition(0).manifest()
    return [s.base_offset for s in read.segments]


def test_the_prepared_sqlite_database_is_in_wal_mode(airflow_home: Path) -> None:
    """`prepare_airflow` switches the local metadata database to write-ahead logging, so readers
    (the API server, the UI) never hold the scheduler's and the tasks' writes off."""
    with closing(sqlite3.connect(airflow_home / "airflow.db")) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_delete_topic_consumed_retention_idempotence_and_dry_run(harness: Harness) -> None:
    """A dry run, a run and the same run again, in one process; the log is read after each, before
    the next run begins (`run_dags` waits for its `on_result`)."""
    fill_events(harness)
    log = harness.lake.topic("page-views").partition(0)
    after: list[Manifest] = []
    read_at: list[int] = []

    def read_the_log() -> None:
        after.append(log.manifest())
        read_at.append(wall_clock_ms())

    runs = [(T0_ISO, {"dry_run": True}), (T0_ISO, {}), (T0_ISO, {})]
    made = harness.runs("page-views", runs, between=read_the_log)
    assert [r.state for r in made] == ["success"] * 3, made[-1].log[-3000:]
    spans = [(r.start_ms or 0, r.end_ms or 0) for r in made]
    assert all(0 < start <= end for start, end in spans), spans  # when each run began and ended (not its logical date)
    assert all(start >= read for (start, _), read in zip(spans[1:], read_at, strict=False)), (spans, read_at)
    dry, first, again = made
    assert dry.tasks["compaction_gate"] == "skipped" and dry.tasks["physical_deletion"] == "skipped"
    assert bases(harness, after[0]) == [0, 10, 20, 30, 40, 50]

    assert first.tasks["compact"] == "skipped"  # a delete-policy topic has nothing to compact
    # billing has consumed [0, 30): exactly those segments go, by consumed retention
    assert bases(harness, after[1]) == [30, 40, 50], first.log[-6000:]
    assert after[1].pending_deletes == ()  # file.delete.delay.ms = 0: deleted by the same run

    assert after[2].segments == after[1].segments  # a second run at the same now changes nothing
    assert again.tasks["publish_change"] == "skipped"


def test_invalid_parameters_fail_the_first_task_with_the_reason(harness: Harness) -> None:
    fill_events(harness)
    result = harness.run("page-views", T0_ISO, {"partitions": [7]})
    assert result.state == "failed"
    assert result.tasks["assess"] == "failed"
    assert result.tries["assess"] == 1  # failed at once: retrying cannot fix a parameter
    assert "partitions: 7 is not a partition of this topic (0..0)" in result.log
    assert bases(harness) == [0, 10, 20, 30, 40, 50]


def test_a_dag_run_past_its_timeout_fails_showing_where_its_threads_were(harness: Harness) -> None:
    """`run_dags` ends a child that outlives its timeout with SIGABRT (`process.end_showing_stacks`),
    on which the child prints every thread's stack, and its error carries them: killed, a hung run
    left only what it had printed so far. Three seconds in, the child is still loading Airflow."""
    request = DagRunRequest("lakecleaner__page-views", T0_ISO)
    with pytest.raises(RuntimeError, match=r"did not finish within 3 s") as failed:
        run_dags(harness.home, harness.config_path, [request], harness.env(None), timeout_s=3)
    shown = str(failed.value)
    assert "most recent call first" in shown, shown[-2000:]
    assert re.search(r'File "[^"]+\.py", line \d+ in ', shown), shown[-2000:]


def test_without_airflow_setup_the_first_task_fails_at_once_naming_the_command(harness: Harness) -> None:
    fill_events(harness)
    env = airflow_env(harness.home, harness.config_path)
    unset = subprocess.run(
        [sys.executable, "-m", "airflow", "variables", "delete", SETUP_VARIABLE], env=env, capture_output=True
    )
    assert unset.returncode == 0, unset.stderr[-2000:]
    try:
        result = harness.run("page-views", T0_ISO)
    finally:
        again = subprocess.run(
            [sys.executable, "-m", "lakecleaner.cli", "airflow", "setup"], env=env, capture_output=True, text=True
        )
        assert again.returncode == 0, again.stderr[-2000:]
    assert result.state == "failed"
    assert result.tasks["assess"] == "failed" and result.tries["assess"] == 1
    assert "run `lakecleaner airflow setup`" in result.log
    assert bases(harness) == [0, 10, 20, 30, 40, 50]  # nothing was done


def version(v: int) -> tuple[tuple[str, bytes], ...]:
    return (("version", v.to_bytes(8, "big", signed=True)),)


def fill_cdc(h: Harness) -> dict[int, dict[bytes, tuple[bytes | None, int]]]:
    """Two partitions of CDC records whose header versions disagree with their offsets (a late
    producer), plus deletes; all segments sealed. Returns, per partition, the expected winner of
    each key (value, version) under KIP-280's header strategy."""
    topic = h.lake.create_topic("customers-cdc")
    expected: dict[int, dict[bytes, tuple[bytes | None, int]]] = {}
    for p in range(2):
        log = topic.partition(p)
        batches = [
            [Record(b"c1", b"v3", T0 - 5 * HOUR, version(3)), Record(b"c2", b"v1", T0 - 5 * HOUR, version(1))],
            [Record(b"c1", b"v2-late", T0 - 4 * HOUR, version(2)), Record(b"c3", b"v1", T0 - 4 * HOUR, version(1))],
            [Record(b"c2", None, T0 - 3 * HOUR, version(2)), Record(b"c3", b"v5", T0 - 3 * HOUR, version(5))],
        ]
        for batch in batches:
            log.append(batch, now_ms=T0)
            log.roll(now_ms=T0)
        expected[p] = {b"c1": (b"v3", 3), b"c2": (None, 2), b"c3": (b"v5", 5)}
    return expected


def log_contents(h: Harness, partition: int) -> dict[bytes, tuple[bytes | None, int]]:
    return contents_of(h.lake.topic("customers-cdc").partition(partition).read())


def contents_of(table: pa.Table) -> dict[bytes, tuple[bytes | None, int]]:
    """Each key's value and header version in a compacted partition's records (`table`)."""
    out: dict[bytes, tuple[bytes | None, int]] = {}
    for row in table.to_pylist():
        header = row["headers"][-1]["value"]
        assert row["key"] not in out, f"key {row['key']!r} appears twice after compaction"
        out[row["key"]] = (row["value"], int.from_bytes(header, "big", signed=True))
    return out


def compaction_reports(h: Harness) -> list[dict[str, Any]]:
    """The run reports (report.json) of customers-cdc's compactions, in the order the store lists them."""
    runs = h.lake.store.list(runs_prefix("customers-cdc"))
    return [json.loads(h.lake.store.read(o.key)) for o in runs if o.key.endswith("/report.json")]


@pytest.mark.parametrize("harness", ["seaweedfs"], indirect=True)  # issue #15: a real object store
def test_compacted_topic_ends_with_exactly_the_winners(harness: Harness, connect_server: ConnectServer) -> None:
    """Given a `spark_connect` connection, the compact task runs the job as a client of the test
    session's Connect server (issue #18). The compact task's spark-submit (the `spark` connection)
    runs in the quality gate's test below, on moto's S3, and in test_wheel.py from the installed
    package."""
    env = {"AIRFLOW_CONN_SPARK_LAKECLEANER": json.dumps(connection_of_url(connect_server.url))}
    expected = fill_cdc(harness)
    topic = harness.lake.topic("customers-cdc")
    contents: list[dict[int, dict[bytes, tuple[bytes | None, int]]]] = []
    horizons: list[dict[int, list[int]]] = []

    def read_the_log() -> None:
        tables = {p: topic.partition(p).read() for p in range(2)}
        contents.append({p: contents_of(t) for p, t in tables.items()})
        tombstones = {p: t.filter(pc.is_null(pc.field("value"))) for p, t in tables.items()}
        horizons.append({p: t.column("delete_horizon_ms").to_pylist() for p, t in tombstones.items()})

    # A run, then one past the tombstones' horizon, in one process; the log is read after each.
    made = harness.runs(
        "customers-cdc", [(T0_ISO, {}), ("2026-03-01T02:00:00+00:00", {})], extra_env=env, between=read_the_log
    )
    assert [r.state for r in made] == ["success"] * 2, made[-1].log[-4000:]
    assert made[0].tasks["compact"] == "success" and made[0].tasks["publish_change"] == "success"
    assert contents[0] == expected
    assert horizons[0] == {0: [T0 + HOUR], 1: [T0 + HOUR]}  # stamped now + delete.retention.ms
    # Past the horizon: the tombstone goes.
    assert contents[1] == {p: {k: v for k, v in expected[p].items() if v[0] is not None} for p in range(2)}
    assert horizons[1] == {0: [], 1: []}
    # Each run's report task refreshed the topic's summary (issue 50): it names every manifest as it
    # is now, no marker says otherwise, and its newest run is the later run.
    summaries = SummaryStore(harness.lake.store, 8)
    summary = summaries.read("customers-cdc")
    manifests = harness.lake.topic("customers-cdc").manifests()
    assert summary is not None and {p: summary.version(p) for p in manifests} == {
        p: m.version for p, m in manifests.items()
    }
    assert "customers-cdc" not in summaries.pending()
    assert summary.runs[0].now_ms == int(datetime.fromisoformat("2026-03-01T02:00:00+00:00").timestamp() * 1000)
    assert [r["spark"] for r in compaction_reports(harness)] == ["connect"] * 2  # where each compaction ran


def test_quality_gate_failure_in_one_partition_leaves_the_others_committed(harness: Harness) -> None:
    """The failed run is the first of two asked of one process (`run_dags`), which stops there: the
    second is never made."""
    expected = fill_cdc(harness)
    before = harness.lake.topic("customers-cdc").partition(0).read()
    (result,) = harness.runs(
        "customers-cdc",
        [(T0_ISO, {}), ("2026-03-01T02:00:00+00:00", {})],
        extra_env={
            "LAKECLEANER_FAULT_HOOKS": (
                "engine.after_staging=tests.support.fault_hooks:tamper_partition_0_staged_output"
            ),
            "LAKECLEANER_TEST_TAMPER_TOPIC": "customers-cdc",
            "PYTHONPATH": str(REPO),
        },
    )
    assert result.state == "failed"
    assert result.tasks["compact"] == "failed"
    assert result.tasks["retention"] == "success" and result.tasks["report"] == "failed"
    assert "compaction of partition 0: failed-quality" in result.log
    assert harness.lake.topic("customers-cdc").partition(0).read().equals(before)
    assert log_contents(harness, 1) == expected[1]
    # The compact task spark-submitted the job to airflow_env's `spark` connection's master.
    (report,) = compaction_reports(harness)
    assert report["spark"] == "local[2]" and report["statuses"] == {"failed-quality": 1, "committed": 1}
