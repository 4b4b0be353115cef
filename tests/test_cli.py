"""The `lakecleaner` CLI, run as a real process against a local lake."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def run(lake: Path, *args: str, stdin: str | None = None, ok: bool = True) -> subprocess.CompletedProcess[str]:
    cwd = lake.with_name(lake.name + "-cwd")  # the test's own: the demo writes the sample config there
    cwd.mkdir(exist_ok=True)
    proc = subprocess.run(
        [sys.executable, "-m", "lakecleaner.cli", "--lake", f"file://{lake}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_topics_create_list_describe(tmp_path: Path) -> None:
    run(tmp_path, "topics", "create", "orders", "--partitions", "3", "--config", "cleanup.policy=compact")
    assert json.loads(run(tmp_path, "--json", "topics", "list").stdout) == ["orders"]
    info = json.loads(run(tmp_path, "--json", "topics", "describe", "orders").stdout)
    assert info["partitions"] == 3 and info["config"]["cleanup.policy"] == "compact"
    human = run(tmp_path, "topics", "describe", "orders").stdout
    assert "cleanup.policy" in human and "topic" in human
    run(tmp_path, "topics", "alter", "orders", "--config", "min.cleanable.dirty.ratio=0.2")
    info = json.loads(run(tmp_path, "--json", "topics", "describe", "orders").stdout)
    assert info["config"]["min.cleanable.dirty.ratio"] == 0.2


def test_produce_json_lines_consume_and_status(tmp_path: Path) -> None:
    run(tmp_path, "topics", "create", "events", "--partitions", "2")
    lines = "\n".join(
        json.dumps(r)
        for r in [
            {"key": "a", "value": "1", "timestamp": 100, "headers": {"source": "x"}},
            {"key": "b", "value": None, "timestamp": 101, "partition": 1},
            {"key": "a", "value": "2", "timestamp": 102},
        ]
    )
    out = json.loads(run(tmp_path, "--json", "produce", "--topic", "events", stdin=lines).stdout)
    assert out["records"] == 3
    records = []
    for p in (0, 1):
        records += [
            json.loads(line)
            for line in run(tmp_path, "consume", "--topic", "events", "--partition", str(p)).stdout.splitlines()
        ]
    assert sorted((r["key"], r["value"], r["timestamp"]) for r in records) == [
        ("a", "1", 100),
        ("a", "2", 102),
        ("b", None, 101),
    ]
    a_records = [r for r in records if r["key"] == "a"]
    assert a_records[0]["headers"] == [["source", "x"]]
    assert len({r["offset"] for r in a_records}) == 2  # same key, same partition, consecutive offsets
    status = json.loads(run(tmp_path, "--json", "status").stdout)
    assert sum(p["records"] for p in status["events"]) == 3
    assert "next" in run(tmp_path, "status", "--topic", "events").stdout


def test_produce_generate_and_offsets(tmp_path: Path) -> None:
    run(tmp_path, "topics", "create", "cdc", "--partitions", "2", "--config", "cleanup.policy=compact")
    out = json.loads(
        run(
            tmp_path,
            "--json",
            "produce",
            "--topic",
            "cdc",
            "--generate",
            "--records",
            "5000",
            "--keys",
            "100",
            "--header-versions",
            "--tombstone-share",
            "0.1",
        ).stdout
    )
    assert out["records"] == 5000 and set(out["per_partition"]) == {"0", "1"}
    run(tmp_path, "offsets", "commit", "--group", "g1", "--topic", "cdc", "0=10", "1=20")
    run(tmp_path, "offsets", "commit", "--group", "g2", "--topic", "cdc", "0=5")
    listed = json.loads(run(tmp_path, "--json", "offsets", "list", "--topic", "cdc").stdout)
    assert {(r["group"], r["partition"], r["offset"]) for r in listed["offsets"]} == {
        ("g1", 0, 10),
        ("g1", 1, 20),
        ("g2", 0, 5),
    }
    assert listed["minimum"]["0"]["offset"] == 5
    assert listed["minimum"]["1"]["offset"] is None and "g2" in listed["minimum"]["1"]["reason"]


def test_repair_command_restores_a_deleted_manifest(tmp_path: Path) -> None:
    run(tmp_path, "topics", "create", "t")
    run(tmp_path, "produce", "--topic", "t", "--generate", "--records", "300", "--keys", "30")
    before = run(tmp_path, "consume", "--topic", "t", "--partition", "0").stdout
    (tmp_path / "topics" / "t" / "partition=0" / "manifest.json").unlink()
    failed = run(tmp_path, "consume", "--topic", "t", "--partition", "0", ok=False)
    assert failed.returncode == 2 and "lakecleaner repair" in failed.stderr
    reports = json.loads(run(tmp_path, "--json", "repair", "--topic", "t").stdout)
    assert reports[0]["previous_state"] == "missing" and reports[0]["records"] == 300
    assert run(tmp_path, "consume", "--topic", "t", "--partition", "0").stdout == before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("topics", "create", "bad/name"), "illegal characters '/'"),
        (("topics", "create", "t", "--config", "segment.byte=5"), "did you mean 'segment.bytes'?"),
        (
            ("topics", "create", "t", "--config", "min.compaction.lag.ms=10", "--config", "max.compaction.lag.ms=5"),
            "max.compaction.lag.ms=5 is less than min.compaction.lag.ms=10",
        ),
        (("consume", "--topic", "missing", "--partition", "0"), "topic missing does not exist"),
    ],
)
def test_errors_exit_2_with_a_clear_message(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    proc = run(tmp_path, *args, ok=False)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_compacted_topic_rejects_unkeyed_json_records(tmp_path: Path) -> None:
    run(tmp_path, "topics", "create", "cdc", "--config", "cleanup.policy=compact")
    proc = run(tmp_path, "produce", "--topic", "cdc", stdin='{"key": null, "value": "x"}\n', ok=False)
    assert proc.returncode == 2 and "without a key" in proc.stderr


def test_demo_builds_the_sample_topics_and_prints_status(tmp_path: Path) -> None:
    proc = run(tmp_path, "demo", "--records", "4000", "--no-airflow")
    assert "topic customers-cdc" in proc.stdout and "topic page-views" in proc.stdout
    sample = tmp_path.with_name(tmp_path.name + "-cwd") / "lakecleaner.yaml"
    assert f"wrote the sample config to {sample}" in proc.stderr and sample.is_file()
    status = json.loads(run(tmp_path, "--json", "status").stdout)
    assert sum(p["records"] for p in status["customers-cdc"]) == 4000
    assert len(status["customers-cdc"]) == 4


def test_plan_on_the_sample_topics_is_readable_and_changes_nothing(tmp_path: Path) -> None:
    def committed_state() -> list[dict[str, object]]:
        """Every partition's status figures except the active segment's age, which moves with the clock."""
        status = json.loads(run(tmp_path, "--json", "status").stdout)
        return [
            {k: v for k, v in p.items() if k != "active_segment_age_ms"} for parts in status.values() for p in parts
        ]

    run(tmp_path, "demo", "--records", "8000", "--no-airflow")
    before = committed_state()
    human = run(tmp_path, "plan", "--topic", "customers-cdc").stdout
    assert "customers-cdc (cleanup.policy=compact)" in human
    assert "max-compaction-delay-secs=" in human and "partitions-due=" in human
    plan = json.loads(run(tmp_path, "--json", "plan", "--topic", "page-views", "--now", "2099-01-01T00:00:00Z").stdout)
    assert [p["partition"] for p in plan["partitions"]] == [0, 1]
    assert all(p["retention"]["deletions"] for p in plan["partitions"])  # everything is past retention.ms by 2099
    assert committed_state() == before


def test_retain_trim_and_gc_commands(tmp_path: Path) -> None:
    run(
        tmp_path,
        "topics",
        "create",
        "t",
        "--config",
        "retention.ms=1000",
        "--config",
        "file.delete.delay.ms=0",
        "--config",
        "segment.bytes=2000",
    )
    run(
        tmp_path,
        "produce",
        "--topic",
        "t",
        "--generate",
        "--records",
        "200",
        "--keys",
        "50",
        "--start-ms",
        "1000",
        "--timestamp-spread-ms",
        "1000",
    )
    run(tmp_path, "trim", "--topic", "t", "--partition", "0", "--offset", "10")
    failed = run(tmp_path, "trim", "--topic", "t", "--partition", "0", "--offset", "5", ok=False)
    assert failed.returncode == 2 and "below the log start offset 10" in failed.stderr
    report = json.loads(run(tmp_path, "--json", "retain", "--topic", "t", "--now", "1000000").stdout)
    assert report["partitions"][0]["status"] == "committed" and report["segments_deleted"] > 0
    gc = json.loads(run(tmp_path, "--json", "gc", "--topic", "t", "--now", "1000000").stdout)
    assert gc["files_deleted"] > 0
    status = json.loads(run(tmp_path, "--json", "status").stdout)
    assert status["t"][0]["records"] == 0 and status["t"][0]["log_start_offset"] == 200


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"key": "a", "timestamp": 1e30}', "line 2: field timestamp=1e+30 must be a whole number from 0 to"),
        ('{"key": "a", "timestamp": 12.5}', "line 2: field timestamp=12.5 must be a whole number"),
        ('{"key": "a", "timestamp": -3}', "line 2: field timestamp=-3 must be a whole number from 0"),
        ('{"key": "a", "timestamp": "soon"}', 'line 2: field timestamp="soon" must be a whole number'),
        ('{"key": "a", "partition": 1.0}', "line 2: field partition=1.0 must be a whole number from 0 to 1"),
        ('{"key": "a", "partition": 2}', "line 2: field partition=2 must be a whole number from 0 to 1"),
        ('{"key": "a", "headers": "v=1"}', "line 2: field headers must be an object or a list of [key, value]"),
    ],
)
def test_produce_rejects_bad_fields_with_line_and_field_and_writes_nothing(
    tmp_path: Path, line: str, message: str
) -> None:
    run(tmp_path, "topics", "create", "t", "--partitions", "2")
    proc = run(tmp_path, "produce", "--topic", "t", stdin='{"key": "ok", "value": "1"}\n' + line + "\n", ok=False)
    assert proc.returncode != 0 and message in proc.stderr
    assert "Traceback" not in proc.stderr
    status = json.loads(run(tmp_path, "--json", "status", "--topic", "t").stdout)
    assert sum(r["records"] for r in status["t"]) == 0
