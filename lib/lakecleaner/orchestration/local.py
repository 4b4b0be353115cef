"""Run a lakecleaner DAG in real Airflow on this machine (SQLite metadata DB, `dag.test()`).

Used by the main job (`make demo`) and the end-to-end tests. The runs are made in a child
process, because Airflow keeps global state (configuration, ORM sessions) per process; one child
makes several runs of one Airflow home one after another (`run_dags`):

    python -m lakecleaner.orchestration.local <config.yaml> '[{"dag_id": …, "logical_date": …, "conf": {…}}, …]'

prints `RESULT {"state": ..., "tasks": {task_id: state}, "tries": {task_id: try number}}` after
each run, and stops after a run that did not succeed. Before each run after the first it waits for
a line on its standard input (`GO_ON`), and ends at the end of its input: the parent says go on
once it has heard of the run before (`run_dags`' `on_result`), so a caller may look at the lake
between runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from lakecleaner.clock import epoch_ms, wall_clock_ms
from lakecleaner.config import load_config
from lakecleaner.errors import ConfigError
from lakecleaner.orchestration.dag_files import DEFAULT_DAG_FILES, auto_count, write_dag_files
from lakecleaner.orchestration.dags import build_dags
from lakecleaner.orchestration.sqlite import SQLITE_CONNECT_ARGS, use_write_ahead_log
from lakecleaner.process import SHOWS_STACKS, end_showing_stacks

RESULT_PREFIX = "RESULT "
#: What `run_dags` writes to the child once it has heard of a run, for the next to begin.
GO_ON = "go on\n"
#: Characters of a failed child's output's end that `run_dags` shows: room for a hung child's
#: threads' stacks (faulthandler prints the main thread's last).
OUTPUT_SHOWN_CHARS = 12_000


@dataclass(frozen=True)
class DagRunResult:
    """The end of one DAG run: its state, each task's state and try number, the run's output, its
    Airflow run id, and when it began and ended (epoch ms): `start_ms` is when the child began it,
    since `dag.test()` stamps a run's start date with its logical date."""

    state: str
    tasks: Mapping[str, str]
    log: str
    # task_id -> the task instance's try number: 1 when it ran once (no retry), n after n - 1
    # retries, 0 when it never ran (e.g. upstream_failed).
    tries: Mapping[str, int]
    run_id: str = ""
    start_ms: int | None = None
    end_ms: int | None = None


#: The `spark_lakecleaner` connection of a local Airflow: Spark in the task's process.
LOCAL_SPARK = json.dumps({"conn_type": "spark", "host": "local[2]"})


def airflow_env(airflow_home: Path, config_path: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a local Airflow: the process's, with `lakecleaner_airflow_env`'s and `extra`."""
    return {**os.environ, **lakecleaner_airflow_env(airflow_home, config_path), **(extra or {})}


def home_dags(airflow_home: Path) -> Path:
    """A local Airflow's DAG folder: `dags/` in its home, as Airflow's own default."""
    return airflow_home / "dags"


def lakecleaner_airflow_env(airflow_home: Path, config_path: Path, dags: Path | None = None) -> dict[str, str]:
    """What a local Airflow needs set for the topics' DAGs: its home, the DAG folder (`dags`, else
    `home_dags`), the config, a SQLite lock timeout a busy Airflow does not run into and as long a wait
    for a task's calls to the API server (`orchestration/sqlite.py`), and a local Spark master for
    the `spark_lakecleaner` connection unless the environment has one (`lakecleaner airflow env`
    prints these)."""
    spark = {} if "AIRFLOW_CONN_SPARK_LAKECLEANER" in os.environ else {"AIRFLOW_CONN_SPARK_LAKECLEANER": LOCAL_SPARK}
    return {
        "AIRFLOW_HOME": str(airflow_home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags or home_dags(airflow_home)),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(airflow_home / "plugins"),  # the plugin comes by its entry point
        "LAKECLEANER_CONFIG": str(config_path),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS": "lakecleaner.orchestration.sqlite.SQLITE_CONNECT_ARGS",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS_ASYNC": "lakecleaner.orchestration.sqlite.SQLITE_CONNECT_ARGS",
        "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": str(SQLITE_CONNECT_ARGS["timeout"]),
        **spark,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }


def prepare_airflow(airflow_home: Path, config_path: Path, env: Mapping[str, str] | None = None) -> None:
    """Create (or upgrade) the metadata database and set Airflow up for the DAGs (`airflow db
    migrate`, then `lakecleaner airflow setup`), in the environment `airflow_env` gives plus `env`;
    the home's SQLite database is put in WAL mode (`orchestration/sqlite.py`). The DAG files are
    written into `home_dags`, as many as the config's topics want (`auto_count`)."""
    environment = airflow_env(airflow_home, config_path, env)
    write_dag_files(home_dags(airflow_home), dag_file_count(config_path))

    def run(*command: str) -> None:
        done = subprocess.run(
            [sys.executable, "-m", *command], env=environment, capture_output=True, text=True, timeout=600
        )
        if done.returncode != 0:
            raise RuntimeError(f"`{' '.join(command)}` failed:\n{(done.stdout + done.stderr)[-3000:]}")

    run("airflow", "db", "migrate")
    use_write_ahead_log(airflow_home / "airflow.db")
    run("lakecleaner.cli", "airflow", "setup")


