"""The committed offsets of consumer groups a Kafka cluster keeps (OffsetFetch through the
AdminClient's `list_consumer_group_offsets`), for consumed retention (KIP-68) of a topic whose
config says `consumer_offsets: {cluster: …}`.

They are the offsets of the Kafka topic the lake topic mirrors (`mirror.topic`, or
`consumer_offsets.topic` for a topic that is not mirrored), never of a Kafka topic that merely
has the lake topic's name. For a mirrored topic they are tied to the Kafka source it recorded
(DESIGN section 9): when the cluster's topic is not that one (deleted and created again, another
cluster), every group's offsets are unknown, and when the lake follows a later history of it they
are translated to lake offsets by its delta (`log/source.py`'s `KafkaSource`).

An offset the cluster does not hold (a group it does not know, a partition the group never
committed) is unknown, never zero; a cluster that does not answer makes every group's offsets
unknown, with the reason. Consumed retention is then skipped for the partition, as with the
lake's own store.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition

from lakecleaner.clock import wall_clock_ms
from lakecleaner.config.kafka import KafkaCluster
from lakecleaner.errors import KafkaUnavailable, LakeCleanerError
from lakecleaner.io.kafka.clients import REQUEST_TIMEOUT_S, ClusterErrors, admin, unavailable
from lakecleaner.io.kafka.committed import ClusterRead, CommittedOffset
from lakecleaner.io.kafka.identity import RecordedTopic, describe_topic, mismatch


def cluster_offsets(
    cluster: KafkaCluster,
    groups: Sequence[str],
    topic: str,
    partitions: Sequence[int],
    recorded: RecordedTopic | None = None,
) -> ClusterRead:
    """Each group's committed offsets of Kafka topic `topic`'s `partitions` on the cluster (a
    partition without one is left out), the groups whose offsets could not be read or tied to
    `recorded` (the source a mirrored lake topic recorded) with why, and the delta to lake offsets."""

    if not groups:
        return ClusterRead({}, {})
    if recorded is not None:
        problem = _untied(cluster, topic, recorded)
        if problem is not None:
            return ClusterRead({}, {group: problem for group in groups})
    client = admin(cluster)
    now = wall_clock_ms()
    offsets: dict[str, Mapping[int, CommittedOffset]] = {}
    failures: dict[str, str] = {}
    for group in groups:
        wanted = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in partitions])
        try:
            future = client.list_consumer_group_offsets([wanted], request_timeout=REQUEST_TIMEOUT_S)[group]
            found = future.result(timeout=REQUEST_TIMEOUT_S * 2)
        except (KafkaException, TimeoutError) as exc:
            failures[group] = str(unavailable(cluster, f"an OffsetFetch of group {group}", exc))
            continue
        offsets[group] = {
            tp.partition: CommittedOffset(tp.offset, now, tp.metadata or "")
            for tp in found.topic_partitions
            if tp.error is None and tp.offset >= 0
        }
    return ClusterRead(offsets, failures, 0 if recorded is None else recorded.offset_delta)


def _untied(cluster: KafkaCluster, topic: str, recorded: RecordedTopic) -> str | None:
    """Why the groups' offsets of `topic` cannot be tied to the Kafka source the lake recorded
    (the topic is another one, or the cluster does not say), or None when they can."""
    try:
        errors = ClusterErrors(cluster, topic, REQUEST_TIMEOUT_S)
        found = describe_topic(cluster, topic, errors, time.monotonic() + REQUEST_TIMEOUT_S)
    except LakeCleanerError as exc:
        return f"the Kafka topic's identity cannot be checked: {exc}"
    problem = mismatch(recorded, found)
    if problem is None:
        return None
    return (
        f"Kafka topic {topic} on cluster {cluster.name} is not the topic the lake mirrored ({problem}): its groups' "
        "offsets are of another history; `lakecleaner mirror` says what to do"
    )


__all__ = ["KafkaUnavailable", "cluster_offsets"]
