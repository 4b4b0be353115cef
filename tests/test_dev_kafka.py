"""`lakecleaner dev kafka` (`make kafka`, issue 78): a real Kafka broker with a sample CDC topic
and a consumer group, and a config that mirrors it; the README's mirror commands run on it as a
user would run them, in a shell whose PYSPARK_PYTHON is not set."""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from lakecleaner.config import load_config
from lakecleaner.dev.kafka_sample import SampleTopic, sample_event
from lakecleaner.dev.ports import free_port
from lakecleaner.lake import Lake
from tests.support.cli_process import CLI, run_cli

pytestmark = pytest.mark.xdist_group("kafka-broker")

RECORDS, KEYS = 5_000, SampleTopic().keys
READY = "Ctrl-C stops the broker"


def start_dev_kafka(folder: Path, port: int) -> tuple[subprocess.Popen[str], list[str]]:
    """`lakecleaner dev kafka` as a user starts it; its lines up to the one saying it serves."""
    process = subprocess.Popen(
        [*CLI, "dev", "kafka", "--port", str(port), "--folder", str(folder), "--records", str(RECORDS)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    read: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [read.put(line) for line in process.stdout or ()], daemon=True).start()
    lines: list[str] = []
    deadline = time.monotonic() + 600  # the first start fetches Kafka's jars with Maven
    while not lines or READY not in lines[-1]:
        try:
            lines.append(read.get(timeout=max(0.1, deadline - time.monotonic())))
        except queue.Empty:
            process.kill()
            pytest.fail(f"dev kafka did not start: {''.join(lines)}{process.stderr.read() if process.stderr else ''}")
    return process, lines


def stop(process: subprocess.Popen[str]) -> str:
    """SIGTERM, as Ctrl-C or a service manager stops it; its stderr."""
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=90)
    assert process.returncode == 0, err
    return err


def listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def test_dev_kafka_serves_a_sample_topic_the_readmes_mirror_commands_mirror_and_compact(tmp_path: Path) -> None:
    folder, port = tmp_path / "kafka", free_port()
    process, lines = start_dev_kafka(folder, port)
    try:
        assert lines[0].strip() == f"Kafka 4.1.1 at 127.0.0.1:{port}"
        assert f"topic customers created: {RECORDS:,} records in 2 partitions" in lines[1]
        assert f"group billing committed {RECORDS // 2:,} of them" in lines[1]
        config = folder / "lakecleaner.yaml"
        tries = [line.strip() for line in lines[lines.index("try:\n") + 1 : -1]]
        assert tries[0] == f"lakecleaner --config {config} mirror --topic customers --once --batch-bytes 16384"
        without_python = {k: v for k, v in os.environ.items() if k not in {"PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"}}
        for command in tries:  # as printed: mirror, plan, compact
            done = run_cli(*command.split()[1:], env=without_python, timeout=300)
            assert done.returncode == 0, (command, done.stdout[-3000:], done.stderr[-3000:])
        lake = Lake.open(load_config(config))
        live: dict[bytes, bytes | None] = {}
        for sequence in range(RECORDS):
            key, value = sample_event(sequence, KEYS)
            live[key] = value
        read = {
            r["key"]: r["value"] for log in lake.topic("customers").partition_logs() for r in log.read().to_pylist()
        }
        ends = {log.partition: log.manifest().next_offset for log in lake.topic("customers").partition_logs()}
        assert sum(ends.values()) == RECORDS, (ends, lines)  # every record mirrored
        assert {k: v for k, v in read.items() if v is not None} == {k: v for k, v in live.items() if v is not None}
        assert sum(log.manifest().record_count for log in lake.topic("customers").partition_logs()) < RECORDS
        offsets = run_cli("--config", str(config), "--json", "offsets", "list", "--topic", "customers")
        assert offsets.returncode == 0, offsets.stderr
        assert sum(m["offset"] for m in json.loads(offsets.stdout)["minimum"].values()) == RECORDS // 2
    finally:
        err = stop(process)
    assert "Kafka stopped" in err and not listening(port)

    again, lines = start_dev_kafka(folder, port)  # the folder keeps the topic and the group
    try:
        assert f"topic customers found (from an earlier start): {RECORDS:,} records" in lines[1]
        assert f"group billing committed {RECORDS // 2:,} of them" in lines[1]
    finally:
        stop(again)
