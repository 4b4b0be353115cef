"""librdkafka's mock cluster for fast Kafka tests: a producer created with `test.mock.num.brokers`
starts the brokers on loopback ports that other processes reach while the producer lives. The
mock cluster creates a topic with 4 partitions on the first produce to it; it answers Fetch,
ListOffsets, OffsetCommit and OffsetFetch, but not CreateTopics."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

#: The mock cluster's partitions per auto-created topic.
MOCK_PARTITIONS = 4


@dataclass(frozen=True)
class KafkaRecord:
    """A record as a Kafka consumer reads it."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


class MockCluster:
    """One mock cluster (one broker), alive as long as this object."""

    def __init__(self) -> None:
        self._producer = Producer({"test.mock.num.brokers": 1, "linger.ms": 0}, logger=_Silent())
        broker = next(iter(self._producer.list_topics(timeout=10).brokers.values()))
        self.bootstrap = f"{broker.host}:{broker.port}"

    def new_topic(self) -> str:
        return f"t-{uuid.uuid4().hex[:10]}"

    def produce(self, topic: str, records: list[dict[str, Any]]) -> None:
        """Each record's key, value, headers, timestamp and partition, as given; flushed."""
        for r in records:
            self._producer.produce(topic, **r)
        assert self._producer.flush(30) == 0

    def read_all(self, topic: str, partitions: int = MOCK_PARTITIONS) -> dict[int, list[KafkaRecord]]:
        """Every partition's records, as a read_committed Kafka consumer sees them."""
        return read_committed(self.bootstrap, topic, partitions)

    def commit_offsets(self, group: str, topic: str, offsets: dict[int, int]) -> None:
        """Commit `offsets` (the next offset to consume, per partition) for `group`."""
        commit_offsets(self.bootstrap, group, topic, offsets)


def read_committed(bootstrap: str, topic: str, partitions: int) -> dict[int, list[KafkaRecord]]:
    """Every partition's records, as a read_committed Kafka consumer of `bootstrap` sees them."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        },
        logger=_Silent(),
    )
    out: dict[int, list[KafkaRecord]] = {p: [] for p in range(partitions)}
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        at_end: set[int] = set()
        while len(at_end) < partitions:
            for m in consumer.consume(1000, timeout=1):
                if m.error():
                    at_end.add(m.partition())
                    continue
                out[m.partition()].append(
                    KafkaRecord(
                        m.partition(), m.offset(), m.key(), m.value(), tuple(m.headers() or ()), m.timestamp()[1]
                    )
                )
    finally:
        consumer.close()
    return out


def commit_offsets(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Commit `offsets` (the next offset to consume, per partition) for `group` on `bootstrap`."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}, logger=_Silent()
    )
    try:
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


class _Silent:
    def log(self, *args: object) -> None:
        pass
