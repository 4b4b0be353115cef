"""The servers the project starts for a user listen on the loopback address unless asked otherwise
(issue #44): `make airflow-ui` and the Spark Connect server."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from lakecleaner.config import spark_loopback_env
from lakecleaner.engine.connect_server import ConnectServer
from lakecleaner.engine.session import worker_python_env

REPO = Path(__file__).resolve().parent.parent


def airflow_ui_recipe() -> str:
    """The commands `make airflow-ui` runs, as make prints them (nothing is run)."""
    done = subprocess.run(["make", "-n", "airflow-ui"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_make_airflow_ui_binds_every_component_to_the_loopback_address() -> None:
    """Airflow's standalone mode binds its API server and the scheduler's and triggerer's log
    servers to every address (8080, 8793, 8794); the target starts the components itself: the API
    server on 127.0.0.1, the others without log servers (checked by hand: only 127.0.0.1:8080
    listens, and SIGTERM leaves no Airflow process)."""
    recipe = airflow_ui_recipe()
    assert "standalone" not in recipe
    assert "airflow api-server --host 127.0.0.1" in recipe and "AIRFLOW__API__HOST=127.0.0.1" in recipe
    for component in ("scheduler", "triggerer"):
        assert re.search(rf"airflow {component} --skip-serve-logs", recipe), component
    assert 'trap "trap - INT TERM EXIT; kill 0" INT TERM EXIT' in recipe  # Ctrl-C / SIGTERM stops every child


@pytest.mark.parametrize(("host", "local_ip"), [("127.0.0.1", "127.0.0.1"), ("0.0.0.0", None)])
def test_a_connect_server_on_loopback_keeps_its_driver_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, host: str, local_ip: str | None
) -> None:
    monkeypatch.delenv("SPARK_LOCAL_IP", raising=False)
    assert ConnectServer(tmp_path, host=host).environment().get("SPARK_LOCAL_IP") == local_ip
    monkeypatch.setenv("SPARK_LOCAL_IP", "10.1.2.3")  # the user's own choice wins
    assert ConnectServer(tmp_path, host=host).environment()["SPARK_LOCAL_IP"] == "10.1.2.3"


@pytest.mark.parametrize(
    ("master", "environ", "expected"),
    [
        ("local[*]", {}, {"SPARK_LOCAL_IP": "127.0.0.1"}),
        ("local", {}, {"SPARK_LOCAL_IP": "127.0.0.1"}),
        ("local[2]", {"SPARK_LOCAL_IP": "10.0.0.5"}, {}),  # the user's choice stands
        ("spark://10.0.0.1:7077", {}, {}),  # a cluster's driver must be reachable from its executors
        ("yarn", {}, {}),
    ],
)
def test_a_local_spark_driver_stays_on_the_loopback_address(
    master: str, environ: dict[str, str], expected: dict[str, str]
) -> None:
    """Issue #51: a local run warned "Your hostname … resolves to a loopback address … using
    192.0.2.2 instead" and listened on that interface."""
    assert spark_loopback_env(master, environ) == expected


@pytest.mark.parametrize(
    ("master", "environ", "expected"),
    [
        ("local[*]", {}, {"PYSPARK_PYTHON": sys.executable}),
        ("local", {"PYSPARK_PYTHON": "/opt/py/bin/python"}, {}),  # the user's choice stands
        ("local[2]", {"PYSPARK_GATEWAY_PORT": "4321"}, {}),  # spark-submit's environment is the caller's
        ("spark://10.0.0.1:7077", {}, {}),  # a cluster's workers get the package zip
    ],
)
def test_a_local_sessions_python_workers_run_the_drivers_interpreter(
    master: str, environ: dict[str, str], expected: dict[str, str]
) -> None:
    """Issue 78: `lakecleaner compact` from a virtualenv without PYSPARK_PYTHON failed in every
    task with "No module named 'lakecleaner'" (pyspark starts `python3` from the PATH)."""
    assert worker_python_env(master, environ) == expected
