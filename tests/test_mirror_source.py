"""A mirror that knows its source (issue 74), against a real Apache Kafka broker (KRaft): a topic
deleted and created again is refused with nothing written, then followed after `--restart-from-kafka`;
consumed retention of a renamed mirror reads the groups of the Kafka topic it mirrors, not of one
that has the lake topic's name; a damaged partition, a keyless record on a compacted lake topic and
records Kafka deleted before they were mirrored each stop or mark one partition while the others are
mirrored; a wrong SASL password is named as one; every other writer is refused."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from lakecleaner.config import load_config
from lakecleaner.dev.kafka_broker import KafkaBroker
from lakecleaner.errors import WriterRefused
from lakecleaner.kafka.mirror import MirrorLimits, mirror_topic
from lakecleaner.lake import Lake
from lakecleaner.log.records import Record
from lakecleaner.retention import retain_topic
from tests.support import cli_process
from tests.support.kafka_mock import read_committed
from tests.support.kafka_real import SASL_PASSWORD, SASL_USER, SMALL_BATCHES, with_small_fetches
from tests.test_kafka_broker import create_topic, produce

pytestmark = pytest.mark.xdist_group("kafka-broker")

HOUR = 3_600_000


def config_for(tmp_path: Path, bootstrap: str, lake_topic: str, **settings: Any) -> Path:
    """A config whose lake topic `lake_topic` mirrors what `settings["mirror"]` names from cluster
    `main` (cleanup.policy delete unless `settings["config"]` says)."""
    settings.setdefault("mirror", {"cluster": "main"})
    settings["config"] = {"cleanup.policy": "delete", **settings.get("config", {})}
    cluster = {"bootstrap.servers": bootstrap, **settings.pop("cluster", {})}
    config = {
        "lake": {"uri": f"file://{tmp_path / 'lake'}"},
        "kafka": {"clusters": {"main": cluster}},
        "topics": {lake_topic: settings},
    }
    path = tmp_path / "lakecleaner.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def values(lake: Lake, topic: str, partition: int = 0) -> list[tuple[int, bytes | None]]:
    rows = lake.topic(topic).partition(partition).read(columns=["offset", "value"]).to_pylist()
    return [(r["offset"], r["value"]) for r in rows]


def lake_files(tmp_path: Path) -> dict[str, bytes]:
    """Every file of the lake with its bytes."""
    root = tmp_path / "lake"
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def commit(broker: KafkaBroker, group: str, topic: str, offsets: dict[int, int]) -> None:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "log_level": 2})
    try:
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def recreate(broker: KafkaBroker, topic: str) -> None:
    """Delete `topic` and create it again with one partition (Kafka gives it a new topic id)."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.delete_topics([topic])[topic].result(30)
    deadline = time.monotonic() + 30
    while topic in admin.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline, "Kafka did not delete the topic"
        time.sleep(0.2)
    while True:
        try:
            create_topic_named(broker, topic)
            return
        except Exception:  # the deletion is still being finished
            assert time.monotonic() < deadline
            time.sleep(0.5)


def create_topic_named(broker: KafkaBroker, topic: str, partitions: int = 1) -> None:
    from confluent_kafka.admin import NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def run_cli(config: Path, *args: str) -> Any:
    return cli_process.run_cli("--config", str(config), *args, timeout=120)


