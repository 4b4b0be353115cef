"""What a new user meets first (issue 78): commands that only read leave no trace, and every error
is one line with exit 2 for bad input, a file:line:column for YAML, a did-you-mean for a topic,
and an object on stdout under `--json`."""

from __future__ import annotations

import json
from pathlib import Path

from lakecleaner.lake import Lake
from lakecleaner.log.records import Record
from tests.support.cli_process import run_cli


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under `root` with its size and modification time."""
    return {
        str(path.relative_to(root)): (path.stat().st_size, path.stat().st_mtime_ns)
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def test_commands_that_only_read_leave_the_lake_as_it_was(tmp_path: Path) -> None:
    lake_dir = tmp_path / "lake"
    lake = Lake.open(f"file://{lake_dir}")
    log = lake.create_topic("orders", 1, {"cleanup.policy": "compact"}).partition(0)
    log.append([Record(f"k{i % 3}".encode(), b"v", 1000 + i) for i in range(9)], now_ms=2000)
    log.roll(now_ms=2000)
    base = ["--lake", f"file://{lake_dir}"]
    reading = [
        ("topics", "list"),
        ("topics", "describe", "orders"),
        ("status", "--topic", "orders"),
        ("plan", "--topic", "orders", "--now", "3000"),
        ("consume", "--topic", "orders", "--partition", "0"),
        ("offsets", "list", "--topic", "orders"),
        ("retain", "--topic", "orders", "--dry-run"),
        ("gc", "--topic", "orders", "--dry-run"),
        ("audit", "key", "--topic", "orders", "--key", "k1"),
        ("audit", "topic", "--topic", "orders"),
    ]
    before = _tree(lake_dir)
    for args in reading:
        done = run_cli(*base, *args, cwd=tmp_path)
        assert done.returncode in (0, 1), (args, done.stderr)
        assert _tree(lake_dir) == before, f"`lakecleaner {' '.join(args)}` changed the lake"


def test_a_missing_lake_or_source_folder_is_said_and_not_made(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-lake"
    done = run_cli("--lake", f"file://{missing}", "consume", "--topic", "orders", "--partition", "0", cwd=tmp_path)
    assert done.returncode == 2 and "topic orders does not exist" in done.stderr
    typo = tmp_path / "sink-typo"
    adopt = run_cli(
        "--lake", f"file://{missing}", "adopt", "connect", "--topic", "orders", "--from", f"file://{typo}",
        "--dry-run", cwd=tmp_path,
    )  # fmt: skip
    assert adopt.returncode == 2 and "holds no Kafka Connect S3 sink file of topic orders" in adopt.stderr
    assert not missing.exists() and not typo.exists()


def test_errors_are_one_line_exit_2_with_json_and_where_the_yaml_breaks(tmp_path: Path) -> None:
    config = tmp_path / "broken" / "lakecleaner.yaml"
    config.parent.mkdir()
    config.write_text('lake:\n  uri: "file:///tmp/x\ntopics: [\n')
    broken = run_cli("--config", str(config), "--json", "topics", "list", cwd=tmp_path)
    assert broken.returncode == 2 and len(broken.stderr.strip().splitlines()) == 1
    assert broken.stderr.startswith(f"error: {config}:4:1: ") and "<unicode string>" not in broken.stderr
    assert json.loads(broken.stdout) == {"error": broken.stderr.strip().removeprefix("error: "), "exit": 2}

    lake = f"file://{tmp_path / 'lake'}"
    assert run_cli("--lake", lake, "topics", "create", "customers-cdc", cwd=tmp_path).returncode == 0
    misspelt = run_cli("--lake", lake, "status", "--topic", "customers_cdc", "--json", cwd=tmp_path)
    assert misspelt.returncode == 2 and "did you mean customers-cdc?" in misspelt.stderr
    assert json.loads(misspelt.stdout)["exit"] == 2

    init_dir = tmp_path / "init"
    init_dir.mkdir()
    assert run_cli("init", cwd=init_dir).returncode == 0
    again = run_cli("init", cwd=init_dir)
    assert again.returncode == 2 and again.stderr.startswith("error: ") and "exists" in again.stderr
    unknown = run_cli("--lake", lake, "status", "--bogus", "--json", cwd=tmp_path)
    assert unknown.returncode == 2 and json.loads(unknown.stdout)["exit"] == 2


def test_iceberg_status_reads_and_says_a_table_not_made_yet_without_making_it(tmp_path: Path) -> None:
    """`iceberg status` made the embedded catalog, the lake's id and both tables of every topic it
    was asked about; it reports them as not made yet, and the next sync makes them."""
    lake_dir = tmp_path / "lake"
    config = tmp_path / "lakecleaner.yaml"
    config.write_text(
        f"lake: {{uri: 'file://{lake_dir}'}}\niceberg: {{enabled: true}}\n"
        "topics:\n  orders: {partitions: 1, config: {cleanup.policy: compact}}\n"
    )
    lake = Lake.open(f"file://{lake_dir}")
    lake.create_topic("orders", 1, {"cleanup.policy": "compact"}).partition(0).append([Record(b"k", b"v", 1000)])
    before = _tree(lake_dir)
    reading = [
        ("status",),
        ("plan", "--all"),
        ("audit", "key", "--topic", "orders", "--key", "k"),
        ("audit", "topic", "--topic", "orders"),
        ("audit", "lake"),
        ("iceberg", "status"),
    ]
    for args in reading:
        done = run_cli("--config", str(config), *args, cwd=tmp_path)
        assert done.returncode in (0, 1), (args, done.stderr)
        assert _tree(lake_dir) == before, f"`lakecleaner {' '.join(args)}` changed the lake"
    status = run_cli("--config", str(config), "--json", "iceberg", "status", cwd=tmp_path)
    assert status.returncode == 1, status.stderr
    (orders,) = json.loads(status.stdout)["topics"]
    assert orders["not_made"] == ["lakecleaner.orders", "lakecleaner.orders_latest"] and not orders["in_step"]
    assert orders["missing_files"] == 1
    assert _tree(lake_dir) == before  # no catalog.db, no lake id, no table
    synced = run_cli("--config", str(config), "iceberg", "sync", cwd=tmp_path)
    assert synced.returncode == 0, synced.stderr
    made = _tree(lake_dir)
    status = run_cli("--config", str(config), "--json", "iceberg", "status", cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["topics"][0]["not_made"] == []
    audit = run_cli("--config", str(config), "audit", "key", "--topic", "orders", "--key", "k", cwd=tmp_path)
    assert audit.returncode in (0, 1), audit.stderr
    assert _tree(lake_dir) == made  # the tables are read, not claimed again
