"""lakecleaner on a Spark Connect server (`lakecleaner connect-server`): the CLI as a thin client,
and the shared server session every run joins. The engine tests themselves also run on Connect
as a whole (LAKECLEANER_TEST_SPARK=connect, `make test`); these tests need a classic session in
the test process, as each client here runs in a process of its own (a Connect session switches
pyspark into remote mode for its whole process)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark import SparkConf

from lakecleaner.clock import wall_clock_ms
from lakecleaner.config import SparkSettings, parse_config
from lakecleaner.dev.ports import free_port
from lakecleaner.engine.connect_server import ConnectServer
from lakecleaner.engine.session import session_conf
from lakecleaner.engine.workers import WORKER_ENV, worker_conf
from lakecleaner.lake import Lake
from lakecleaner.workload import WorkloadSpec, generate
from tests.engine.helpers import WORKER_ENV_PROBE, rows
from tests.support.spark import TEST_SPARK_CONF

pytestmark = pytest.mark.classic_only


def _topic(root: Path, name: str, seed: int) -> int:
    """A one-partition compacted topic of 500 keys and 4,000 records, rolled; the now to compact it at."""
    spec = WorkloadSpec(keys=500, records=4_000, partitions=1, value_size=8, seed=seed)
    topic = Lake.open(f"file://{root}").create_topic(name, partitions=1, config={"cleanup.policy": "compact"})
    for partition, batch in generate(spec, 1_000):
        topic.partition(partition).append(batch, now_ms=spec.start_ms)
    topic.partition(0).roll(now_ms=spec.start_ms)
    return spec.start_ms + spec.timestamp_spread_ms + 1


def _compact(server: ConnectServer, root: Path, topic: str, now: int) -> dict[str, object]:
    command = [sys.executable, "-m", "lakecleaner.cli", "--lake", f"file://{root}", "--json", "compact"]
    command += ["--topic", topic, "--now", str(now), "--remote", server.url]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, object] = json.loads(done.stdout)
    return report


def test_the_cli_compacts_through_a_connect_server(connect_server: ConnectServer, tmp_path: Path) -> None:
    """`lakecleaner compact --remote sc://…` sends the run to the server: no Spark application of
    its own, the same report."""
    report = _compact(connect_server, tmp_path, "changes", _topic(tmp_path, "changes", seed=6))
    partitions = report["partitions"]
    assert isinstance(partitions, list)
    assert [p["status"] for p in partitions] == ["committed"]
    assert partitions[0]["stats"]["records_written"] == 500
    assert len(rows(Lake.open(f"file://{tmp_path}").topic("changes"))) == 500


def test_a_connect_client_runs_as_many_tasks_at_once_as_the_server_has_cores(tmp_path: Path) -> None:
    """A client's parallelism is the server's (here one core more than this machine has), not the
    client machine's cores, though the server sets no spark.default.parallelism: the client reads
    it from the server's plan of a range (`_planned_splits`), and the small job that stands in
    should the plan not say (`_ranges_partitions`) finds the same."""
    cores = (os.cpu_count() or 1) + 1
    conf = {k: v for k, v in TEST_SPARK_CONF.items() if k != "spark.default.parallelism"}
    server = ConnectServer(tmp_path / "server", port=free_port(), master=f"local[{cores}]", conf=conf)
    server.start()
    script = """
