"""A sample CDC topic on a Kafka cluster, with a consumer group part way through it, and the
lakecleaner config that mirrors it (`lakecleaner dev kafka`).

The topic is compacted in Kafka (`cleanup.policy=compact`, which the mirror takes for the lake
topic): change events of `keys` customers as JSON values keyed by customer id, a delete (a
tombstone) every 20th record, spread over the partitions by key. The group `billing` has committed
half of each partition, so consumed retention (KIP-68) has something to wait for.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

#: How long a client call on the sample topic may wait for the broker, in seconds.
CLIENT_TIMEOUT_S = 30


@dataclass(frozen=True)
class SampleTopic:
    """The sample's shape: the Kafka topic, its partitions, records and keys, and the group."""

    name: str = "customers"
    partitions: int = 2
    records: int = 10_000
    keys: int = 1_000
    group: str = "billing"
    cluster: str = "dev"


@dataclass(frozen=True)
class SampleState:
    """What the topic holds: each partition's end offset, and the group's committed offsets."""

    end_offsets: dict[int, int]
    committed: dict[int, int]
    created: bool

    @property
    def records(self) -> int:
        return sum(self.end_offsets.values())


def sample_event(sequence: int, keys: int) -> tuple[bytes, bytes | None]:
    """The key and value of the sample's `sequence`-th record: an update of customer
    `sequence % keys`, or its deletion (a tombstone) every 20th record."""
    customer = sequence % keys
    key = f"customer-{customer}".encode()
    if sequence % 20 == 19:
        return key, None
    op = "c" if sequence < keys else "u"
    value = {"op": op, "id": customer, "name": f"customer {customer}", "version": sequence // keys + 1}
    return key, json.dumps(value, separators=(",", ":")).encode()


def ensure_sample(bootstrap: str, sample: SampleTopic) -> SampleState:
    """Create the sample topic, fill it and commit the group's offsets, unless the topic exists
    already (a broker started again on its folder keeps it): then only read where it stands."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    created = sample.name not in admin.list_topics(timeout=CLIENT_TIMEOUT_S).topics
    if created:
        topic = NewTopic(sample.name, sample.partitions, 1, config={"cleanup.policy": "compact"})
        admin.create_topics([topic])[sample.name].result(CLIENT_TIMEOUT_S)
        # Idempotent: a batch retried (a leader not elected yet just after the topic's creation, a
        # request timed out on a busy machine) is not written after the batches behind it, so each
        # partition holds its customers' versions in the order produced, as the sample promises.
        settings = {"bootstrap.servers": bootstrap, "log_level": 0, "linger.ms": 20, "enable.idempotence": True}
        producer = Producer(settings)
        for sequence in range(sample.records):
            key, value = sample_event(sequence, sample.keys)
            producer.produce(sample.name, key=key, value=value)
            producer.poll(0)
        if producer.flush(CLIENT_TIMEOUT_S) != 0:
            raise TimeoutError(f"the sample records did not reach {bootstrap} within {CLIENT_TIMEOUT_S} s")
    group = {"bootstrap.servers": bootstrap, "group.id": sample.group, "enable.auto.commit": False, "log_level": 0}
    consumer = Consumer(group)
    try:
        partitions = sorted(consumer.list_topics(sample.name, timeout=CLIENT_TIMEOUT_S).topics[sample.name].partitions)
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(sample.name, p), timeout=CLIENT_TIMEOUT_S)[1]
            for p in partitions
        }
        if created:
            halves = [TopicPartition(sample.name, p, end // 2) for p, end in ends.items()]
            consumer.commit(offsets=halves, asynchronous=False)
        asked = [TopicPartition(sample.name, p) for p in partitions]
        committed = consumer.committed(asked, timeout=CLIENT_TIMEOUT_S)
    finally:
        consumer.close()
    return SampleState(ends, {tp.partition: tp.offset for tp in committed if tp.offset >= 0}, created)


def mirror_config(bootstrap: str, sample: SampleTopic, lake_uri: str) -> dict[str, Any]:
    """A lakecleaner config whose lake mirrors the sample topic and reads its group's offsets from
    the cluster (consumed retention)."""
    return {
        "lake": {"uri": lake_uri},
        "kafka": {"clusters": {sample.cluster: {"bootstrap.servers": bootstrap}}},
        "iceberg": {"enabled": False},
        "topics": {
            sample.name: {
                "schedule": "@hourly",
                "mirror": {"cluster": sample.cluster, "topic": sample.name},
                "consumer_groups": [sample.group],
                "consumer_offsets": {"cluster": sample.cluster},
                "config": {"min.compaction.lag.ms": 0, "segment.bytes": 4096},
            }
        },
    }


def write_mirror_config(path: Path, config: dict[str, Any]) -> str:
    """Write the config to `path` with a line saying where it comes from; its YAML text."""
    text = yaml.safe_dump(config, sort_keys=False)
    path.write_text("# Written by `lakecleaner dev kafka`: a lake that mirrors its sample topic.\n" + text)
    return text


__all__ = ["SampleState", "SampleTopic", "ensure_sample", "mirror_config", "sample_event", "write_mirror_config"]
