"""The DAG files import the way Airflow's DagBag imports them: no errors, no storage I/O."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from lakecleaner.deprecation import LakeCleanerDeprecationWarning
from lakecleaner.orchestration.dag_files import (
    DAG_FILE_TEXT,
    DEFAULT_DAG_FILES,
    DagFileShare,
    auto_count,
    file_index_of,
    write_dag_files,
)
from lakecleaner.orchestration.dags import build_dag_file
from lakecleaner.runs.naming import dag_id_of
from tests.support.samples import write_sample

#: The checkout's DAG folder (docker-compose mounts it; `make airflow-ui` reads it).
CHECKOUT_DAGS = Path(__file__).parents[1] / "dags"

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
        [sys.executable, str(script), str(CHECKOUT_DAGS)],
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
        [sys.executable, str(script), str(CHECKOUT_DAGS)], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    # the two topics are in different DAG files (dag_files.py), and each file names its own
    errors = {Path(path).name: error for path, error in result["errors"].items()}
    bad, worse = (
        DagFileShare(file_index_of(t, DEFAULT_DAG_FILES), DEFAULT_DAG_FILES) for t in ("bad-schedule", "worse-schedule")
    )
    assert set(errors) == {bad.file_name, worse.file_name}
    assert "the DAGs of 1 topic(s) could not be built" in errors[bad.file_name]
    assert "topic bad-schedule: AirflowTimetableInvalid" in errors[bad.file_name]
    assert "topic worse-schedule: " in errors[worse.file_name] and f"fix them in {config}" in errors[worse.file_name]
    long_id = dag_id_of(long_name)
    assert len(long_id) == 250 and long_id == dag_id_of(long_name)  # stable
    assert set(result["dags"]) == {long_id, "lakecleaner__fine"}
    assert "compact" in result["dags"][long_id]["tasks"] and "compact" in result["dags"]["lakecleaner__fine"]["tasks"]


FILES_PROBE = """
import json, sys
from pathlib import Path
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])
files = {d: Path(dag.fileloc).name for d, dag in bag.dags.items()}
print(json.dumps({"errors": {Path(k).name: str(v) for k, v in bag.import_errors.items()}, "files": files}))
"""


def _dag_files_of(tmp_path: Path, folder: Path, config: Path, **env: str) -> dict[str, Any]:
    """What Airflow's DagBag (safe mode, as the dag-processor) finds in `folder`: each DAG's file, and
    the import errors by file name."""
    script = tmp_path / "files_probe.py"
    script.write_text(FILES_PROBE)
    environ = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "airflow"), "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    environ.update({"AIRFLOW__CORE__UNIT_TEST_MODE": "True", "LAKECLEANER_CONFIG": str(config), **env})
    proc = subprocess.run(
        [sys.executable, str(script), str(folder)], env=environ, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def _topics_config(path: Path, lake: Path, topics: list[str], extra: str = "") -> Path:
    """A config of `topics` sharing one settings mapping, which yaml.safe_dump writes once as an anchor
    that the other topics alias (as the scheduler tests' configs have it)."""
    shared = {"partitions": 2, "config": {"cleanup.policy": "delete"}}
    text = yaml.safe_dump({"lake": {"uri": f"file://{lake}"}, "topics": dict.fromkeys(topics, shared)})
    assert "&id001" in text and "*id001" in text
    path.write_text(text + extra)
    return path


def test_the_dags_are_spread_over_the_files_by_topic_and_a_new_topic_moves_no_other(tmp_path: Path) -> None:
    """Issue 50: each topic's DAG is in the file crc32(topic) mod N names, every file builds only its
    share, a topic added to the config lands in one file and no other DAG moves or is renamed, and
    rewriting the folder for another N removes the old files (no DAG in two files)."""
    topics = [f"team{i % 3}.orders-{i}" for i in range(24)]
    folder = tmp_path / "dags"
    written, removed = write_dag_files(folder, 4)
    assert [p.name for p in written] == [DagFileShare(i, 4).file_name for i in range(4)] and removed == []
    config = _topics_config(tmp_path / "lakecleaner.yaml", tmp_path / "lake", topics)
    first = _dag_files_of(tmp_path, folder, config)
    assert first["errors"] == {}
    assert first["files"] == {dag_id_of(t): DagFileShare(file_index_of(t, 4), 4).file_name for t in topics}
    assert len(set(first["files"].values())) == 4  # 24 topics reach every file

    _topics_config(config, tmp_path / "lake", [*topics, "added-later"])
    second = _dag_files_of(tmp_path, folder, config)
    assert second["files"] == {
        **first["files"],
        dag_id_of("added-later"): DagFileShare(file_index_of("added-later", 4), 4).file_name,
    }

    (folder / "lakecleaner_topics.py").write_text("# the one DAG file of earlier versions\n")
    written, removed = write_dag_files(folder, 2)
    assert sorted(p.name for p in removed) == sorted(
        ["lakecleaner_topics.py", *(DagFileShare(i, 4).file_name for i in range(4))]
    )
    third = _dag_files_of(tmp_path, folder, config)
    assert third["errors"] == {} and set(third["files"]) == set(second["files"])  # the same DAG ids
    assert set(third["files"].values()) == {DagFileShare(0, 2).file_name, DagFileShare(1, 2).file_name}


def test_a_dag_file_reads_only_its_own_topics_and_a_worker_builds_only_the_dag_it_runs(tmp_path: Path) -> None:
    """Issue 50: a topic whose settings are invalid takes down the DAGs of its own file only (the other
    files do not read it), and with Airflow's parsing context (set when a worker parses the file to run
    a task) a file builds that one DAG and reads no other topic's settings."""
    topics = [f"orders-{i}" for i in range(12)]
    broken = "broken-topic"
    folder = tmp_path / "dags"
    write_dag_files(folder, 4)
    bad_entry = f"  {broken}: {{config: {{cleanup.policy: sometimes}}}}\n"
    config = _topics_config(tmp_path / "lakecleaner.yaml", tmp_path / "lake", topics, bad_entry)
    found = _dag_files_of(tmp_path, folder, config)
    broken_file = DagFileShare(file_index_of(broken, 4), 4).file_name
    assert set(found["errors"]) == {broken_file} and "cleanup.policy" in found["errors"][broken_file]
    assert set(found["files"]) == {dag_id_of(t) for t in topics if file_index_of(t, 4) != file_index_of(broken, 4)}

    neighbour = next(t for t in topics if file_index_of(t, 4) == file_index_of(broken, 4))
    one = _dag_files_of(tmp_path, folder / broken_file, config, _AIRFLOW_PARSING_CONTEXT_DAG_ID=dag_id_of(neighbour))
    assert one == {"errors": {}, "files": {dag_id_of(neighbour): broken_file}}


def test_every_checked_in_dag_file_is_the_one_text_and_its_name_is_its_share() -> None:
    """One text for every file (its share is its name), so there is nothing to keep in step: the
    checkout's dags/ is DEFAULT_DAG_FILES files of `DAG_FILE_TEXT`, one per share."""
    files = sorted(CHECKOUT_DAGS.glob("*.py"))
    assert [p.name for p in files] == [DagFileShare(i, DEFAULT_DAG_FILES).file_name for i in range(DEFAULT_DAG_FILES)]
    assert {p.read_text() for p in files} == {DAG_FILE_TEXT}
    assert [DagFileShare.of_file(p) for p in files] == [DagFileShare(i, DEFAULT_DAG_FILES) for i in range(32)]
    with pytest.raises(ValueError, match=r"lakecleaner_topics_<i>_of_<N>\.py.*lakecleaner airflow dag-files"):
        DagFileShare.of_file("/dags/my_copy_of_lakecleaner.py")


def test_auto_counts_about_300_topics_a_file_in_powers_of_two() -> None:
    assert [auto_count(n) for n in (0, 1, 300, 450, 10_000, 120_000)] == [1, 1, 1, 2, 32, 512]
    for topics in (1_000, 10_000, 100_000, 1_000_000):
        count = auto_count(topics)
        assert count & (count - 1) == 0 and 200 <= topics / count <= 430
    assert auto_count(10**9) == 4096


def test_a_dag_folder_reads_the_config_beside_it_without_lakecleaner_config(tmp_path: Path) -> None:
    """A checkout's (or docker-compose's) layout: dags/ next to config/lakecleaner.yaml."""
    folder = tmp_path / "dags"
    write_dag_files(folder, 2)
    (tmp_path / "config").mkdir()
    _topics_config(tmp_path / "config" / "lakecleaner.yaml", tmp_path / "lake", ["orders", "payments"])
    found = _dag_files_of(tmp_path, folder, tmp_path / "elsewhere.yaml", LAKECLEANER_CONFIG="")
    assert found["errors"] == {} and set(found["files"]) == {dag_id_of("orders"), dag_id_of("payments")}


def test_a_dag_file_of_the_earlier_form_still_builds_with_a_deprecation_warning(tmp_path: Path) -> None:
    """lakecleaner 0.1's files called build_dag_file(index, count, fallback_config=…): a deployment
    that has not written its files anew keeps its DAGs, and is told to."""
    config = _topics_config(tmp_path / "lakecleaner.yaml", tmp_path / "lake", ["orders", "payments"])
    env = os.environ.pop("LAKECLEANER_CONFIG", None)
    try:
        with pytest.warns(LakeCleanerDeprecationWarning, match="lakecleaner airflow dag-files DIR"):
            dags = build_dag_file(0, 1, fallback_config=config)
    finally:
        if env is not None:
            os.environ["LAKECLEANER_CONFIG"] = env
    assert set(dags) == {dag_id_of("orders"), dag_id_of("payments")}


def test_the_dag_files_benchmark_runs(tmp_path: Path) -> None:
    """bench/dags.py at 30 topics, as a smoke check (no timing assertions): both layouts build every
    topic's DAG without import errors, and a task's parse builds one DAG."""
    bench = Path(__file__).parents[1] / "bench" / "dags.py"
    out = tmp_path / "figures.json"
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "airflow")}
    command = [sys.executable, str(bench), "--topics", "30", "--files", "3", "--dir", str(tmp_path), "--json", str(out)]
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (figures,) = json.loads(out.read_text())
    assert figures["ours"]["dags"] == figures["one_file"]["dags"] == 30
    assert len(figures["ours"]["files"]) == 3 and figures["ours"]["errors"] == figures["one_file"]["errors"] == []
    assert figures["task"]["dags"] == 1
    assert "slowest file" in proc.stdout


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
