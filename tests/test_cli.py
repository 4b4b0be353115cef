"""The `lakecleaner` CLI, run as a real process against a local lake."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest

from lakecleaner.cleaner_state import Failure, mark_uncleanable
from lakecleaner.config import parse_config
from lakecleaner.demo import demo_invocation, next_commands, with_readable_values
from lakecleaner.lake import Lake
from lakecleaner.log.records import Record
from tests.support.cli_process import run_cli


def run(lake: Path, *args: str, stdin: str | None = None, ok: bool = True) -> subprocess.CompletedProcess[str]:
    cwd = lake.with_name(lake.name + "-cwd")  # the test's own: the demo writes the sample config there
    cwd.mkdir(exist_ok=True)
    proc = run_cli("--lake", f"file://{lake}", *args, input=stdin, cwd=cwd)
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


def test_produce_keeps_the_offsets_a_copied_topic_carries_and_consume_shows_them(tmp_path: Path) -> None:
    run(tmp_path, "topics", "create", "copy")
    copied = [{"key": "a", "value": "1", "offset": 4}, {"key": "b", "value": "2", "offset": 9}]
    run(tmp_path, "produce", "--topic", "copy", stdin="\n".join(json.dumps(r) for r in copied))
    run(tmp_path, "produce", "--topic", "copy", stdin=json.dumps({"key": "c", "value": "3"}))
    consumed = [
        json.loads(line) for line in run(tmp_path, "consume", "--topic", "copy", "--partition", "0").stdout.splitlines()
    ]
    assert [(r["offset"], r["key"]) for r in consumed] == [(4, "a"), (9, "b"), (10, "c")]
    for lines, message in [
        ([{"key": "d", "offset": 20}, {"key": "e"}], "1 of 2 records have an offset"),
        ([{"key": "d", "offset": 10}], "offset 10 is below the log's next offset 11"),
        ([{"key": "d", "offset": 30}, {"key": "e", "offset": 30}], "strictly increasing"),
    ]:
        proc = run(tmp_path, "produce", "--topic", "copy", stdin="\n".join(json.dumps(r) for r in lines), ok=False)
        assert proc.returncode != 0 and message in proc.stderr and "Traceback" not in proc.stderr
    assert len(run(tmp_path, "consume", "--topic", "copy", "--partition", "0").stdout.splitlines()) == 3


def test_uncleanable_partitions_are_listed_shown_in_status_and_cleared(tmp_path: Path) -> None:
    run(tmp_path, "topics", "create", "cdc", "--partitions", "2", "--config", "cleanup.policy=compact")
    run(tmp_path, "produce", "--topic", "cdc", "--partition", "1", stdin=json.dumps({"key": "a", "value": "1"}))
    lake = Lake.open(parse_config({"lake": {"uri": f"file://{tmp_path}"}}))
    manifest = lake.topic("cdc").partition(1).manifest()
    failure = Failure(1, "segment file x is unreadable", manifest)
    lake.cleaner_state.update(
        "cdc", lambda s: replace(s, uncleanable=mark_uncleanable(s, [failure], lake.topic("cdc").config, 1000))
    )
    listed = json.loads(run(tmp_path, "--json", "uncleanable", "list", "--topic", "cdc").stdout)
    assert [(e["partition"], e["attempts"], e["reason"]) for e in listed["uncleanable"]] == [
        (1, 1, "segment file x is unreadable")
    ]
    status = json.loads(run(tmp_path, "--json", "status", "--topic", "cdc").stdout)["cdc"]
    assert [p["uncleanable"] for p in status] == [None, "segment file x is unreadable"]
    assert "segment file x is unreadable" in run(tmp_path, "status", "--topic", "cdc").stdout
    proc = run(tmp_path, "uncleanable", "clear", "--topic", "cdc", "--partition", "7", ok=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert json.loads(run(tmp_path, "--json", "uncleanable", "clear", "--topic", "cdc").stdout)["cleared"] == [1]
    assert json.loads(run(tmp_path, "--json", "uncleanable", "list", "--topic", "cdc").stdout)["uncleanable"] == []


def test_audit_key_lists_every_copy_and_exits_1_when_one_is_overdue(tmp_path: Path) -> None:
    config = {"cleanup.policy": "compact", "max.compaction.lag.ms": 3_600_000}
    run(tmp_path, "topics", "create", "users", *[a for k, v in config.items() for a in ("--config", f"{k}={v}")])
    lines = [{"key": "alice", "value": "1", "timestamp": 1000}, {"key": "alice", "value": "2", "timestamp": 2000}]
    run(tmp_path, "produce", "--topic", "users", stdin="\n".join(json.dumps(r) for r in lines))
    # a lake without a config file declares no DAG for the topic: nothing is scheduled to remove copies
    proc = run(tmp_path, "--json", "audit", "key", "--topic", "users", "--key", "alice", "--now", "3000", ok=False)
    assert proc.returncode == 1
    audit = json.loads(proc.stdout)
    assert [(c["offset"], c["kind"]) for c in audit["copies"]] == [(0, "superseded"), (1, "live")]
    assert "no schedule" in audit["copies"][0]["overdue"] and "alice" not in proc.stdout
    by_base64 = run(tmp_path, "--json", "audit", "key", "--topic", "users", "--key-base64", "Ym9i", ok=False)
    assert by_base64.returncode == 0 and json.loads(by_base64.stdout)["copies"] == []  # "bob": no copy
    invalid = run(tmp_path, "audit", "key", "--topic", "users", "--key-base64", "not base64!", ok=False)
    assert invalid.returncode == 2 and "--key-base64 is not valid base64" in invalid.stderr
    assert "line" not in invalid.stderr
    both = run(tmp_path, "audit", "key", "--topic", "users", "--key", "a", "--key-base64", "YQ==", ok=False)
    assert both.returncode == 2 and "give the key once" in both.stderr
    topic = run(tmp_path, "--json", "audit", "topic", "--topic", "users", "--now", "3000", ok=False)
    assert topic.returncode == 1 and json.loads(topic.stdout)["partitions"][0]["overdue"]


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
    reports = json.loads(run(tmp_path, "--json", "repair", "--topic", "t").stdout)["partitions"]
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


def test_the_demos_next_commands_start_lakecleaner_as_the_demo_was_started() -> None:
    """Issue 78: the commands the demo suggests run where it ran — through `uv run` when uv started
    it, with the --config and --lake of its command line, quoted for a shell."""
    assert demo_invocation(False, None, None) == "lakecleaner"
    invocation = demo_invocation(True, "config/lakecleaner.yaml", "file:///tmp/my lake")
    assert invocation == "uv run lakecleaner --config config/lakecleaner.yaml --lake 'file:///tmp/my lake'"
    plan, consume, audit = next_commands(invocation, "key 7")
    assert plan.startswith(f"{invocation} plan --all ") and consume.startswith(f"{invocation} consume --topic ")
    assert audit.startswith(f"{invocation} audit key --topic customers-cdc --key 'key 7' ")
    assert len({line.index("   # ") for line in (plan, consume, audit)}) == 1  # the comments line up
    assert len(next_commands("lakecleaner", None)) == 2  # no key to audit: no audit line


def test_the_demos_values_are_json_documents_and_its_tombstones_stay_null() -> None:
    batch = pa.table({"key": [b"key-1", b"key-2", None], "value": [b"\x00\xff", None, b"\x01"]})
    rendered = with_readable_values(batch, 10, lambda key, ordinal: {"id": key, "n": ordinal})
    assert rendered.column("value").to_pylist() == [b'{"id": "key-1", "n": 10}', None, b'{"id": null, "n": 12}']
    assert rendered.column("key").equals(batch.column("key")) and rendered.schema == batch.schema


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


def test_the_demo_leaves_a_users_record_alone_without_reset(tmp_path: Path) -> None:
    """A lake with anything the demo did not create (here a record produced to a topic of the
    demo's own name) is not touched: the demo says what it would delete and exits 2."""
    run(tmp_path, "topics", "create", "customers-cdc", "--partitions", "4", "--config", "cleanup.policy=compact")
    run(tmp_path, "produce", "--topic", "customers-cdc", "--partition", "0", stdin='{"key": "mine", "value": "keep"}\n')
    run(tmp_path, "topics", "create", "orders")
    refused = run(tmp_path, "demo", "--records", "400", "--no-airflow", ok=False)
    assert refused.returncode == 2 and "--reset" in refused.stderr
    assert "topic customers-cdc" in refused.stderr and "topic orders" in refused.stderr
    consumed = run(tmp_path, "consume", "--topic", "customers-cdc", "--partition", "0").stdout
    assert [json.loads(line)["value"] for line in consumed.splitlines()] == ["keep"]
    run(tmp_path, "demo", "--records", "400", "--no-airflow", "--reset")
    assert json.loads(run(tmp_path, "--json", "topics", "list").stdout) == ["customers-cdc", "orders", "page-views"]
    again = run(tmp_path, "demo", "--records", "400", "--no-airflow", ok=False)  # orders is still the user's
    assert again.returncode == 2 and "holds what no demo created: topic orders." in again.stderr
    own = tmp_path / "own"
    run(own, "demo", "--records", "400", "--no-airflow")
    run(own, "demo", "--records", "400", "--no-airflow")  # a lake only demos wrote: rebuilt without --reset


def test_the_demo_never_deletes_a_consumer_groups_offsets_it_did_not_write(tmp_path: Path) -> None:
    run(tmp_path, "topics", "create", "orders")
    run(tmp_path, "produce", "--topic", "orders", stdin='{"key": "a", "value": "1"}\n')
    run(tmp_path, "offsets", "commit", "--group", "billing", "--topic", "orders", "0=1")
    run(tmp_path, "demo", "--records", "400", "--no-airflow", "--reset")
    offsets = json.loads(run(tmp_path, "--json", "offsets", "list", "--topic", "orders").stdout)
    assert "billing" in json.dumps(offsets)


@pytest.mark.parametrize("line", ['{"key": "typo", "vaule": "x"}', '{"key": "k", "value": "v", "parttion": 1}'])
def test_produce_refuses_an_unknown_field_and_writes_nothing(tmp_path: Path, line: str) -> None:
    run(tmp_path, "topics", "create", "cdc", "--config", "cleanup.policy=compact")
    good = '{"key": "a", "value": "1"}\n'
    proc = run(tmp_path, "produce", "--topic", "cdc", "--partition", "0", stdin=good + line + "\n", ok=False)
    field = json.loads(line).keys() - {"key", "value"}
    assert proc.returncode == 2 and f"unknown field '{next(iter(field))}'" in proc.stderr
    assert "did you mean" in proc.stderr and "nothing was written" in proc.stderr
    assert run(tmp_path, "consume", "--topic", "cdc", "--partition", "0").stdout == ""


def test_the_lake_uri_variable_stands_in_for_lake_without_a_config_file(tmp_path: Path) -> None:
    """Issue #46: a container that sets LAKECLEANER_LAKE_URI and has no config file got "no config file"."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    env = {**os.environ, "LAKECLEANER_LAKE_URI": f"file://{tmp_path / 'lake'}"}
    command = [sys.executable, "-m", "lakecleaner.cli"]
    created = subprocess.run([*command, "topics", "create", "t"], cwd=cwd, env=env, capture_output=True, text=True)
    assert created.returncode == 0, created.stderr
    assert (tmp_path / "lake" / "topics" / "t" / "topic.json").is_file()
    listed = subprocess.run([*command, "--json", "topics", "list"], cwd=cwd, env=env, capture_output=True, text=True)
    assert json.loads(listed.stdout) == ["t"]


def test_json_is_taken_after_the_command_as_before_it(tmp_path: Path) -> None:
    run(tmp_path, "topics", "create", "t")
    assert json.loads(run(tmp_path, "status", "--json").stdout) == json.loads(run(tmp_path, "--json", "status").stdout)
    assert json.loads(run(tmp_path, "topics", "list", "--json").stdout) == ["t"]


def test_if_not_exists_says_the_topic_exists_and_changes_nothing(tmp_path: Path) -> None:
    assert "created topic t" in run(tmp_path, "topics", "create", "t", "--if-not-exists").stdout
    again = run(tmp_path, "topics", "create", "t", "--if-not-exists", "--partitions", "5")
    assert "topic t exists (1 partition(s)); nothing was changed" in again.stdout
    assert json.loads(run(tmp_path, "--json", "topics", "create", "t", "--if-not-exists").stdout)["result"] == "exists"


def test_produce_errors_are_one_error_line_and_exit_2(tmp_path: Path) -> None:
    run(tmp_path, "topics", "create", "t")
    proc = run(tmp_path, "produce", "--topic", "t", stdin='{"key": "a", "timestamp": "soon"}\n', ok=False)
    assert proc.returncode == 2 and proc.stderr.startswith("error: line 1: field timestamp")
    assert "ISO 8601" in proc.stderr


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (("produce",), "error: missing option '--topic'; see `lakecleaner produce --help`"),
        (("status", "--bogus"), "error: no such option '--bogus'; see `lakecleaner status --help`"),
        (("topics", "bogus"), "error: no such command 'bogus'; see `lakecleaner topics --help`"),
        (("consume", "--topic", "t", "--partition", "x"), "error: invalid value for '--partition': 'x' is not"),
        (("consume", "--topic", "nope", "--partition", "0"), "error: "),
    ],
)
def test_a_usage_error_is_one_error_line_naming_the_commands_help_and_exit_2(
    tmp_path: Path, args: tuple[str, ...], line: str
) -> None:
    """Issue #51: click's own usage errors follow the CLI's convention, not click's three-line block."""
    proc = run(tmp_path, *args, ok=False)
    assert proc.returncode == 2 and proc.stderr.startswith(line), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Usage:" not in proc.stderr


def test_configuration_errors_start_with_an_error_line_and_list_every_problem(tmp_path: Path) -> None:
    config = tmp_path / "lakecleaner.yaml"
    config.write_text(
        f"lake: {{uri: 'file://{tmp_path / 'lake'}'}}\n"
        "topics: {a: {config: {retention.ms: -5, min.cleanable.dirty.ratio: 3}}}\n"
    )
    command = [sys.executable, "-m", "lakecleaner.cli", "--config", str(config), "status"]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=60)
    first, *problems = proc.stderr.splitlines()
    assert proc.returncode == 2 and first == "error: configuration: 2 problems:"
    assert [p.split(": ")[-2] for p in problems] == ["min.cleanable.dirty.ratio=3", "retention.ms=-5"]


