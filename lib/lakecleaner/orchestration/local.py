"""Run a lakecleaner DAG in real Airflow on this machine (SQLite metadata DB, `dag.test()`).

Used by the main job (`make demo`) and the end-to-end tests. Each run is its own process,
because Airflow keeps global state (configuration, ORM sessions) per process:

    python -m lakecleaner.orchestration.local <config.yaml> <dag_id> <logical date ISO> '<conf JSON>'

prints `RESULT {"state": ..., "tasks": {task_id: state}, "tries": {task_id: try number}}` as its
last line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from lakecleaner.orchestration.dags import build_dags, dags_folder
from lakecleaner.orchestration.sqlite import SQLITE_CONNECT_ARGS, use_write_ahead_log

RESULT_PREFIX = "RESULT "


@dataclass(frozen=True)
class DagRunResult:
    """The end of one DAG run: its state, each task's state and try number, and the run's output."""

    state: str
    tasks: Mapping[str, str]
    log: str
    # task_id -> the task instance's try number: 1 when it ran once (no retry), n after n - 1
    # retries, 0 when it never ran (e.g. upstream_failed).
    tries: Mapping[str, int]


def airflow_env(airflow_home: Path, config_path: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a local Airflow: its home, the installed package's DAG folder, the config,
    a SQLite lock timeout a busy Airflow does not run into and as long a wait for a task's calls to
    the API server (`orchestration/sqlite.py`), and a local Spark master for the `spark_lakecleaner`
    connection unless one is set."""
    return {
        **os.environ,
        "AIRFLOW_HOME": str(airflow_home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder()),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(airflow_home / "plugins"),  # the plugin comes by its entry point
        "LAKECLEANER_CONFIG": str(config_path),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS": "lakecleaner.orchestration.sqlite.SQLITE_CONNECT_ARGS",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS_ASYNC": "lakecleaner.orchestration.sqlite.SQLITE_CONNECT_ARGS",
        "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": str(SQLITE_CONNECT_ARGS["timeout"]),
        "AIRFLOW_CONN_SPARK_LAKECLEANER": os.environ.get(
            "AIRFLOW_CONN_SPARK_LAKECLEANER", json.dumps({"conn_type": "spark", "host": "local[2]"})
        ),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        **(extra or {}),
    }


def prepare_airflow(airflow_home: Path, config_path: Path, env: Mapping[str, str] | None = None) -> None:
    """Create (or upgrade) the metadata database and set Airflow up for the DAGs (`airflow db
    migrate`, then `lakecleaner airflow setup`), in the environment `airflow_env` gives plus `env`;
    the home's SQLite database is put in WAL mode (`orchestration/sqlite.py`)."""
    environment = airflow_env(airflow_home, config_path, env)

    def run(*command: str) -> None:
        done = subprocess.run(
            [sys.executable, "-m", *command], env=environment, capture_output=True, text=True, timeout=600
        )
        if done.returncode != 0:
            raise RuntimeError(f"`{' '.join(command)}` failed:\n{(done.stdout + done.stderr)[-3000:]}")

    run("airflow", "db", "migrate")
    use_write_ahead_log(airflow_home / "airflow.db")
    run("lakecleaner.cli", "airflow", "setup")


def run_dag(
    airflow_home: Path,
    config_path: Path,
    dag_id: str,
    logical_date: str,
    conf: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    timeout_s: int = 1800,
) -> DagRunResult:
    """Run one DAG run to completion with dag.test() in a child process."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "lakecleaner.orchestration.local",
            str(config_path),
            dag_id,
            logical_date,
            json.dumps(dict(conf or {})),
        ],
        env=airflow_env(airflow_home, config_path, env),
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    log = proc.stdout + proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    if not lines:
        raise RuntimeError(f"the DAG run {dag_id} @ {logical_date} did not finish:\n{log[-4000:]}")
    result = json.loads(lines[-1][len(RESULT_PREFIX) :])
    return DagRunResult(result["state"], result["tasks"], log, result["tries"])


def main() -> None:
    config_path, dag_id, when, conf = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    dag = build_dags(config_path)[dag_id]
    run = dag.test(logical_date=datetime.fromisoformat(when), run_conf=conf)
    instances = run.get_task_instances()
    states = {ti.task_id: str(ti.state) for ti in instances}
    tries = {ti.task_id: int(ti.try_number) for ti in instances}
    print(RESULT_PREFIX + json.dumps({"state": str(run.state), "tasks": states, "tries": tries}))


if __name__ == "__main__":
    main()
