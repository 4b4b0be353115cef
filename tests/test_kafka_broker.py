"""`lakecleaner mirror` and consumed retention against a real Apache Kafka broker (KRaft, issue 47):
a compacted topic whose own cleaner left gaps, transactions with aborted records (read_committed
skips them and their offsets stay gaps), partitions Kafka adds, and a consumer group's offsets
committed through the group coordinator."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from lakecleaner.config import load_config
from lakecleaner.dev.kafka_broker import KafkaBroker
from lakecleaner.errors import KafkaUnavailable
from lakecleaner.kafka.mirror import MirrorLimits, mirror_topic
from lakecleaner.lake import Lake
from tests.support.kafka_mock import read_committed
from tests.support.kafka_real import SMALL_BATCHES, with_small_fetches
from tests.test_mirror import lake_view, write_config

pytestmark = pytest.mark.xdist_group("kafka-broker")


def create_topic(broker: KafkaBroker, partitions: int, **config: str) -> str:
    name = f"k-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=config)])[name].result(30)
    return name


def produce(broker: KafkaBroker, topic: str, records: list[dict[str, Any]], **settings: Any) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "log_level": 2, **settings})
    for r in records:
        producer.produce(topic, **r)
    assert producer.flush(30) == 0


def lake_for(tmp_path: Path, broker: KafkaBroker, topic: str, **settings: Any) -> Lake:
    """A lake mirroring `topic`, whose config file does not set cleanup.policy (Kafka's is taken)."""
    path = write_config(tmp_path, broker.bootstrap, topic, **settings)
    config = yaml.safe_load(path.read_text())
    del config["topics"][topic]["config"]["cleanup.policy"]
    path.write_text(yaml.safe_dump(config))
    return Lake.open(load_config(path))


def test_a_compacted_topic_whose_cleaner_left_gaps_mirrors_at_its_offsets(
    tmp_path: Path, kafka_broker: KafkaBroker
) -> None:
    topic = create_topic(
        kafka_broker,
        2,
        **{
            "cleanup.policy": "compact",
            "segment.ms": "100",
            "min.cleanable.dirty.ratio": "0.01",
            "min.compaction.lag.ms": "0",
        },
    )
    for round_ in range(6):
        batch = [
            {"key": f"k{i % 4}".encode(), "value": f"v{round_}-{i}".encode(), "partition": i % 2} for i in range(40)
        ]
        produce(kafka_broker, topic, batch)
        time.sleep(0.3)  # the next round rolls the segment (segment.ms, by the records' timestamps: KIP-33)
    deadline = time.monotonic() + 90
    while sum(len(r) for r in read_committed(kafka_broker.bootstrap, topic, 2).values()) == 240:
        assert time.monotonic() < deadline, "Kafka's cleaner did not compact the topic"
        time.sleep(1)
    lake = lake_for(tmp_path, kafka_broker, topic)
    report = mirror_topic(lake, topic, MirrorLimits(once=True))
    kafka_view = read_committed(kafka_broker.bootstrap, topic, 2)
    assert lake_view(lake, topic) == kafka_view
    offsets = [r.offset for p in (0, 1) for r in kafka_view[p]]
    assert len(offsets) < 240 and min(kafka_view[0][0].offset, kafka_view[1][0].offset) > 0  # gaps the cleaner left
    assert report.created and lake.topic(topic).config.compact  # cleanup.policy from DescribeConfigs


def test_aborted_transactions_are_skipped_and_their_offsets_stay_gaps(
    tmp_path: Path, kafka_broker: KafkaBroker
) -> None:
    topic = create_topic(kafka_broker, 1)
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap, "transactional.id": f"tx-{uuid.uuid4().hex[:6]}"})
    producer.init_transactions(30)
    for commit, prefix in ((False, "aborted"), (True, "committed"), (False, "aborted-again"), (True, "last")):
        producer.begin_transaction()
        for i in range(5):
            producer.produce(topic, key=f"{prefix}-{i}".encode(), value=b"v", partition=0)
        producer.flush(30)  # in the log before the outcome (an abort would drop what was never sent)
        (producer.commit_transaction if commit else producer.abort_transaction)(30)
    lake = lake_for(tmp_path, kafka_broker, topic)
    mirror_topic(lake, topic, MirrorLimits(once=True))
    view = lake_view(lake, topic)
    assert view == read_committed(kafka_broker.bootstrap, topic, 1)
    assert [r.key for r in view[0]] == [f"{p}-{i}".encode() for p in ("committed", "last") for i in range(5)]
    assert view[0][0].offset == 6  # after five aborted records and the abort marker
    assert lake.topic(topic).partition(0).manifest().next_offset == view[0][-1].offset + 1