import sys
from lakecleaner.engine.session import connect_session
from lakecleaner.engine.sparkio import _planned_splits, _ranges_partitions, parallelism
session = connect_session(sys.argv[1])
found = parallelism(session), _planned_splits(session), _ranges_partitions(session)
print(session.conf.get("spark.default.parallelism", None), *found)
"""
    try:
        done = subprocess.run([sys.executable, "-c", script, server.url], capture_output=True, text=True, timeout=300)
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["None"] + [str(cores)] * 3


@pytest.mark.parametrize("where", ["connect", "local[1]"])
def test_the_engines_python_workers_get_its_environment(connect_server: ConnectServer, where: str) -> None:
    """The Python workers that run the engine's tasks have `WORKER_ENV` (Arrow's allocator keeps
    what a task frees for a second), both on lakecleaner's Spark Connect server and in a classic
    session lakecleaner builds; the environment of the process that runs the tests has none of it."""
    assert not set(WORKER_ENV) & set(os.environ)
    target = connect_server.url if where == "connect" else where
    command = [sys.executable, "-c", WORKER_ENV_PROBE, target]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == WORKER_ENV


def test_spark_submits_conf_and_the_configs_override_the_engines_worker_settings() -> None:
    """What spark-submit set (an Airflow connection's --conf) and a lake config's spark.conf win
    over the engine's settings for its workers; otherwise the session gets them."""
    key = f"spark.executorEnv.{next(iter(WORKER_ENV))}"
    nothing_submitted = SparkConf(loadDefaults=False)
    assert session_conf(SparkSettings(), nothing_submitted, starts_jvm=False) == worker_conf()
    submitted = SparkConf(loadDefaults=False).set(key, "20")
    others = {k: v for k, v in worker_conf().items() if k != key}
    assert session_conf(SparkSettings(), submitted, starts_jvm=False) == others  # the session keeps spark-submit's
    settings = SparkSettings(conf={key: "10", "spark.ui.enabled": "false"})
    assert session_conf(settings, submitted, starts_jvm=False) == {**others, key: "10", "spark.ui.enabled": "false"}


def _python_daemons(server: ConnectServer) -> list[str]:
    """The command lines of the server's Python worker daemons (its child processes)."""
    (pid_file,) = (server.folder / "pid").glob("*.pid")
    server_pid = pid_file.read_text().strip()
    daemons = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = stat.read_text().rsplit(")", 1)[1].split()[1]
            command = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, IndexError):
            continue  # the process ended meanwhile
        if parent == server_pid and "daemon" in command:
            daemons.append(command)
    return daemons


def test_runs_share_one_server_session_and_its_preloaded_python_daemon(
    connect_server: ConnectServer, tmp_path: Path
) -> None:
    """Every run joins lakecleaner's shared server session, so the server starts one Python
    worker daemon for all of them (Spark starts one per session and never stops it), and that
    daemon is lakecleaner's, which loads Great Expectations before it forks workers."""
    for name, seed in (("first", 1), ("second", 2), ("third", 3)):
        report = _compact(connect_server, tmp_path, name, _topic(tmp_path, name, seed))
        assert [p["status"] for p in report["partitions"]] == ["committed"]  # type: ignore[union-attr]
    daemons = _python_daemons(connect_server)
    assert len(daemons) == 1, daemons
    assert "lakecleaner.engine.worker_daemon" in daemons[0]


def test_a_client_moves_past_a_closed_shared_session(connect_server: ConnectServer) -> None:
    """When the server has closed the shared session (Spark never reopens a closed session's id),
    the next client joins the next generation of it instead of failing. (Last in the module: it
    closes generation 0 of the test server's shared session.)"""
    script = """
import sys
from pyspark.sql import SparkSession
from lakecleaner.engine.session import connect_session, shared_session_id
url = sys.argv[1]
closing = SparkSession.builder.remote(f"{url}/;session_id={shared_session_id(0)}").create()
assert closing.range(1).count() == 1  # the server knows generation 0 (it may be the first use of it)
closing.stop()  # releases (closes) generation 0 on the server
session = connect_session(url)
assert session.client._session_id == shared_session_id(1), session.client._session_id
assert session.range(5).count() == 5
print("ok")
"""
    command = [sys.executable, "-c", script, connect_server.url]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