def test_a_recreated_topic_is_refused_with_nothing_written_then_followed_as_a_new_history(
    tmp_path: Path, kafka_broker: KafkaBroker
) -> None:
    source = create_topic(kafka_broker, 1)
    produce(kafka_broker, source, [{"key": b"k%d" % i, "value": b"A-%d" % i, "partition": 0} for i in range(100)])
    config = config_for(
        tmp_path,
        kafka_broker.bootstrap,
        "orders",
        mirror={"cluster": "main", "topic": source},
        consumer_groups=["billing"],
        consumer_offsets={"cluster": "main"},
        config={"segment.bytes": 600, "retention.commitoffset.ms": 0},
    )
    lake = Lake.open(load_config(config))
    first = mirror_topic(lake, "orders", MirrorLimits(once=True, batch_bytes=200))
    recorded = lake.topic("orders").metadata.source
    assert first.records == 100 and recorded is not None and recorded.topic_id == first.source.topic_id

    recreate(kafka_broker, source)
    produce(kafka_broker, source, [{"key": b"k%d" % i, "value": b"B-%d" % i, "partition": 0} for i in range(150)])
    before = lake_files(tmp_path)
    refused = run_cli(config, "mirror", "--topic", "orders", "--once")
    assert refused.returncode == 2, refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    assert f"not {recorded.topic_id} as recorded: the Kafka topic was deleted and created again" in line, line
    assert "nothing was written" in line and "--restart-from-kafka" in line
    assert lake_files(tmp_path) == before  # not a byte changed
    unconfirmed = run_cli(config, "mirror", "--topic", "orders", "--once", "--restart-from-kafka")
    assert unconfirmed.returncode == 2 and "give --yes to confirm" in unconfirmed.stderr
    assert lake_files(tmp_path) == before

    # the new topic's groups say nothing of what the lake holds: unknown, not zero
    commit(kafka_broker, "billing", source, {0: 40})
    position = lake.offsets.consumed_positions("orders", [0])[0]
    assert position.offset is None and "deleted and created again" in str(position.reason)
    segments = [s.base_offset for s in lake.topic("orders").partition(0).manifest().segments]
    retain_topic(lake, "orders", time.time_ns() // 1_000_000 + HOUR)
    assert [s.base_offset for s in lake.topic("orders").partition(0).manifest().segments] == segments

    restarted = run_cli(config, "--json", "mirror", "--topic", "orders", "--once", "--restart-from-kafka", "--yes")
    assert restarted.returncode == 0, restarted.stderr
    report = json.loads(restarted.stdout)
    assert report["offset_delta"] == 100 and report["records"] == 150
    lake = Lake.open(load_config(config))
    assert values(lake, "orders") == [(i, b"A-%d" % i) for i in range(100)] + [
        (100 + i, b"B-%d" % i) for i in range(150)
    ]
    source_now = lake.topic("orders").metadata.source
    assert source_now is not None and source_now.topic_id == report["topic_id"] != recorded.topic_id
    assert [(b.topic_id, b.offset_delta) for b in source_now.breaks] == [(recorded.topic_id, 0)]

    # the new history's group offsets are lake offsets past the break, and say nothing of what lies below it
    position = lake.offsets.consumed_positions("orders", [0])[0]
    assert (position.offset, position.since_offset) == (140, 100)
    retain_topic(lake, "orders", time.time_ns() // 1_000_000 + HOUR)
    kept = lake.topic("orders").partition(0).manifest()
    assert kept.log_start_offset == 0 and values(lake, "orders")[0] == (0, b"A-0")

    produce(kafka_broker, source, [{"key": b"n", "value": b"B-150", "partition": 0}])
    mirror_topic(lake, "orders", MirrorLimits(once=True))
    assert values(lake, "orders")[-1] == (250, b"B-150")
    again = run_cli(config, "mirror", "--topic", "orders", "--once", "--restart-from-kafka", "--yes")
    assert again.returncode == 2 and "there is no new history to restart from" in again.stderr


def test_consumed_retention_of_a_renamed_mirror_reads_the_groups_of_the_topic_it_mirrors(
    tmp_path: Path, kafka_broker: KafkaBroker
) -> None:
    """A decoy Kafka topic with the lake topic's name, where `billing` is far ahead, moves nothing."""
    source = create_topic(kafka_broker, 1)
    lake_topic = f"orders-{source[2:]}"
    create_topic_named(kafka_broker, lake_topic)
    records = [{"key": b"k%d" % i, "value": b"v" * 30, "partition": 0} for i in range(60)]
    produce(kafka_broker, source, records)
    produce(kafka_broker, lake_topic, records)
    commit(kafka_broker, "billing", source, {0: 25})
    commit(kafka_broker, "billing", lake_topic, {0: 58})
    config = config_for(
        tmp_path,
        kafka_broker.bootstrap,
        lake_topic,
        mirror={"cluster": "main", "topic": source},
        consumer_groups=["billing"],
        consumer_offsets={"cluster": "main"},
        config={"segment.bytes": 700, "retention.commitoffset.ms": 0},
    )
    lake = Lake.open(load_config(config))
    mirror_topic(lake, lake_topic, MirrorLimits(once=True, batch_bytes=300))
    before = lake.topic(lake_topic).partition(0).manifest().segments
    assert len(before) > 4
    retained = retain_topic(lake, lake_topic, time.time_ns() // 1_000_000 + HOUR)
    after = lake.topic(lake_topic).partition(0).manifest()
    deleted = before[: len(before) - len(after.segments)]
    assert deleted and all(s.next_offset <= 25 for s in deleted)  # consumed on the mirrored topic
    assert after.segments[0].next_offset > 25  # and no more
    listed = run_cli(config, "--json", "offsets", "list", "--topic", lake_topic)
    assert listed.returncode == 0, listed.stderr
    shown = json.loads(listed.stdout)
    assert shown["source"] == f"Kafka cluster main ({kafka_broker.bootstrap}), topic {source}"
    assert [(r["group"], r["offset"]) for r in shown["offsets"]] == [("billing", 25)]
    assert retained.to_dict()["offsets_source"] == shown["source"]  # in run reports and `retain`'s output
    planned = run_cli(config, "--json", "plan", "--topic", lake_topic)
    assert planned.returncode == 0, planned.stderr
    assert json.loads(planned.stdout)["offsets_source"] == shown["source"]


def test_one_damaged_partition_and_one_keyless_record_stop_their_partitions_and_the_others_are_mirrored(
    tmp_path: Path, kafka_broker: KafkaBroker
) -> None:
    source = create_topic(kafka_broker, 3)
    produce(kafka_broker, source, [{"key": b"k%d" % i, "value": b"v", "partition": i % 3} for i in range(30)])
    config = config_for(
        tmp_path,
        kafka_broker.bootstrap,
        "cdc",
        mirror={"cluster": "main", "topic": source},
        config={"cleanup.policy": "compact"},
    )
    lake = Lake.open(load_config(config))
    mirror_topic(lake, "cdc", MirrorLimits(once=True))
    more = [{"key": b"m%d" % i, "value": b"w", "partition": i % 3} for i in range(30)]
    more[7]["key"] = None  # partition 1's third new record (Kafka offset 12) has no key
    produce(kafka_broker, source, more)
    (tmp_path / "lake/topics/cdc/partition=0/manifest.json").write_text('{"format_version": 1, "topic": "cdc"')

    done = run_cli(config, "--json", "mirror", "--topic", "cdc", "--once")
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    outcome = {p["partition"]: (p["status"], p["records"]) for p in report["partitions"]}
    assert outcome == {0: ("failed", 0), 1: ("failed", 2), 2: ("mirrored", 10)}
    errors = {p["partition"]: p["error"] for p in report["partitions"]}
    assert "its manifest cannot be read" in errors[0] and "lakecleaner repair" in errors[0]
    assert "record at offset 12" in errors[1] and "has no key" in errors[1] and "cleanup.policy delete" in errors[1]
    failed_lines = [line for line in done.stderr.splitlines() if "FAILED" in line]
    assert [line.split(":")[0] for line in failed_lines] == ["cdc-0", "cdc-1"]
    lake = Lake.open(load_config(config))
    kafka = read_committed(kafka_broker.bootstrap, source, 3)
    assert values(lake, "cdc", 2) == [(r.offset, r.value) for r in kafka[2]]
    assert values(lake, "cdc", 1) == [(r.offset, r.value) for r in kafka[1] if r.offset < 12]


def test_records_kafka_deleted_before_they_were_mirrored_are_reported_between_runs_and_during_one(
    tmp_path: Path, kafka_broker: KafkaBroker
) -> None:
    source = create_topic(kafka_broker, 1)
    produce(kafka_broker, source, [{"key": b"k", "value": b"x" * 100, "partition": 0} for i in range(50)])
    config = config_for(tmp_path, kafka_broker.bootstrap, "events", mirror={"cluster": "main", "topic": source})
    lake = Lake.open(load_config(config))
    mirror_topic(lake, "events", MirrorLimits(once=True))
    produce(kafka_broker, source, [{"key": b"k", "value": b"y" * 100, "partition": 0} for i in range(50)])
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    admin.delete_records([TopicPartition(source, 0, 80)])[TopicPartition(source, 0, 80)].result(30)

    done = run_cli(config, "--json", "mirror", "--topic", "events", "--once")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["deleted_before_mirrored"] == [{"partition": 0, "from": 50, "to": 79}]
    warning = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert warning == [
        "warning: events-0: offsets 50..79 were deleted in Kafka before they were mirrored (retention or DeleteRecords)"
    ]
    assert [o for o, _ in values(lake, "events")] == list(range(50)) + list(range(80, 100))

    # during a run: the offset the mirror reads next is deleted under it; it goes on from Kafka's log start
    produce(
        kafka_broker,
        source,
        [{"key": b"k", "value": b"z" * 200, "partition": 0} for i in range(20_000)],
        **SMALL_BATCHES,
    )
    lake = Lake.open(load_config(with_small_fetches(config)))
    deleted: list[int] = []

    def delete_ahead(progress: Any) -> None:
        if not deleted:
            deleted.append(15_000)
            admin.delete_records([TopicPartition(source, 0, 15_000)])[TopicPartition(source, 0, 15_000)].result(30)

    report = mirror_topic(lake, "events", MirrorLimits(once=True, batch_bytes=20_000), on_append=delete_ahead)
    (gap,) = report.deleted_before_mirrored
    assert gap.partition == 0 and 100 < gap.first <= gap.last == 14_999
    mirrored = [o for o, _ in values(lake, "events")]
    assert mirrored[-1] == 20_099 and set(range(gap.first, 15_000)).isdisjoint(mirrored)
    assert mirrored[mirrored.index(gap.first - 1) + 1] == 15_000  # nothing else missing


def test_a_wrong_sasl_password_is_named_as_one_without_the_password(tmp_path: Path, kafka_broker: KafkaBroker) -> None:
    source = create_topic(kafka_broker, 1)
    produce(kafka_broker, source, [{"key": b"k", "value": b"v", "partition": 0}])
    sasl = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": SASL_USER}
    wrong = config_for(
        tmp_path,
        kafka_broker.sasl_bootstrap,
        "secure",
        mirror={"cluster": "main", "topic": source},
        cluster={**sasl, "sasl.password": "not-the-password-77"},
    )
    done = run_cli(wrong, "mirror", "--topic", "secure", "--once")
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert f"Kafka cluster main ({kafka_broker.sasl_bootstrap}) refused lakecleaner's credentials (SASL" in line
    assert "sasl.password under kafka.clusters.main" in line and "not-the-password-77" not in line
    assert not (tmp_path / "lake").exists() or not Lake.open(load_config(wrong)).list_topics()

    right = config_for(
        tmp_path,
        kafka_broker.sasl_bootstrap,
        "secure",
        mirror={"cluster": "main", "topic": source},
        cluster={**sasl, "sasl.password": SASL_PASSWORD},
    )
    assert run_cli(right, "mirror", "--topic", "secure", "--once").returncode == 0
    assert values(Lake.open(load_config(right)), "secure") == [(0, b"v")]


def test_only_the_mirror_appends_to_a_mirrored_topic(tmp_path: Path, kafka_broker: KafkaBroker) -> None:
    source = create_topic(kafka_broker, 1)
    produce(kafka_broker, source, [{"key": b"k%d" % i, "value": b"v%d" % i, "partition": 0} for i in range(20)])
    config = config_for(tmp_path, kafka_broker.bootstrap, "owned", mirror={"cluster": "main", "topic": source})
    lake = Lake.open(load_config(config))
    mirror_topic(lake, "owned", MirrorLimits(once=True))
    produced = cli_process.run_cli(
        "--config", str(config), "produce", "--topic", "owned", input='{"key": "a", "value": "b"}\n'
    )
    assert produced.returncode == 2, produced.stderr
    (line,) = produced.stderr.strip().splitlines()
    assert f"topic owned takes its records from Kafka cluster main's topic {source}" in line
    assert "produce to the Kafka topic instead" in line
    with pytest.raises(WriterRefused, match="only its mirror appends"):
        lake.topic("owned").partition(0).append([Record(b"a", b"b")])
    by_uri = Lake.open(f"file://{tmp_path / 'lake'}")  # no config: what topic.json records is the word
    with pytest.raises(WriterRefused, match=f"Kafka topic {source} .* as its topic.json records"):
        by_uri.topic("owned").partition(0).append([Record(b"a", b"b")])
    assert lake.topic("owned").partition(0).manifest().next_offset == 20

    # a lake topic that another writer appended to before `mirror:` was set is not mixed with Kafka's
    other = tmp_path / "other"
    other.mkdir()
    unowned = config_for(other, kafka_broker.bootstrap, "mixed", mirror={"cluster": "main", "topic": source})
    free = yaml.safe_load(unowned.read_text())
    del free["topics"]["mixed"]["mirror"]
    (other / "free.yaml").write_text(yaml.safe_dump(free))
    Lake.open(load_config(other / "free.yaml")).create_topic("mixed").partition(0).append(
        [Record(b"x", b"not-kafka-%d" % i) for i in range(5)]
    )
    produce(kafka_broker, source, [{"key": b"k", "value": b"later", "partition": 0}])
    report = mirror_topic(Lake.open(load_config(unowned)), "mixed", MirrorLimits(once=True))
    (error,) = report.failures.values()
    assert "record at offset 4" in error and "is not the one the lake holds at offset 4" in error
    assert [v for _, v in values(Lake.open(load_config(unowned)), "mixed")] == [b"not-kafka-%d" % i for i in range(5)]
