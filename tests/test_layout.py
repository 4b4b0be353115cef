"""The repository has its design card's top level (issue #46): `dags/`, `plugins/`, `spark_jobs/`
and `config/lakecleaner.yaml`, each thin over the package, working from a checkout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.resources import files
from pathlib import Path

from lakecleaner.config import ENVIRONMENT_VARIABLES, load_config
from tests.test_dags import PROBE

REPO = Path(__file__).resolve().parent.parent


def _airflow_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ENVIRONMENT_VARIABLES}
    return {
        **env,
        "AIRFLOW_HOME": str(tmp_path / "airflow"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "True",
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
    }


def test_the_checkouts_dag_folder_builds_every_topic_of_config_lakecleaner_yaml(tmp_path: Path) -> None:
    """`DagBag("dags/")` with no LAKECLEANER_CONFIG: the DAG file reads config/lakecleaner.yaml, and
    parsing touches no lake (the URI points where nothing may be created)."""
    missing_lake = tmp_path / "must-not-be-created"
    env = {**_airflow_env(tmp_path), "LAKECLEANER_LAKE_URI": f"file://{missing_lake}"}
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    proc = subprocess.run(
        [sys.executable, str(script), str(REPO / "dags")], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    topics = load_config(REPO / "config" / "lakecleaner.yaml").topics
    assert result["errors"] == {}
    assert set(result["dags"]) == {f"lakecleaner__{t}" for t in topics} and topics
    assert not missing_lake.exists()


def test_the_packaged_sample_config_is_the_top_level_one() -> None:
    packaged = files("lakecleaner").joinpath("samples", "lakecleaner.yaml").read_bytes()
    assert packaged == (REPO / "config" / "lakecleaner.yaml").read_bytes()


PLUGINS_PROBE = """
import json
from airflow import plugins_manager
info = plugins_manager.get_plugin_info()
print(json.dumps({"names": [p["name"] for p in info], "errors": plugins_manager.get_import_errors()}))
"""


def test_a_checkouts_airflow_loads_the_plugin_once_with_the_plugins_folder_set(tmp_path: Path) -> None:
    """The package is installed here (its entry point registers the plugin) and Airflow's plugins
    folder is the checkout's plugins/: the plugin loads exactly once, with no import error (a plugin
    both in the folder and in the entry point is one)."""
    proc = subprocess.run(
        [sys.executable, "-c", PLUGINS_PROBE], env=_airflow_env(tmp_path), capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["errors"] == {} and result["names"].count("lakecleaner") == 1


def test_the_checkouts_spark_job_is_the_packaged_one() -> None:
    """`spark-submit spark_jobs/compact_topic.py` runs the packaged application's main: its usage."""
    proc = subprocess.run(
        [sys.executable, str(REPO / "spark_jobs" / "compact_topic.py"), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO / "spark_jobs",
    )
    assert proc.returncode == 0 and "--topic" in proc.stdout and "--partitions" in proc.stdout


def test_the_package_says_its_version_as_its_distribution_does() -> None:
    """`lakecleaner.__version__` and `lakecleaner --version` are the installed distribution's version."""
    from importlib.metadata import version

    import lakecleaner
    from tests.support.cli_process import run_cli

    assert lakecleaner.__version__ == version("lakecleaner") != "0+unknown"
    shown = run_cli("--version")
    assert shown.returncode == 0 and shown.stdout.strip() == f"lakecleaner {version('lakecleaner')}"
