"""`lakecleaner mirror` (issue 47) against librdkafka's mock cluster: every partition of the lake
equals what a Kafka consumer reads, byte for byte and at the same offsets; runs resume at the
lake's log end; a kill -9 then a rerun loses nothing and repeats nothing; a cluster that does
not answer is one clear error and nothing is written."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import KafkaError

from lakecleaner.config import load_config, parse_config
from lakecleaner.errors import KafkaUnavailable, MirrorMismatch
from lakecleaner.io.kafka.clients import retried
from lakecleaner.kafka.mirror import MirrorLimits, mirror_topic
from lakecleaner.lake import Lake
from tests.dashboard.conftest import Scene
from tests.dashboard.test_app import as_user, client
from tests.support import cli_process
from tests.support.bench_loader import bench_module
from tests.support.kafka_mock import MOCK_PARTITIONS, KafkaRecord, MockCluster

T0 = 1_790_000_000_000


def write_config(tmp_path: Path, bootstrap: str, topic: str, **topic_settings: Any) -> Path:
    """A config mirroring `topic` from cluster `main`; cleanup.policy is the file's (delete unless
    given), so the mock cluster, which does not answer DescribeConfigs, is not asked for it."""
    topic_settings["config"] = {"cleanup.policy": "delete", **topic_settings.get("config", {})}
    config = {
        "lake": {"uri": f"file://{tmp_path / 'lake'}"},
        "kafka": {"clusters": {"main": {"bootstrap.servers": bootstrap}}},
        "topics": {topic: {"mirror": {"cluster": "main"}, **topic_settings}},
    }
    path = tmp_path / "lakecleaner.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def sample(count: int, start: int = 0) -> list[dict[str, Any]]:
    """Records of every shape: keys, a null value (a tombstone) every 7th, repeated and empty
    headers, explicit timestamps, spread over the mock's partitions."""
    out = []
    for i in range(start, start + count):
        out.append(
            {
                "key": f"key-{i % 13}".encode(),
                "value": None if i % 7 == 3 else bytes([i % 256]) * (i % 50) + b"\xff\x00value",
                "headers": [("h", b"1"), ("h", None), ("trace", f"{i}".encode())] if i % 2 else [],
                "timestamp": T0 + i,
                "partition": i % MOCK_PARTITIONS,
            }
        )
    return out


def lake_view(lake: Lake, topic: str) -> dict[int, list[KafkaRecord]]:
    out = {}
    for p in range(lake.topic(topic).partitions):
        rows = lake.topic(topic).partition(p).read().to_pylist()
        out[p] = [
            KafkaRecord(
                p,
                r["offset"],
                r["key"],
                r["value"],
                tuple((h["key"], h["value"]) for h in r["headers"] or []),
                r["timestamp"],
            )
            for r in rows
        ]
    return out


def test_mirror_once_gives_a_lake_equal_to_the_kafka_consumers_view_and_resumes_at_its_log_end(
    tmp_path: Path, kafka_mock: MockCluster
) -> None:
    topic = kafka_mock.new_topic()
    kafka_mock.produce(topic, sample(400))
    lake = Lake.open(load_config(write_config(tmp_path, kafka_mock.bootstrap, topic)))
    first = mirror_topic(lake, topic, MirrorLimits(once=True, batch_bytes=500))
    assert first.created and first.stopped == "caught up" and first.records == 400
    assert lake_view(lake, topic) == kafka_mock.read_all(topic)
    appends = {p: lake.topic(topic).partition(p).manifest().version for p in range(MOCK_PARTITIONS)}
    assert min(appends.values()) > 5  # bounded batches: several appends per partition

    again = mirror_topic(lake, topic, MirrorLimits(once=True))
    assert again.records == 0 and not again.created  # nothing twice

    kafka_mock.produce(topic, sample(101, start=400))
    third = mirror_topic(lake, topic, MirrorLimits(once=True))
    assert third.records == 101
    assert [p.start_offset for p in third.partitions] == [p.next_offset for p in first.partitions]
    assert lake_view(lake, topic) == kafka_mock.read_all(topic)
    assert all(p.lag == 0 for p in third.partitions)


