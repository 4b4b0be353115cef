"""The DAG files import the way Airflow's DagBag imports them: no errors, no storage I/O."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lakecleaner.orchestration.dags import dags_folder
from tests.conftest import write_sample

PROBE = """
import json, os, sys
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])  # default safe mode, as the dag processor
dags = {}
for dag_id, dag in bag.dags.items():
    dags[dag_id] = {
        "tasks": sorted(t.task_id for t in dag.tasks),
        "max_active_runs": dag.max_active_runs,
        "params": sorted(dag.params.keys()),
        "tags": sorted(dag.tags),
        "doc": bool(dag.doc_md),
        "compact_pool": dag.get_task("compact").pool,
    }
print(json.dumps({"errors": {k: str(v) for k, v in bag.import_errors.items()}, "dags": dags}))
"""


def test_every_dag_imports_without_errors_and_without_touching_the_lake(tmp_path: Path) -> None:
    missing_lake = tmp_path / "must-not-be-created"
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(tmp_path / "airflow"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "True",
        "LAKECLEANER_LAKE_URI": f"file://{missing_lake}",
        "LAKECLEANER_CONFIG": str(write_sample(tmp_path)),
    }
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    proc = subprocess.run(
        [sys.executable, str(script), str(dags_folder())],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["errors"] == {}
    assert set(result["dags"]) == {"lakecleaner__customers-cdc", "lakecleaner__page-views"}
    for dag in result["dags"].values():
        assert dag["tasks"] == [
            "assess",
            "compact",
            "compaction_gate",
            "physical_deletion",
            "publish_change",
            "report",
            "retention",
        ]
        assert dag["max_active_runs"] == 1
        assert dag["params"] == ["dry_run", "force", "partitions"]
        assert "lakecleaner" in dag["tags"] and dag["doc"]
        assert dag["compact_pool"] == "lakecleaner_spark"  # the config file's airflow.pool (its default)
    assert not missing_lake.exists()


BROKEN_PROBE = """
import json, sys
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])
dags = {d: {"tasks": sorted(t.task_id for t in dag.tasks), "tags": sorted(dag.tags)} for d, dag in bag.dags.items()}
print(json.dumps({"errors": {k: str(v) for k, v in bag.import_errors.items()}, "dags": dags}))
"""


def test_a_topic_airflow_rejects_is_an_import_error_naming_it_and_the_others_keep_their_dags(tmp_path: Path) -> None:
    """Issue #14: a legal 249-character topic name (longer than Airflow's DAG ids allow after the
    prefix) gets a stable shortened id; topics with a schedule Airflow rejects are the DAG file's
    import error in Airflow's DagBag, naming each of them and the config file; no other topic's
    DAG is lost."""
    from lakecleaner.orchestration.naming import dag_id_of

    long_name = "t" * 249
    config = tmp_path / "lakecleaner.yaml"
    config.write_text(
        "lake: {uri: 'file://" + str(tmp_path / "lake") + "'}\n"
        "topics:\n"
        f"  {long_name}: {{config: {{cleanup.policy: compact}}}}\n"
        "  bad-schedule: {schedule: 'every blue moon'}\n"
        "  worse-schedule: {schedule: '61 * * * *'}\n"
        "  fine: {}\n"
    )
    script = tmp_path / "probe.py"
    script.write_text(BROKEN_PROBE)
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "airflow"), "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    env.update(AIRFLOW__CORE__UNIT_TEST_MODE="True", LAKECLEANER_CONFIG=str(config))
    proc = subprocess.run(
        [sys.executable, str(script), str(dags_folder())], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    (error,) = result["errors"].values()
    assert "the DAGs of 2 topic(s) could not be built" in error and f"fix them in {config}" in error
    assert "topic bad-schedule: AirflowTimetableInvalid" in error and "topic worse-schedule: " in error
    long_id = dag_id_of(long_name)
    assert len(long_id) == 250 and long_id == dag_id_of(long_name)  # stable
    assert set(result["dags"]) == {long_id, "lakecleaner__fine"}
    assert "compact" in result["dags"][long_id]["tasks"] and "compact" in result["dags"]["lakecleaner__fine"]["tasks"]


def test_a_spark_connect_connection_gives_the_providers_url_and_back() -> None:
    """A `spark_connect` connection becomes the URL the Spark provider's SparkConnectHook builds
    (host, port, user id, token, use_ssl), and the demo's --spark-remote goes the other way."""
    from lakecleaner.orchestration.compact_task import connect_url_from_connection, connection_of_url

    assert connect_url_from_connection("spark-connect", 15002, None, None, {}) == "sc://spark-connect:15002/"
    url = connect_url_from_connection("sc://h", 1, "ana", "t/k", {"use_ssl": True})
    assert url == "sc://h:1/;user_id=ana;token=t%2Fk;use_ssl=True"
    back = connection_of_url(url)
    assert back == {
        "conn_type": "spark_connect",
        "host": "h",
        "port": 1,
        "login": "ana",
        "password": "t/k",
        "extra": {"use_ssl": "True"},
    }
    assert (
        connect_url_from_connection(back["host"], back["port"], back["login"], back["password"], back["extra"]) == url
    )
    with pytest.raises(ValueError, match="names no host"):
        connect_url_from_connection(None, 15002, None, None, {})
    with pytest.raises(ValueError, match="not a Spark Connect URL"):
        connection_of_url("spark://master:7077")