def dag_file_count(config_path: Path) -> int:
    """How many DAG files the config's topics want (`auto_count`); DEFAULT_DAG_FILES when the
    config cannot be read, whose files then show Airflow the config's error."""
    try:
        return auto_count(len(load_config(str(config_path)).topics))
    except ConfigError:
        return DEFAULT_DAG_FILES


@dataclass(frozen=True)
class DagRunRequest:
    """One DAG run to make: the DAG, its logical date (ISO) and its conf."""

    dag_id: str
    logical_date: str
    conf: Mapping[str, Any] = field(default_factory=dict)


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
    request = DagRunRequest(dag_id, logical_date, dict(conf or {}))
    return run_dags(airflow_home, config_path, [request], env, timeout_s)[0]


def run_dags(
    airflow_home: Path,
    config_path: Path,
    requests: Sequence[DagRunRequest],
    env: Mapping[str, str] | None = None,
    timeout_s: int = 1800,
    on_result: Callable[[DagRunRequest, DagRunResult], None] | None = None,
) -> list[DagRunResult]:
    """Run DAG runs one after another with dag.test() in one child process, which loads Airflow,
    the DAGs and what their tasks import (Great Expectations: seconds) once, not once per run. The
    child stops after the first run that does not succeed; `on_result` hears of each run as it
    ends, before the next begins (the child waits for it: a caller may look at the lake in
    between, and what `on_result` raises ends the child and is raised here). Returns the results
    of the runs made, each with its own part of the child's output; raises RuntimeError, with the
    output's end, when the child ends in the middle of a run, or when `timeout_s` (for all the
    runs) passes: then the child is ended showing every thread's stack
    (`process.end_showing_stacks`), which the output's end holds."""
    payload = json.dumps([{"dag_id": r.dag_id, "logical_date": r.logical_date, "conf": dict(r.conf)} for r in requests])
    command = [sys.executable, "-m", "lakecleaner.orchestration.local", str(config_path), payload]
    results: list[DagRunResult] = []
    output: list[str] = []
    with subprocess.Popen(
        command,
        env={**airflow_env(airflow_home, config_path, env), **SHOWS_STACKS},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as child:
        late = threading.Event()

        def end_late() -> None:
            late.set()
            end_showing_stacks(child)

        timer = threading.Timer(timeout_s, end_late)
        timer.start()
        try:
            assert child.stdin is not None and child.stdout is not None
            for line in child.stdout:
                if not line.startswith(RESULT_PREFIX):
                    output.append(line)
                    continue
                found = json.loads(line[len(RESULT_PREFIX) :])
                results.append(
                    DagRunResult(
                        found["state"],
                        found["tasks"],
                        "".join(output),
                        found["tries"],
                        found["run_id"],
                        found["start_ms"],
                        found["end_ms"],
                    )
                )
                output.clear()
                if on_result is not None:
                    on_result(requests[len(results) - 1], results[-1])
                _go_on(child.stdin)
            child.wait()
        finally:
            timer.cancel()
            if child.poll() is None:
                child.kill()
    stopped = bool(results) and results[-1].state != "success"
    if len(results) < len(requests) and not stopped:
        unfinished = requests[len(results)]
        why = f" within {timeout_s} s (where its threads were is at the end)" if late.is_set() else ""
        raise RuntimeError(
            f"the DAG run {unfinished.dag_id} @ {unfinished.logical_date} did not finish{why}:\n"
            f"{''.join(output)[-OUTPUT_SHOWN_CHARS:]}"
        )
    return results


def _go_on(stdin: IO[str]) -> None:
    """Tell the child to begin its next run; a child that has ended (after its last run, or a
    failed one) has nothing to hear."""
    with contextlib.suppress(BrokenPipeError):
        stdin.write(GO_ON)
        stdin.flush()


def _ms(when: datetime | None) -> int | None:
    return None if when is None else epoch_ms(when)


def main() -> None:
    config_path, requests = sys.argv[1], json.loads(sys.argv[2])
    for index, request in enumerate(requests):
        if index and sys.stdin.readline() != GO_ON:
            return  # the parent stopped listening
        # Built for each run: dag.test() runs the tasks in this process, and a run's conf merged
        # into its tasks' params would stay there for the next run (a dry run's dry_run, say).
        dags = build_dags(config_path)
        began_ms = wall_clock_ms()
        run = dags[request["dag_id"]].test(
            logical_date=datetime.fromisoformat(request["logical_date"]), run_conf=request["conf"]
        )
        instances = run.get_task_instances()
        states = {ti.task_id: str(ti.state) for ti in instances}
        tries = {ti.task_id: int(ti.try_number) for ti in instances}
        found = {"state": str(run.state), "tasks": states, "tries": tries, "run_id": run.run_id}
        found |= {"start_ms": began_ms, "end_ms": _ms(run.end_date)}
        result = RESULT_PREFIX + json.dumps(found)
        sys.stdout.write(result + "\n")
        sys.stdout.flush()
        if str(run.state) != "success":
            return


if __name__ == "__main__":
    main()
