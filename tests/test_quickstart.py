"""The README's quick start run as written (issue 78): its first lines are `make demo` and
`make test` (CI runs the latter: .ci/run); `make demo` runs, in a copy of the checkout and a
shell that has none of the project's environment, and the three commands its last lines suggest
run there as printed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"


def quick_start_commands(readme: str) -> list[str]:
    """The commands of the README's first code block, without their comments."""
    block = re.search(r"```bash\n(.*?)```", readme, re.S)
    assert block is not None, "the README has no bash block"
    return [line.split("#")[0].strip() for line in block.group(1).splitlines() if line.strip()]


def newcomers_environment() -> dict[str, str]:
    """This process's environment as a newcomer's shell has it: no virtualenv active (the test
    session's .venv/bin off PATH), no lakecleaner, Airflow, Spark or uv-run settings."""
    ours = str(Path(os.environ.get("VIRTUAL_ENV", REPO / ".venv")) / "bin")
    prefixes = ("LAKECLEANER_", "AIRFLOW", "SPARK_", "PYSPARK_", "UV_", "PYTEST", "COV_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    for name in ("VIRTUAL_ENV", "PYTHONPATH", "UV", "JAVA_TOOL_OPTIONS"):
        env.pop(name, None)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p and p != ours)
    return env


def checkout_copy(target: Path) -> Path:
    """The checkout's files as a fresh clone has them (tracked and not ignored: no .venv, lake,
    airflow_home), uncommitted changes included."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = REPO / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def suggested_commands(output: str) -> list[str]:
    """The commands after the demo's "Next, try:" line, without their comments."""
    _, _, tail = output.partition("Next, try:\n")
    assert tail, output[-3000:]
    return [line.split("   # ")[0].strip() for line in tail.splitlines() if line.startswith("  ")]


def test_the_readme_starts_with_the_two_commands_and_ci_runs_its_test_command() -> None:
    assert quick_start_commands(README.read_text()) == ["make demo", "make test"]
    ci = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()]
    assert "make test" in [line for line in ci if line and not line.startswith("#")]


def test_make_demo_then_the_commands_it_suggests_run_as_written(tmp_path: Path) -> None:
    checkout = checkout_copy(tmp_path / "lakecleaner")
    env = newcomers_environment()
    (demo,) = [c for c in quick_start_commands(README.read_text()) if "demo" in c]
    done = subprocess.run(demo, shell=True, cwd=checkout, env=env, capture_output=True, text=True, timeout=1200)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert re.search(r"produced [\d,]+ records to customers-cdc and [\d,]+ to page-views", output), output[-3000:]
    assert "topic customers-cdc" in done.stdout and "topic page-views" in done.stdout
    assert (checkout / "lake" / "_lakecleaner" / "report.html").is_file()
    assert f"HTML report: file://{checkout / 'lake' / '_lakecleaner' / 'report.html'}" in done.stdout

    plan, consume, audit = suggested_commands(done.stdout)
    ran = {
        c: subprocess.run(c, shell=True, cwd=checkout, env=env, capture_output=True, text=True, timeout=300)
        for c in (plan, consume, audit)
    }
    for command, result in ran.items():
        assert result.returncode == 0, (command, result.stdout[-2000:], result.stderr[-2000:])
    assert "customers-cdc" in ran[plan].stdout and "page-views" in ran[plan].stdout
    records = [json.loads(line) for line in ran[consume].stdout.splitlines()]
    assert len(records) == 10 and all(r["offset"] >= 0 for r in records)
    documents = [json.loads(r["value"]) for r in records if r["value"] is not None]
    assert documents and all(
        d["id"] == r["key"] for d, r in zip(documents, (r for r in records if r["value"]), strict=True)
    )
    # the audit of a deleted key lists its copies in the log's segments, none overdue (exit 0 above)
    assert audit.split("--key ")[1].startswith("key-")
    assert "topics/customers-cdc/partition=0/segments/" in ran[audit].stdout and "OVERDUE" not in ran[audit].stdout
