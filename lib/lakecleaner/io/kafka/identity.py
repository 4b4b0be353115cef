"""A Kafka topic's identity (DESIGN section 9, KIP-516): what the cluster says the topic is, and how
that compares with what a lake topic recorded (`log/source.py`'s `KafkaSource`, taken here as the
`RecordedTopic` it is, so this adapter stays below the log); the mirror decides what follows
(`kafka/mirror.py`), and so do the consumer groups' offsets (`io/kafka/groups.py`).

The cluster is asked once per run: a Metadata request (the cluster's id, the topic's partitions)
and a DescribeTopics (the topic's id). A cluster whose metadata names no live broker as controller
cannot route DescribeTopics (librdkafka's mock cluster; a cluster older than Kafka 2.8 gives no ids
either): its topics have no id here, and the record samples of `kafka/resume.py` are what tells a
rewritten log from the one mirrored.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

from confluent_kafka import KafkaError, TopicCollection

from lakecleaner.config.kafka import KafkaCluster
from lakecleaner.errors import TopicNotFound
from lakecleaner.io.kafka.clients import ClusterErrors, access_denied, admin

#: Metadata errors of a topic that pass (a topic just created, a leader being elected).
_PASSING = frozenset({KafkaError.LEADER_NOT_AVAILABLE, KafkaError._PARTITION_EOF})


class RecordedTopic(Protocol):
    """The Kafka topic a lake topic recorded at its first mirror (`log/source.KafkaSource`): the
    cluster's id, the topic's name and id (None: the cluster gave none), and the delta from that
    history's Kafka offsets to lake offsets."""

    @property
    def cluster_id(self) -> str: ...
    @property
    def topic(self) -> str: ...
    @property
    def topic_id(self) -> str | None: ...
    @property
    def offset_delta(self) -> int: ...


@dataclass(frozen=True)
class KafkaTopicIdentity:
    """A Kafka topic as its cluster describes it now: the cluster's id, the topic's name and id
    (None: the cluster gives none) and its partition count."""

    cluster_id: str
    topic: str
    topic_id: str | None
    partitions: int

    def to_dict(self) -> dict[str, object]:
        return {"cluster_id": self.cluster_id, "topic_id": self.topic_id, "partitions": self.partitions}


def describe_topic(cluster: KafkaCluster, topic: str, errors: ClusterErrors, give_up_at: float) -> KafkaTopicIdentity:
    """What `cluster` says of `topic`, its requests retried while errors pass until `give_up_at`
    (time.monotonic()); TopicNotFound when the cluster has no such topic, KafkaAccessDenied when
    it refuses the client, KafkaUnavailable when it does not answer."""
    client = admin(cluster, on_error=errors)
    while True:
        metadata = errors.retrying(
            f"a metadata request for topic {topic}",
            client,
            lambda timeout: client.list_topics(topic, timeout=timeout),
            give_up_at,
        )
        found = metadata.topics.get(topic)
        error = None if found is None else found.error
        if error is not None and error.code() in _PASSING and time.monotonic() < give_up_at:
            time.sleep(0.2)
            continue
        break
    if error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
        raise access_denied(cluster, error, f" to topic {topic}")
    if found is None or error is not None or not found.partitions:
        reason = error.str() if error is not None else "no such topic"
        raise TopicNotFound(f"Kafka cluster {cluster.name} has no topic {topic} ({reason}); check mirror.topic")
    topic_id = None
    if metadata.controller_id in metadata.brokers:
        described = errors.retrying(
            f"a DescribeTopics request for topic {topic}",
            client,
            lambda timeout: client.describe_topics(TopicCollection([topic]), request_timeout=timeout)[topic].result(
                timeout=timeout * 2
            ),
            give_up_at,
        )
        topic_id = str(described.topic_id)
    return KafkaTopicIdentity(str(metadata.cluster_id), topic, topic_id, len(found.partitions))


def mismatch(recorded: RecordedTopic, found: KafkaTopicIdentity) -> str | None:
    """How the Kafka topic the cluster has now differs from the one the lake topic recorded, in
    words; None when it is the same (same cluster id, name, and topic id where both have one)."""
    if recorded.cluster_id != found.cluster_id:
        return (
            f"the cluster's id is {found.cluster_id}, not {recorded.cluster_id} as recorded: the bootstrap servers "
            "now reach another cluster"
        )
    if recorded.topic != found.topic:
        return f"mirror.topic is now {found.topic}, but the lake topic mirrors {recorded.topic}"
    if recorded.topic_id is not None and found.topic_id is None:
        return f"the cluster no longer gives topic ids, so it cannot be told from topic id {recorded.topic_id}"
    if recorded.topic_id is not None and found.topic_id != recorded.topic_id:
        return (
            f"its topic id is {found.topic_id}, not {recorded.topic_id} as recorded: the Kafka topic was deleted and "
            "created again"
        )
    return None


__all__ = ["KafkaTopicIdentity", "RecordedTopic", "describe_topic", "mismatch"]
