"""Issue #15: the built wheel works installed, outside the repository.

The wheel is built with `uv build` and installed with `uv pip` into fresh virtualenvs in a temporary
directory, resolving the wheel's own metadata (the lock file only constrains versions, so the run
is reproducible and reuses uv's cache). Every command runs there, with the repository neither the
working directory nor on any path:

* `lakecleaner[all]`: the CLI round trip, one compaction on local Spark, the Airflow plugin found
  by its entry point, and one topic's DAG run by `dag.test()` (assess, spark-submit of the packaged
  job, retention, report), and `pyspark/` holding files of the full pyspark distribution only;
* the core package alone: the storage commands work without Spark, Airflow or Great Expectations,
  and a command that needs an extra names it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Venv:
    root: Path
    work: Path  # the working directory of every command: outside the repository

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    def env(self) -> dict[str, str]:
        keep = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("LAKECLEANER_", "AIRFLOW", "PYTHON", "VIRTUAL_ENV"))
        }
        return {**keep, "PATH": f"{self.root / 'bin'}:{keep.get('PATH', '')}", "VIRTUAL_ENV": str(self.root)}

    def run(
        self, *args: str, ok: bool = True, stdin: str | None = None, timeout: int = 600
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            list(args), cwd=self.work, env=self.env(), input=stdin, capture_output=True, text=True, timeout=timeout
        )
        if ok:
            assert proc.returncode == 0, f"{args}: {proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
        return proc

    def lakecleaner(self, *args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
        return self.run(str(self.root / "bin" / "lakecleaner"), *args, **kwargs)  # type: ignore[arg-type]


def _uv(*args: str, cwd: Path = REPO) -> str:
    proc = subprocess.run(["uv", *args], cwd=cwd, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, f"uv {' '.join(args)}: {proc.stderr[-4000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The built wheel and the lock's versions as constraints."""
    out = tmp_path_factory.mktemp("dist")
    _uv("build", "--wheel", "--out-dir", str(out))
    (built,) = out.glob("lakecleaner-*.whl")
    constraints = out / "constraints.txt"
    _uv("export", "--frozen", "--no-dev", "--all-extras", "--no-emit-project", "--no-hashes", "-o", str(constraints))
    return built, constraints


def _install(tmp: Path, requirement: str, constraints: Path) -> Venv:
    root, work = tmp / "venv", tmp / "work"
    work.mkdir()
    _uv("venv", "--python", sys.executable, str(root), cwd=tmp)
    _uv("pip", "install", "--python", str(root / "bin" / "python"), requirement, "-c", str(constraints), cwd=tmp)
    return Venv(root, work)


@pytest.fixture(scope="module")
def full(wheel: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Venv]:
    built, constraints = wheel
    yield _install(tmp_path_factory.mktemp("full"), f"lakecleaner[all] @ {built.as_uri()}", constraints)


@pytest.fixture(scope="module")
def core(wheel: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Venv]:
    built, constraints = wheel
    yield _install(tmp_path_factory.mktemp("core"), str(built), constraints)


def _records(venv: Venv, topic: str) -> list[dict[str, object]]:
    out = venv.lakecleaner("--json", "consume", "--topic", topic, "--partition", "0").stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


PRODUCE = "".join(json.dumps({"key": f"k{i % 5}", "value": f"v{i}", "timestamp": 1_000 + i}) + "\n" for i in range(40))


def test_the_installed_package_runs_outside_the_repository(full: Venv) -> None:
    paths = json.loads(full.lakecleaner("--json", "paths").stdout)
    assert paths["config"] is None
    assert Path(paths["compact_job"]).is_relative_to(full.root) and Path(paths["compact_job"]).is_file(), paths
    full.lakecleaner("airflow", "dag-files", "dags", "--count", "4")  # the wheel ships the text, not the files
    written = sorted(p.name for p in (full.work / "dags").iterdir())
    assert written == [f"lakecleaner_topics_{i}_of_4.py" for i in range(4)]
    missing = full.lakecleaner("topics", "list", ok=False)
    assert missing.returncode == 2 and "pass --config PATH, set LAKECLEANER_CONFIG" in missing.stderr

    full.lakecleaner("init")  # ./lakecleaner.yaml, its lake in ./lake
    full.lakecleaner("topics", "create", "cdc", "--partitions", "1", "--config", "cleanup.policy=compact")
    full.lakecleaner("produce", "--topic", "cdc", stdin=PRODUCE)
    full.lakecleaner("roll", "--topic", "cdc", "--partition", "0")
    assert len(_records(full, "cdc")) == 40
    compacted = full.lakecleaner("compact", "--topic", "cdc", "--force", timeout=900)
    assert "committed" in compacted.stdout
    latest = {r["key"]: r["value"] for r in _records(full, "cdc")}
    assert latest == {f"k{k}": f"v{35 + k}" for k in range(5)} and len(_records(full, "cdc")) == 5
    assert (full.work / "lake" / "topics" / "cdc").is_dir()


