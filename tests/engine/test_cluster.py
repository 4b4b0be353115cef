"""Issue #15: compaction on a Spark standalone cluster whose workers' Python lacks lakecleaner.

A master and a worker are started with pyspark's `spark-class`; the worker's executors run a
virtualenv that has lakecleaner's core dependencies but not lakecleaner, so the package must reach
them the way Spark documents for Python: the zip in spark.submit.pyFiles that the CLI's session
and the DAG's spark-submit add for every non-local master (`spark.ship_package: auto`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakecleaner.config import SparkSettings
from lakecleaner.dev.ports import free_port
from lakecleaner.engine.workers import WORKER_ENV
from lakecleaner.lake import Lake
from lakecleaner.log.records import Record
from lakecleaner.orchestration.compact_task import SubmitTarget, spark_submit_binary, spark_submit_command
from lakecleaner.spark_jobs import compact_topic_path
from tests.engine.helpers import WORKER_ENV_PROBE
from tests.support.samples import write_sample

pytestmark = [pytest.mark.slow, pytest.mark.classic_only]
REPO = Path(__file__).resolve().parents[2]
LATEST = {f"k{i % 7}".encode(): f"v{i}".encode() for i in range(200)}  # each key's last value
CORE_DEPENDENCIES = ["pyarrow", "numpy", "xxhash", "pyroaring", "boto3", "pyyaml", "click", "rich"]


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Python with lakecleaner's core dependencies (at the lock's versions) and without lakecleaner."""
    root = tmp_path_factory.mktemp("bare") / "venv"
    constraints = root.parent / "constraints.txt"

    def uv(*args: str) -> None:
        subprocess.run(["uv", *args], cwd=REPO, check=True, capture_output=True, timeout=600)

    uv("export", "--frozen", "--no-dev", "--no-emit-project", "--no-hashes", "-o", str(constraints))
    uv("venv", "--python", sys.executable, str(root))
    uv("pip", "install", "--python", str(root / "bin" / "python"), *CORE_DEPENDENCIES, "-c", str(constraints))
    python = root / "bin" / "python"
    assert subprocess.run([python, "-c", "import lakecleaner"], capture_output=True).returncode != 0
    return python


@pytest.fixture(scope="module")
def cluster(bare_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A standalone master and one worker (2 cores, 1 GB) on loopback; yields the master URL."""
    work = tmp_path_factory.mktemp("spark-standalone")
    spark_class = Path(spark_submit_binary()).with_name("spark-class")
    port = free_port()
    master_url = f"spark://127.0.0.1:{port}"
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": str(bare_python)}
    master = subprocess.Popen(
        [
            spark_class,
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(free_port()),
        ],
        env=env,
        stdout=(work / "master.log").open("wb"),
        stderr=subprocess.STDOUT,
    )
    worker = subprocess.Popen(
        [
            spark_class,
            "org.apache.spark.deploy.worker.Worker",
            master_url,
            "--host",
            "127.0.0.1",
            "--cores",
            "2",
            "--memory",
            "1g",
            "--work-dir",
            str(work / "work"),
            "--webui-port",
            str(free_port()),
        ],
        env=env,
        stdout=(work / "worker.log").open("wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 120
        while b"Successfully registered with master" not in (work / "worker.log").read_bytes():
            assert time.monotonic() < deadline, (work / "worker.log").read_text()[-3000:]
            assert worker.poll() is None and master.poll() is None, (work / "worker.log").read_text()[-3000:]
            time.sleep(0.5)
        yield master_url
    finally:
        for process in (worker, master):
            process.terminate()
            process.wait(timeout=60)


@pytest.fixture
def dirty(tmp_path: Path) -> tuple[Path, Lake]:
    """The sample config in tmp_path, and its lake holding a dirty compacted topic `cdc`."""
    config = write_sample(tmp_path)
    lake = Lake.open(f"file://{tmp_path / 'lake'}")
    log = lake.create_topic("cdc", config={"cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.01}).partition(0)
    log.append([Record(f"k{i % 7}".encode(), f"v{i}".encode(), 1_000 + i) for i in range(200)], now_ms=10_000)
    log.roll(now_ms=10_000)
    return config, lake


def _latest(lake: Lake) -> dict[bytes, bytes]:
    table = lake.topic("cdc").partition(0).read(columns=["key", "value"])
    return dict(zip(table.column("key").to_pylist(), table.column("value").to_pylist(), strict=True))


def _run(command: list[str], cwd: Path, bare_python: Path) -> subprocess.CompletedProcess[str]:
    """Run `command` with executors on `bare_python`; assert it succeeded."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("LAKECLEANER_", "PYTHONPATH"))}
    env = {**clean, "PYSPARK_PYTHON": str(bare_python), "PYSPARK_DRIVER_PYTHON": sys.executable}
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return proc


def test_the_cli_compacts_on_a_cluster_whose_workers_lack_lakecleaner(
    cluster: str, bare_python: Path, dirty: tuple[Path, Lake], tmp_path: Path
) -> None:
    config, lake = dirty
    cli = [sys.executable, "-m", "lakecleaner.cli", "--config", str(config), "compact", "--topic", "cdc"]
    proc = _run([*cli, "--master", cluster, "--now", "20000"], tmp_path, bare_python)
    assert "committed" in proc.stdout
    assert _latest(lake) == LATEST


def test_the_dags_spark_submit_runs_the_packaged_job_on_the_cluster(
    cluster: str, bare_python: Path, dirty: tuple[Path, Lake], tmp_path: Path
) -> None:
    config, lake = dirty
    settings = SparkSettings()
    command = spark_submit_command(
        SubmitTarget(cluster),
        str(compact_topic_path()),
        ["--config", str(config), "--topic", "cdc", "--now", "20000"],
        name="lakecleaner-cdc",
        conf=settings.conf,
        py_files=[str(p) for p in _zip_if_shipped(settings, cluster)],
    )
    _run(command, tmp_path, bare_python)
    assert _latest(lake) == LATEST


def _zip_if_shipped(settings: SparkSettings, master: str) -> list[Path]:
    from lakecleaner.engine.shipping import package_zip

    assert settings.ships_package(master) and not settings.ships_package("local[2]")
    return [package_zip()]


def test_the_cluster_executors_python_workers_get_the_engines_environment(
    cluster: str, bare_python: Path, tmp_path: Path
) -> None:
    """A session lakecleaner builds for a cluster gives its executors' Python workers `WORKER_ENV`
    (spark.executorEnv), as on local[*] and on the Connect server (tests/engine/test_connect.py)."""
    proc = _run([sys.executable, "-c", WORKER_ENV_PROBE, cluster], tmp_path, bare_python)
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == WORKER_ENV