def test_a_command_group_alone_prints_its_help(tmp_path: Path) -> None:
    proc = run(tmp_path, "topics", ok=False)
    assert proc.returncode == 2 and proc.stderr.startswith("Usage: lakecleaner topics") and "create" in proc.stderr


def test_produce_takes_iso_8601_timestamps_as_every_other_time(tmp_path: Path) -> None:
    run(tmp_path, "topics", "create", "t")
    line = '{"key": "a", "value": "1", "timestamp": "2026-11-27T10:00:00Z"}\n'
    said = run(tmp_path, "produce", "--topic", "t", stdin=line).stdout
    assert said.strip() == "appended 1 records to t (partition 0: 1)"  # words, not a Python dict
    record = json.loads(run(tmp_path, "consume", "--topic", "t", "--partition", "0").stdout)
    assert record["timestamp"] == 1_795_773_600_000


def test_consume_says_when_values_are_not_text_and_names_base64(tmp_path: Path) -> None:
    lake = Lake.open(f"file://{tmp_path}")
    lake.create_topic("t").partition(0).append([Record(b"k", b"\xff\xfe binary", 1), Record(b"j", b"text", 2)])
    proc = run(tmp_path, "consume", "--topic", "t", "--partition", "0")
    assert "1 record(s) (first at offset 0) hold bytes that are not UTF-8" in proc.stderr and "--base64" in proc.stderr
    clean = run(tmp_path, "consume", "--topic", "t", "--partition", "0", "--base64")
    assert clean.stderr == "" and json.loads(clean.stdout.splitlines()[0])["value"] == "//4gYmluYXJ5"


