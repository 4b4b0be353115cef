"""The engine on a Spark Connect session: pyspark's bundled Connect server, started once for the
module, and a thin client that sends it DataFrame plans. The client runs in a process of its own:
a Connect session switches pyspark into remote mode for its whole process, which would change the
classic session the other engine tests share."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest

from lakecleaner.engine import requests_for
from lakecleaner.lake import Lake
from lakecleaner.workload import WorkloadSpec, generate
from tests.engine.helpers import rows
from tests.engine.reference_model import expected_pass

CLIENT = """
import json, sys
from pyspark.sql import SparkSession
from lakecleaner.engine import EngineOptions, compact_topic, requests_for
from lakecleaner.lake import Lake
url, root, now, buffer = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
spark = SparkSession.builder.remote(url).getOrCreate()
assert type(spark).__module__.startswith("pyspark.sql.connect"), type(spark)
lake = Lake.open("file://" + root)
topic = lake.topic("changes")
requests = [r for log in topic.partition_logs() if (r := requests_for(log.manifest(), topic.config, now))]
report = compact_topic(spark, lake, "changes", requests, now, options=EngineOptions(dedupe_buffer_size=buffer))
print(json.dumps({p.partition: [p.status, p.message, p.key_buckets] for p in report.partitions}))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def connect_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = Path(pyspark.__file__).parent
    work = tmp_path_factory.mktemp("spark-connect")
    port = _free_port()
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_LOG_DIR": str(work / "logs"),
        "SPARK_PID_DIR": str(work / "pid"),
        "PYSPARK_PYTHON": sys.executable,
    }
    start = [str(home / "sbin" / "start-connect-server.sh"), "--master", "local[2]"]
    start += ["--conf", f"spark.connect.grpc.binding.port={port}", "--conf", "spark.ui.enabled=false"]
    subprocess.run(start, env=env, check=True, capture_output=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline:
                logs = "".join(p.read_text()[-2000:] for p in (work / "logs").glob("*.out"))
                pytest.fail(f"the Spark Connect server did not listen on {port} within 120 s:\n{logs}")
            time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        subprocess.run([str(home / "sbin" / "stop-connect-server.sh")], env=env, capture_output=True)


@pytest.mark.parametrize("buffer", [128 * 1024 * 1024, 16 * 1024], ids=["one-map", "key-buckets"])
def test_compaction_on_spark_connect_matches_the_reference_model(connect_url: str, tmp_path: Path, buffer: int) -> None:
    """The same engine, unchanged, on a Connect session: each partition's log is what the reference
    model says, with one map per partition and split into key buckets (the scatter step)."""
    spec = WorkloadSpec(keys=3_000, records=20_000, partitions=2, value_size=16, tombstone_share=0.1, seed=5)
    lake = Lake.open(f"file://{tmp_path}")
    topic = lake.create_topic("changes", partitions=2, config={"cleanup.policy": "compact", "segment.bytes": 100_000})
    for partition, batch in generate(spec, 2_000):
        topic.partition(partition).append(batch, now_ms=spec.start_ms)
    for log in topic.partition_logs():
        log.roll(now_ms=spec.start_ms)
    now = spec.start_ms + spec.timestamp_spread_ms + 1
    expected = {}
    for p in range(2):
        manifest = topic.partition(p).manifest()
        request = requests_for(manifest, topic.config, now)
        assert request is not None
        expected[p] = expected_pass(rows(topic, p), manifest, request.first_uncleanable_offset, topic.config, now)
    client = subprocess.run(
        [sys.executable, "-c", CLIENT, connect_url, str(tmp_path), str(now), str(buffer)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert client.returncode == 0, client.stderr[-3000:]
    outcome = json.loads(client.stdout.strip().splitlines()[-1])
    for p in range(2):
        status, message, buckets = outcome[str(p)]
        assert status == "committed", message
        assert (buckets > 1) == (buffer < 1024 * 1024)
        assert rows(lake.topic("changes"), p) == expected[p].rows


def test_the_cli_compacts_through_a_connect_server(connect_url: str, tmp_path: Path) -> None:
    """`lakecleaner compact --remote sc://…` sends the run to the server: no Spark application of
    its own, the same report."""
    spec = WorkloadSpec(keys=500, records=4_000, partitions=1, value_size=8, seed=6)
    lake = Lake.open(f"file://{tmp_path}")
    topic = lake.create_topic("changes", partitions=1, config={"cleanup.policy": "compact"})
    for partition, batch in generate(spec, 1_000):
        topic.partition(partition).append(batch, now_ms=spec.start_ms)
    topic.partition(0).roll(now_ms=spec.start_ms)
    now = spec.start_ms + spec.timestamp_spread_ms + 1
    command = [sys.executable, "-m", "lakecleaner.cli", "--lake", f"file://{tmp_path}", "--json", "compact"]
    command += ["--topic", "changes", "--now", str(now), "--remote", connect_url]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert [p["status"] for p in report["partitions"]] == ["committed"]
    assert report["partitions"][0]["stats"]["records_written"] == 500
    assert len(rows(lake.topic("changes"))) == 500


def test_the_gate_stops_a_wrong_output_on_connect(connect_url: str, tmp_path: Path) -> None:
    """A staged value changed behind the engine's back (a fault hook in the client process): on a
    Connect session, where the gate's Great Expectations run in a Python worker of the server, that
    partition fails the gate with the offending record named, and the other commits."""
    spec = WorkloadSpec(keys=200, records=2_000, partitions=2, value_size=8, seed=7)
    root = tmp_path / "lake"
    lake = Lake.open(f"file://{root}")
    topic = lake.create_topic("changes", partitions=2, config={"cleanup.policy": "compact"})
    for partition, batch in generate(spec, 500):
        topic.partition(partition).append(batch, now_ms=spec.start_ms)
    for log in topic.partition_logs():
        log.roll(now_ms=spec.start_ms)
    before = rows(topic, 0)
    config = tmp_path / "lakecleaner.yaml"
    config.write_text(f"lake:\n  uri: file://{root}\n")
    env = {
        **os.environ,
        "LAKECLEANER_CONFIG": str(config),
        "LAKECLEANER_FAULT_HOOKS": "engine.after_staging=tests.fault_hooks:tamper_partition_0_staged_output",
        "LAKECLEANER_TEST_TAMPER_TOPIC": "changes",
    }
    now = spec.start_ms + spec.timestamp_spread_ms + 1
    client = subprocess.run(
        [sys.executable, "-c", CLIENT, connect_url, str(root), str(now), str(128 * 1024 * 1024)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert client.returncode == 0, client.stderr[-3000:]
    outcome = json.loads(client.stdout.strip().splitlines()[-1])
    assert outcome["0"][0] == "failed-quality"
    assert "every output record is the input record at its offset, unchanged" in outcome["0"][1]
    assert outcome["1"][0] == "committed"
    assert rows(lake.topic("changes"), 0) == before