def test_max_records_ends_a_run_and_the_next_one_goes_on_from_there(tmp_path: Path, kafka_mock: MockCluster) -> None:
    topic = kafka_mock.new_topic()
    kafka_mock.produce(topic, sample(200))
    lake = Lake.open(load_config(write_config(tmp_path, kafka_mock.bootstrap, topic)))
    report = mirror_topic(lake, topic, MirrorLimits(max_records=50))
    assert report.stopped == "max records" and report.records == 50
    assert sum(p.lag for p in report.partitions) == 150
    mirror_topic(lake, topic, MirrorLimits(once=True))
    assert lake_view(lake, topic) == kafka_mock.read_all(topic)


def test_a_record_larger_than_segment_bytes_is_mirrored(tmp_path: Path, kafka_mock: MockCluster) -> None:
    topic = kafka_mock.new_topic()
    big = [{"key": b"big", "value": os.urandom(600_000), "partition": 0, "timestamp": T0}]
    kafka_mock.produce(topic, sample(8) + big + sample(8, start=8))
    config = write_config(tmp_path, kafka_mock.bootstrap, topic, config={"segment.bytes": 100_000})
    lake = Lake.open(load_config(config))
    mirror_topic(lake, topic, MirrorLimits(once=True))
    assert lake_view(lake, topic) == kafka_mock.read_all(topic)
    assert len(lake.topic(topic).partition(0).manifest().segments) > 1


def test_a_lake_topic_with_more_partitions_than_kafkas_is_refused_and_nothing_is_written(
    tmp_path: Path, kafka_mock: MockCluster
) -> None:
    topic = kafka_mock.new_topic()
    kafka_mock.produce(topic, sample(10))
    lake = Lake.open(load_config(write_config(tmp_path, kafka_mock.bootstrap, topic)))
    lake.create_topic(topic, partitions=MOCK_PARTITIONS + 2)
    with pytest.raises(MirrorMismatch, match=f"has {MOCK_PARTITIONS} partitions but lake topic"):
        mirror_topic(lake, topic, MirrorLimits(once=True))
    assert all(m.next_offset == 0 for m in lake.topic(topic).manifests().values())


def test_a_lake_topic_with_fewer_partitions_grows_to_kafkas(tmp_path: Path, kafka_mock: MockCluster) -> None:
    topic = kafka_mock.new_topic()
    kafka_mock.produce(topic, sample(40))
    lake = Lake.open(load_config(write_config(tmp_path, kafka_mock.bootstrap, topic)))
    lake.create_topic(topic, partitions=2)
    report = mirror_topic(lake, topic, MirrorLimits(once=True))
    assert report.added_partitions == MOCK_PARTITIONS - 2 and lake.topic(topic).partitions == MOCK_PARTITIONS
    assert lake_view(lake, topic) == kafka_mock.read_all(topic)