def test_a_dry_run_of_retention_says_so_in_its_title(tmp_path: Path) -> None:
    run(tmp_path, "topics", "create", "t", "--config", "retention.ms=1000", "--config", "segment.ms=1")
    run(tmp_path, "produce", "--topic", "t", "--generate", "--records", "50", "--keys", "5")
    dry = run(tmp_path, "retain", "--topic", "t", "--now", "2099-01-01T00:00:00Z", "--dry-run").stdout
    assert "DRY RUN" in dry and "would delete" in dry and "nothing was deleted" in dry
    real = run(tmp_path, "retain", "--topic", "t", "--now", "2099-01-01T00:00:00Z").stdout
    assert "DRY RUN" not in real


def test_airflow_env_prints_the_exports_airflows_own_commands_need_and_no_secret(tmp_path: Path) -> None:
    config = tmp_path / "lakecleaner.yaml"
    config.write_text(f"lake: {{uri: 'file://{tmp_path / 'lake'}'}}\n")
    secret = '{"conn_type": "spark", "host": "spark://m:7077", "password": "hunter2"}'
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "lakecleaner.cli",
            "--config",
            str(config),
            "airflow",
            "env",
            "--home",
            str(tmp_path / "home"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "AIRFLOW_CONN_SPARK_LAKECLEANER": secret},
    )
    assert proc.returncode == 0, proc.stderr
    exports = dict(line.removeprefix("export ").split("=", 1) for line in proc.stdout.splitlines())
    assert exports["AIRFLOW_HOME"] == str(tmp_path / "home") and exports["LAKECLEANER_CONFIG"] == str(config)
    assert exports["AIRFLOW__CORE__DAGS_FOLDER"] == str((Path.cwd() / "dags").resolve())  # make airflow-ui's
    assert "hunter2" not in proc.stdout
    sourced = subprocess.run(
        [
            "bash",
            "-c",
            f'eval "$({sys.executable} -m lakecleaner.cli --config {config} airflow env)"; echo $AIRFLOW_HOME',
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert sourced.stdout.strip() == str((Path.cwd() / "airflow_home").resolve())  # the default: make airflow-ui's


def test_airflow_dag_files_writes_the_files_and_removes_those_of_another_count(tmp_path: Path) -> None:
    """Issue 50: `lakecleaner airflow dag-files DIR --count N` writes N files, and run again with
    another N removes the old ones (a DAG in two files would be Airflow's duplicate-DAG error);
    `--count auto` (the default) counts the config's topics; the old `--files N` still works, with
    a one-line deprecation warning."""
    folder = tmp_path / "dags"
    first = run(tmp_path, "--json", "airflow", "dag-files", str(folder), "--count", "3")
    assert json.loads(first.stdout)["written"] == [f"lakecleaner_topics_{i}_of_3.py" for i in range(3)]
    second = run(tmp_path, "airflow", "dag-files", str(folder), "--count", "12").stdout
    assert f"12 DAG files in {folder}" in second and "removed lakecleaner_topics_0_of_3.py" in second
    assert sorted(p.name for p in folder.iterdir()) == [f"lakecleaner_topics_{i:02d}_of_12.py" for i in range(12)]
    refused = run(tmp_path, "airflow", "dag-files", str(folder), "--count", "0", ok=False)
    assert refused.returncode == 2 and "--count" in refused.stderr and "auto" in refused.stderr
    auto = run(tmp_path, "--json", "airflow", "dag-files", str(folder))
    assert json.loads(auto.stdout)["written"] == ["lakecleaner_topics_0_of_1.py"]  # a lake of no managed topics
    old = run(tmp_path, "airflow", "dag-files", str(folder), "--files", "2")
    assert sorted(p.name for p in folder.iterdir()) == [f"lakecleaner_topics_{i}_of_2.py" for i in range(2)]
    assert old.stderr.strip() == (
        "warning: `airflow dag-files --files N` is deprecated and will be removed in lakecleaner 0.3: use --count N"
    )
