"""The committed offsets of consumer groups a Kafka cluster keeps (OffsetFetch through the
AdminClient's `list_consumer_group_offsets`), for consumed retention (KIP-68) of a topic whose
config says `consumer_offsets: {cluster: …}`.

An offset the cluster does not hold (a group it does not know, a partition the group never
committed) is unknown, never zero; a cluster that does not answer makes every group's offsets
unknown, with the reason. Consumed retention is then skipped for the partition, as with the
lake's own store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition

from lakecleaner.clock import wall_clock_ms
from lakecleaner.config.kafka import KafkaCluster
from lakecleaner.errors import KafkaUnavailable
from lakecleaner.kafka.clients import REQUEST_TIMEOUT_S, admin, unavailable
from lakecleaner.offsets import CommittedOffset


def cluster_offsets(
    cluster: KafkaCluster, groups: Sequence[str], topic: str, partitions: Sequence[int]
) -> tuple[dict[str, Mapping[int, CommittedOffset]], dict[str, str]]:
    """Each group's committed offsets of `topic`'s `partitions` on the cluster (a partition
    without one is left out), and the groups whose offsets could not be read, with why."""

    offsets: dict[str, Mapping[int, CommittedOffset]] = {}
    failures: dict[str, str] = {}
    if not groups:
        return offsets, failures
    client = admin(cluster)
    now = wall_clock_ms()
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
    return offsets, failures


__all__ = ["KafkaUnavailable", "cluster_offsets"]