def test_pyspark_holds_only_files_of_the_full_pyspark_distribution(full: Venv) -> None:
    script = (
        "import importlib.metadata as m, json\n"
        "owners = {}\n"
        "for d in m.distributions():\n"
        "    for f in d.files or ():\n"
        "        if str(f).startswith('pyspark/'):\n"
        "            owners.setdefault(d.metadata['Name'], 0)\n"
        "            owners[d.metadata['Name']] += 1\n"
        "print(json.dumps(owners))\n"
    )
    owners = json.loads(full.run(str(full.python), "-c", script).stdout)
    assert set(owners) == {"pyspark"}, owners


def test_airflow_finds_the_plugin_and_runs_a_topics_dag_with_its_spark_submit(full: Venv) -> None:
    config = full.work / "airflow-lake.yaml"
    full.lakecleaner("init", str(config))
    env_script = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from lakecleaner.orchestration.local import prepare_airflow, run_dag, airflow_env\n"
        "home, config = Path(sys.argv[1]), Path(sys.argv[2])\n"
        "prepare_airflow(home, config)\n"
        "import subprocess\n"
        "plugins = subprocess.run(['airflow', 'plugins', '--output', 'json'], env=airflow_env(home, config),\n"
        "                         capture_output=True, text=True, check=True).stdout\n"
        "result = run_dag(home, config, 'lakecleaner__customers-cdc', sys.argv[3], conf={'force': True})\n"
        "print(json.dumps({'plugins': json.loads(plugins), 'state': result.state, 'tasks': dict(result.tasks),\n"
        "                  'log': result.log[-3000:]}))\n"
    )
    # segments roll; --reset: the lake already holds the earlier tests' topic, which the demo leaves alone
    full.lakecleaner("--config", str(config), "demo", "--records", "20000", "--no-airflow", "--reset")
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0).isoformat()  # the demo's data is recent
    out = full.run(str(full.python), "-c", env_script, str(full.work / "airflow"), str(config), hour, timeout=1500)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert [p["name"] for p in result["plugins"]] == ["lakecleaner"]
    assert result["state"] == "success", result["log"]
    assert result["tasks"]["compact"] == "success" and result["tasks"]["report"] == "success"


def test_the_core_package_serves_the_storage_commands_and_names_the_extra_a_command_needs(core: Venv) -> None:
    absent = core.run(str(core.python), "-c", "import pyspark", ok=False)
    assert absent.returncode != 0  # no Spark, Airflow or Great Expectations in the core install
    for module in ("airflow", "great_expectations"):
        assert core.run(str(core.python), "-c", f"import {module}", ok=False).returncode != 0
    core.lakecleaner("init")
    core.lakecleaner("topics", "create", "events", "--partitions", "1", "--config", "cleanup.policy=compact")
    core.lakecleaner("produce", "--topic", "events", stdin=PRODUCE)
    assert len(_records(core, "events")) == 40
    core.lakecleaner("status")
    compact = core.lakecleaner("compact", "--topic", "events", ok=False)
    assert compact.returncode == 2 and "pip install 'lakecleaner[spark]'" in compact.stderr


def test_the_wheel_holds_no_test_harness(wheel: tuple[Path, Path]) -> None:
    """Issue #45: what only tests and the screenshots use (a local Airflow for tests, Chromium's
    set-up through a package manager) is not shipped to every Airflow worker."""
    built, _ = wheel
    with zipfile.ZipFile(built) as archive:
        names = archive.namelist()
        sources = {n: archive.read(n).decode() for n in names if n.endswith(".py")}
    assert not [n for n in names if "local_airflow" in n or n.startswith(("tests/", "scripts/"))]
    assert not [n for n, text in sources.items() if "apt-get" in text or "playwright" in text]