def run_cli(config: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return cli_process.run_cli("--config", str(config), *args, timeout=timeout)


def test_an_unreachable_cluster_is_retried_then_one_clear_error_and_nothing_is_written(tmp_path: Path) -> None:
    """The metadata request is asked for --give-up-seconds (again while time is left, a warning
    saying so once), then one error line names the cluster and the fix."""
    config = write_config(tmp_path, "127.0.0.1:1", "orders")
    started = time.monotonic()
    done = run_cli(config, "mirror", "--topic", "orders", "--once", "--give-up-seconds", "3")
    assert done.returncode == 2, done.stderr
    assert time.monotonic() - started >= 3
    *warnings, error = done.stderr.strip().splitlines()
    assert error.startswith("error: Kafka cluster main (127.0.0.1:1) did not answer"), done.stderr
    assert all("librdkafka retries, the run waits up to 3 s" in w for w in warnings) and len(warnings) <= 1
    assert not (tmp_path / "lake").exists() or not Lake.open(load_config(config)).list_topics()
    with pytest.raises(KafkaUnavailable):
        mirror_topic(Lake.open(load_config(config)), "orders", MirrorLimits(once=True, give_up_s=1))


def test_the_cli_mirrors_and_a_kill_9_then_a_rerun_leaves_every_record_once(
    tmp_path: Path, kafka_mock: MockCluster
) -> None:
    topic = kafka_mock.new_topic()
    kafka_mock.produce(topic, sample(3000))
    config = write_config(tmp_path, kafka_mock.bootstrap, topic)
    for delay in (0.3, 0.8, 1.5):
        process = subprocess.Popen(
            [*cli_process.CLI, "--config", str(config), "mirror", "--topic", topic, "--batch-bytes", "3000"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(delay)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    done = run_cli(config, "--json", "mirror", "--topic", topic, "--once")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["stopped"] == "caught up"
    assert lake_view(Lake.open(load_config(config)), topic) == kafka_mock.read_all(topic)


def test_without_once_a_sigterm_appends_what_it_holds_and_exits_0(tmp_path: Path, kafka_mock: MockCluster) -> None:
    topic = kafka_mock.new_topic()
    kafka_mock.produce(topic, sample(100))
    config = write_config(tmp_path, kafka_mock.bootstrap, topic)
    process = subprocess.Popen(
        [*cli_process.CLI, "--config", str(config), "--json", "mirror", "--topic", topic],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lake = Lake.open(load_config(config))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        # topic.json is written before its partitions' folders: read those that exist so far
        listed = topic in lake.list_topics()
        if listed and sum(m.next_offset for m in lake.topic(topic).read_manifests().manifests.values()) >= 100:
            break
        time.sleep(0.2)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert json.loads(out)["stopped"] == "signal"
    assert lake_view(lake, topic) == kafka_mock.read_all(topic)


def test_a_cli_run_past_its_timeout_fails_showing_where_its_threads_were(
    tmp_path: Path, kafka_mock: MockCluster
) -> None:
    """The tests' CLI runner (tests/support/cli_process.py) on a run that does not end by itself: a mirror
    without --once."""
    topic = kafka_mock.new_topic()
    kafka_mock.produce(topic, sample(10))
    config = write_config(tmp_path, kafka_mock.bootstrap, topic)
    with pytest.raises(AssertionError) as failed:
        run_cli(config, "mirror", "--topic", topic, timeout=8)
    shown = str(failed.value)
    assert "ran past 8 s" in shown and "Fatal Python error: Aborted" in shown
    assert "Current thread" in shown and re.search(r'File ".*/lakecleaner/[\w/]+\.py", line \d+', shown), shown


TWO_CLUSTERS = {"clusters": {"main": {"bootstrap.servers": "h:1"}, "other": {"bootstrap.servers": "h:2"}}}


@pytest.mark.parametrize(
    ("kafka", "offsets", "message"),
    [
        ({"clusters": {"main": {"sasl.password": "x"}}}, None, "kafka.clusters.main: bootstrap.servers is missing"),
        ({"clusters": {"main": {"bootstrap.servers": "h:1", "group.id": "g"}}}, None, "group.id: set by lakecleaner"),
        ({"clusters": {"other": {"bootstrap.servers": "h:1"}}}, None, "orders.mirror.cluster='main': no such cluster"),
        (TWO_CLUSTERS, {"cluster": "other"}, "consumer_offsets.cluster='other': the topic mirrors cluster main"),
        (TWO_CLUSTERS, {"cluster": "main", "topic": "orders"}, "the topic mirrors Kafka topic src-orders"),
    ],
)
def test_the_kafka_config_is_validated_up_front(kafka: dict[str, Any], offsets: Any, message: str) -> None:
    from lakecleaner.errors import ConfigError

    topic = {"mirror": {"cluster": "main", "topic": "src-orders"}, "consumer_offsets": offsets}
    with pytest.raises(ConfigError, match=message):
        parse_config({"kafka": kafka, "topics": {"orders": topic}})


def test_consumed_retention_reads_the_groups_of_the_kafka_topic_a_lake_topic_takes_its_records_from() -> None:
    """The mirrored topic's by default; `consumer_offsets.topic` for one that is not mirrored (an
    adopted archive); the lake topic's own name only when neither says (issue 74)."""
    topics = {
        "mirrored": {"mirror": {"cluster": "main", "topic": "src-a"}, "consumer_offsets": {"cluster": "main"}},
        "archived": {"consumer_offsets": {"cluster": "main", "topic": "src-b"}},
        "plain": {"consumer_offsets": {"cluster": "main"}},
    }
    config = parse_config({"kafka": TWO_CLUSTERS, "topics": topics})
    assert {name: spec.consumer_offsets.topic for name, spec in config.topics.items() if spec.consumer_offsets} == {
        "mirrored": "src-a",
        "archived": "src-b",
        "plain": "plain",
    }


def test_a_clusters_secrets_are_not_in_its_repr() -> None:
    config = parse_config(
        {"kafka": {"clusters": {"main": {"bootstrap.servers": "h:1", "sasl.password": "hunter2-secret"}}}}
    )
    assert "hunter2" not in repr(config) and config.kafka_clusters["main"].properties["sasl.password"]


def test_consumed_retention_follows_the_groups_the_cluster_keeps(tmp_path: Path, kafka_mock: MockCluster) -> None:
    """KIP-68 with `consumer_offsets: {cluster: main}`: a segment goes once every declared group
    committed past it on the cluster; a group the cluster does not know holds everything back."""
    topic = kafka_mock.new_topic()
    kafka_mock.produce(
        topic, [{"key": f"k{i}".encode(), "value": b"v" * 30, "partition": 0, "timestamp": T0} for i in range(60)]
    )
    settings: dict[str, Any] = {
        "consumer_offsets": {"cluster": "main"},
        "config": {"retention.ms": 100 * 3_600_000, "retention.commitoffset.ms": 3_600_000, "segment.bytes": 1_000},
    }
    lake = Lake.open(
        load_config(
            write_config(tmp_path, kafka_mock.bootstrap, topic, consumer_groups=["fast", "slow", "ghost"], **settings)
        )
    )
    mirror_topic(lake, topic, MirrorLimits(once=True, batch_bytes=400))
    log = lake.topic(topic).partition(0)
    bases = [s.base_offset for s in log.manifest().segments]
    assert len(bases) > 4
    kafka_mock.commit_offsets("fast", topic, {0: 60})
    kafka_mock.commit_offsets("slow", topic, {0: bases[2]})

    from lakecleaner.retention import retain_topic

    retain_topic(lake, topic, T0 + 2 * 3_600_000)  # "ghost" has no offset on the cluster: unknown
    assert [s.base_offset for s in log.manifest().segments] == bases
    position = lake.offsets.consumed_positions(topic, [0])[0]
    assert position.offset is None and "group ghost has no committed offset" in str(position.reason)

    config = write_config(tmp_path, kafka_mock.bootstrap, topic, consumer_groups=["fast", "slow"], **settings)
    lake = Lake.open(load_config(config))
    assert lake.offsets.consumed_positions(topic, [0])[0].offset == bases[2]
    retain_topic(lake, topic, T0 + 2 * 3_600_000)
    assert [s.base_offset for s in lake.topic(topic).partition(0).manifest().segments] == bases[2:]
    listed = run_cli(config, "--json", "offsets", "list", "--topic", topic)
    assert listed.returncode == 0, listed.stderr
    shown = json.loads(listed.stdout)
    source = f"Kafka cluster main ({kafka_mock.bootstrap}), topic {topic}"
    assert shown["source"] == source and shown["minimum"]["0"]["offset"] == bases[2]
    assert {(r["group"], r["offset"]) for r in shown["offsets"] if r["partition"] == 0} == {
        ("fast", 60),
        ("slow", bases[2]),
    }
    dashboard = client(Scene(config, T0))
    page = dashboard.get(f"/topics/{topic}/partitions/0", headers=as_user("viewer")).text
    assert f"Committed offsets read from {source}." in page
    api = dashboard.get(f"/api/topics/{topic}/partitions/0", headers=as_user("viewer")).json()
    assert api["offsets_source"] == source and api["consumer_groups"] == {"fast": 60, "slow": bases[2]}


def test_a_cluster_that_does_not_answer_makes_its_groups_offsets_unknown(tmp_path: Path) -> None:
    config = write_config(
        tmp_path, "127.0.0.1:1", "orders", consumer_groups=["billing"], consumer_offsets={"cluster": "main"}
    )
    lake = Lake.open(load_config(config))
    lake.create_topic("orders")
    position = lake.offsets.consumed_positions("orders", [0])[0]
    assert position.offset is None and "Kafka cluster main (127.0.0.1:1) did not answer" in str(position.reason)


@pytest.mark.parametrize(
    ("error", "waited_out"),
    [
        (KafkaError(KafkaError._TRANSPORT), True),
        (KafkaError(KafkaError._ALL_BROKERS_DOWN), True),
        (KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION), True),
        (KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED), False),
        (KafkaError(KafkaError.SASL_AUTHENTICATION_FAILED), False),
        (KafkaError(KafkaError._FATAL, fatal=True), False),
    ],
)
def test_errors_librdkafka_retries_are_waited_out_and_the_rest_end_the_run(error: KafkaError, waited_out: bool) -> None:
    assert retried(error) is waited_out


def test_the_mirror_benchmark_runs_on_the_mock_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    """bench/mirror.py at a few thousand records, as a smoke check (no timing assertion): every
    reader takes every record once, and the table and ratios are printed."""
    module = bench_module("mirror")
    module.main(["--broker", "mock", "--records", "3000", "--round", "1500", "--runs", "1"])
    printed = capsys.readouterr().out
    assert "| lakecleaner mirror --once |" in printed and "mirror / Parquet floor records/s:" in printed
    assert re.search(r"identity check: [\d.]+ ms a run", printed), printed


def test_a_dag_runs_mirror_reports_what_kafka_deleted_before_it_was_mirrored_on_the_topic_page(
    tmp_path: Path, kafka_mock: MockCluster
) -> None:
    """The mock cluster keeps about 5 MB a partition: 6 MB more after a mirror moves its log start
    past the lake's end. The DAG's mirror task reports the gap, run.json keeps it, and the topic's
    dashboard page shows it (issue 74)."""
    from lakecleaner.orchestration import tasks

    topic = kafka_mock.new_topic()
    kafka_mock.produce(topic, [{"key": b"k", "value": b"v", "partition": 0, "timestamp": T0 + i} for i in range(5)])
    path = write_config(tmp_path, kafka_mock.bootstrap, topic)
    config = load_config(path)
    mirror_topic(Lake.open(config), topic, MirrorLimits(once=True))
    big = [{"key": b"k", "value": os.urandom(100_000), "partition": 0, "timestamp": T0 + i} for i in range(60)]
    kafka_mock.produce(topic, big)
    report = tasks.mirror(config, topic, "run-gap")
    (gap,) = report["deleted_before_mirrored"]
    assert gap["partition"] == 0 and gap["from"] == 5 and gap["to"] >= 5
    first_kept = lake_view(Lake.open(config), topic)[0][5].offset
    assert first_kept == gap["to"] + 1  # the lake goes on at Kafka's log start
    parts = tasks.gather(config, topic, "run-gap", {"mirror": tasks.step_digest(report, report["location"])})
    summary = tasks.summarise(config, topic, "run-gap", parts)
    assert summary["mirror"]["deleted_before_mirrored"] == [gap]
    page = client(Scene(path, T0)).get(f"/topics/{topic}", headers=as_user("viewer")).text
    assert f"partition 0: offsets 5..{gap['to']} were deleted in Kafka before they were mirrored" in page