def test_partitions_kafka_adds_are_added_to_the_lake_topic(tmp_path: Path, kafka_broker: KafkaBroker) -> None:
    topic = create_topic(kafka_broker, 1)
    produce(kafka_broker, topic, [{"key": b"a", "value": b"1", "partition": 0}])
    lake = lake_for(tmp_path, kafka_broker, topic)
    mirror_topic(lake, topic, MirrorLimits(once=True))
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    admin.create_partitions([NewPartitions(topic, 3)])[topic].result(30)
    produce(kafka_broker, topic, [{"key": b"b", "value": b"2", "partition": 2}])
    report = mirror_topic(lake, topic, MirrorLimits(once=True))
    assert report.added_partitions == 2 and lake.topic(topic).partitions == 3
    assert lake_view(lake, topic) == read_committed(kafka_broker.bootstrap, topic, 3)


def test_a_groups_offsets_committed_through_the_coordinator_drive_consumed_positions(
    tmp_path: Path, kafka_broker: KafkaBroker
) -> None:
    topic = create_topic(kafka_broker, 2)
    produce(kafka_broker, topic, [{"key": b"k", "value": b"v", "partition": i % 2} for i in range(20)])
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_broker.bootstrap,
            "group.id": "billing",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "log_level": 2,
        }
    )
    consumer.subscribe([topic])
    taken: list[Any] = []
    deadline = time.monotonic() + 60
    while len(taken) < 20 and time.monotonic() < deadline:
        taken += [m for m in consumer.consume(100, timeout=1) if not m.error()]
    consumer.commit(asynchronous=False)
    consumer.close()
    lake = lake_for(tmp_path, kafka_broker, topic, consumer_groups=["billing"], consumer_offsets={"cluster": "main"})
    mirror_topic(lake, topic, MirrorLimits(once=True))
    positions = lake.offsets.consumed_positions(topic, [0, 1])
    assert {p: pos.offset for p, pos in positions.items()} == {0: 10, 1: 10}


def test_a_broker_restart_is_waited_out_and_a_broker_gone_for_good_ends_the_run_keeping_what_it_appended(
    tmp_path: Path, kafka_broker: KafkaBroker, caplog: pytest.LogCaptureFixture
) -> None:
    topic = create_topic(kafka_broker, 2)
    # small producer batches and small fetches, so the client holds few records when the broker goes away
    produce(
        kafka_broker,
        topic,
        [{"key": b"k%d" % i, "value": b"x" * 200, "partition": i % 2} for i in range(20_000)],
        **SMALL_BATCHES,
    )
    lake_for(tmp_path, kafka_broker, topic)
    lake = Lake.open(load_config(with_small_fetches(tmp_path / "lakecleaner.yaml")))
    stopped: list[bool] = []
    restarting: threading.Timer | None = None

    def stop_broker_once(restart_after_s: float | None) -> Any:
        def on_append(progress: Any) -> None:
            if not stopped:
                stopped.append(True)
                kafka_broker.stop(crash=restart_after_s is None)
                if restart_after_s is not None:
                    threading.Timer(restart_after_s, kafka_broker.start).start()

        return on_append

    try:
        with caplog.at_level(logging.WARNING, logger="lakecleaner.io.kafka.clients"):
            report = mirror_topic(
                lake, topic, MirrorLimits(once=True, batch_bytes=20_000), on_append=stop_broker_once(2.0)
            )
        assert report.stopped == "caught up" and report.records == 20_000
        assert any("librdkafka retries, the run waits" in r.getMessage() for r in caplog.records)
        assert lake_view(lake, topic) == read_committed(kafka_broker.bootstrap, topic, 2)

        produce(
            kafka_broker,
            topic,
            [{"key": b"n", "value": b"y" * 200, "partition": i % 2} for i in range(20_000)],
            **SMALL_BATCHES,
        )
        stopped.clear()
        with pytest.raises(KafkaUnavailable, match=r"did not answer fetches of .* for 1 s"):
            mirror_topic(
                lake, topic, MirrorLimits(once=True, batch_bytes=20_000, give_up_s=1), on_append=stop_broker_once(None)
            )
        kept = lake_view(lake, topic)
        assert 20_000 < sum(len(v) for v in kept.values()) < 40_000  # what was appended stays

        # the cluster is still down as the next run starts: its requests are asked again until it answers
        restarting = threading.Timer(1.0, kafka_broker.start)
        restarting.start()
        resumed = mirror_topic(lake, topic, MirrorLimits(once=True, give_up_s=120))
    finally:
        if restarting is not None:
            restarting.join()
        if kafka_broker.process.poll() is not None:
            kafka_broker.start()
    kafka_view = read_committed(kafka_broker.bootstrap, topic, 2)
    assert all(kept[p] == kafka_view[p][: len(kept[p])] for p in (0, 1))  # a prefix, at Kafka's offsets
    assert resumed.stopped == "caught up" and lake_view(lake, topic) == kafka_view