def test_the_demo_runs_its_dags_with_the_compact_tasks_on_a_connect_server(
    connect_server: ConnectServer, tmp_path: Path
) -> None:
    """`lakecleaner demo --spark-remote sc://…`: the Airflow connection spark_lakecleaner becomes a
    spark_connect one, and every DAG run's compact task is a client of the server (no
    spark-submit), and the runs succeed."""
    command = [sys.executable, "-m", "lakecleaner.cli", "--lake", f"file://{tmp_path / 'lake'}", "demo"]
    command += ["--records", "20000", "--airflow-home", str(tmp_path / "airflow"), "--spark-remote", connect_server.url]
    began_ms = wall_clock_ms()
    environ = {**os.environ, "AIRFLOW_UI_PORT": "8123"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=1200, cwd=tmp_path, env=environ)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    ended_ms = wall_clock_ms()
    reports = [json.loads(p.read_text()) for p in (tmp_path / "lake" / "_lakecleaner" / "runs").rglob("report.json")]
    assert len(reports) >= 2, "the compact tasks ran no compaction"
    assert {r["spark"] for r in reports} == {"connect"}
    assert not any(r["failed"] for r in reports)
    # Issue #20: outside the segment files, nothing the demo writes (run reports, quality results,
    # the HTML report, cleaner state, Airflow's database and task logs) holds a record's key or value
    lake = Lake.open(parse_config({"lake": {"uri": f"file://{tmp_path / 'lake'}"}}))
    record = next(r for r in lake.topic("customers-cdc").partition(0).read().to_pylist() if r["value"])
    written = [  # a segment file's key index (`log.key_index`) holds its keys, and leaves with it
        p for p in tmp_path.rglob("*") if p.is_file() and p.suffix != ".parquet" and ".parquet.keys-" not in p.name
    ]
    assert any(p.name == "report.html" for p in written) and any(p.name == "run.json" for p in written)
    holding = [str(p) for p in written if record["key"] in p.read_bytes() or record["value"] in p.read_bytes()]
    assert holding == []
    printed = (done.stdout + done.stderr).encode()  # the DAG runs' task logs go to the demo's output
    assert record["key"] not in printed and record["value"] not in printed
    # Issue 51: the report has the history charts, each run's reports and DAG run linked, segments
    # replaced and deleted counted apart, and neither it nor the console shows a Python repr or None
    page = (tmp_path / "lake" / "_lakecleaner" / "report.html").read_text()
    assert page.count('data-chart="log size"') == 2 and 'data-chart="run duration and outcome"' in page
    assert "href='runs/customers-cdc/" in page and "/run.json'" in page and "DAG run in Airflow" in page
    assert "segments replaced by compaction" in page and "segments deleted by retention" in page
    assert "None" not in page and "produced 20,000 records to customers-cdc" in done.stderr
    assert "produced {" not in done.stdout + done.stderr
    # Issue 78: each run took what its tasks took (never a logical date's difference); the charts
    # end with what the last run left, at times that have passed; links go to the Airflow UI's port
    took = [int(t.replace(",", "")) for t in re.findall(r"<span class='took'>([\d,]+) s</span>", page)]
    assert len(took) == 4 and all(0 <= t <= (ended_ms - began_ms) / 1000 for t in took), took
    assert "href='http://127.0.0.1:8123/dags/lakecleaner__customers-cdc/runs/" in page and "localhost" not in page
    sizes = re.search(r'data-chart="log size".*?</svg>', page, re.S)
    assert sizes is not None
    circles = [(int(t), float(v)) for t, v in re.findall(r'data-time-ms="(\d+)" data-value="([^"]+)"', sizes.group(0))]
    left = sum(log.manifest().size_bytes for log in lake.topic("customers-cdc").partition_logs())
    assert len(circles) == 4 and circles[-1][1] == left and all(t <= ended_ms for t, _ in circles)
    deadlines = re.search(r'data-chart="hours left to the nearest deletion deadline".*?</svg>', page, re.S)
    assert deadlines is not None
    labels = re.findall(
        r'data-value="([^"]+)"[^>]*><title>[^<]*(before|after) the run: ([^:<]+)</title>', deadlines.group(0)
    )
    for value, _, label in labels:
        assert label == ("ok" if float(value) >= 0 else f"overdue by {-float(value):,.1f} h"), (value, label)
    overdue_after = any(phase == "after" and float(value) < 0 for value, phase, _ in labels)
    said = "Still overdue after a run" if overdue_after else "After each run, no deletion deadline was overdue."
    assert said in page and said in done.stdout  # why a deadline was overdue, or that none is
