"""Mirror a Kafka topic into the lake at its own offsets (`lakecleaner mirror`, issue 47).

Each partition's records are appended as Kafka holds them, byte for byte: key, value (a null
value stays null: a tombstone), headers in order, timestamp, offset. Offsets Kafka no longer has
(compacted away, aborted transactions, control records; read_committed) stay gaps, as followers
append (`PartitionLog.append(offsets=)`, Kafka's `UnifiedLog.appendAsFollower`).

The resume point is the lake's own log end per partition: no consumer group is needed, and each
append is one commit, so a process killed at any moment and run again leaves every record once,
with no gap Kafka does not have. Records are buffered per partition up to `batch_bytes` or
`linger_ms`, so memory stays bounded whatever the topic's size (`kafka/mirror_run.py`).

The mirror knows its source (issue 74, DESIGN section 9): the first run records the cluster's id
and the Kafka topic's id (KIP-516) in the lake topic's metadata, and every run compares them before
it writes anything (`io/kafka/identity.py`): a topic deleted and created again, or bootstrap servers
that now reach another cluster, is `MirrorMismatch` until someone decides (a new lake topic, or
`restart_from_kafka`: a new history after every record the lake holds, `accepted_source`). A Kafka topic with fewer
partitions than the lake's is refused the same way. Then each partition is on its own
(`kafka/resume.py`): one that cannot be read, whose last record is not Kafka's, or whose records
cannot be stored is reported and skipped, and the others are mirrored.

The lake topic is created from the Kafka topic's partition count and cleanup.policy when it does
not exist; partitions Kafka added are added to the lake topic.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import ConfigResource, ResourceType  # type: ignore[attr-defined]

from lakecleaner.clock import wall_clock_ms
from lakecleaner.config.kafka import KafkaCluster, MirrorSpec
from lakecleaner.errors import KafkaUnavailable, LakeCleanerError, MirrorMismatch, TopicNotFound
from lakecleaner.io.kafka.clients import ClusterErrors, admin, consumer
from lakecleaner.io.kafka.identity import KafkaTopicIdentity, describe_topic, mismatch
from lakecleaner.kafka.mirror_run import (
    DEFAULT_BATCH_BYTES,
    DEFAULT_GIVE_UP_S,
    DEFAULT_LINGER_MS,
    MirrorLimits,
    MirrorRun,
    PartitionProgress,
)
from lakecleaner.kafka.resume import Gap, starting_points
from lakecleaner.lake import Lake, Topic
from lakecleaner.log.source import KafkaSource

log = logging.getLogger(__name__)

#: How long DescribeConfigs may take (a cluster that cannot answer it, such as librdkafka's mock).
_DESCRIBE_TIMEOUT_S = 5.0


@dataclass
class MirrorReport:
    """What one `mirror` run did; `stopped`: why it ended (caught up, max seconds, max records,
    signal); the source by identity; each partition's outcome; and the offsets Kafka deleted before
    they were mirrored (`deleted_before_mirrored`, lake offsets, both ends included)."""

    topic: str
    cluster: str
    source: KafkaSource
    created: bool
    added_partitions: int
    stopped: str
    partitions: list[PartitionProgress] = field(default_factory=list)
    deleted_before_mirrored: list[Gap] = field(default_factory=list)
    #: Whether this run began following a new Kafka history (`restart_from_kafka`).
    restarted: bool = False

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions)

    @property
    def failures(self) -> dict[int, str]:
        """Why each partition that stopped did."""
        return {p.partition: p.error for p in self.partitions if p.error}

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "cluster": self.cluster,
            "source_topic": self.source.topic,
            "cluster_id": self.source.cluster_id,
            "topic_id": self.source.topic_id,
            "offset_delta": self.source.offset_delta,
            "created": self.created,
            "restarted": self.restarted,
            "added_partitions": self.added_partitions,
            "stopped": self.stopped,
            "records": self.records,
            "partitions_failed": len(self.failures),
            "partitions": [p.to_dict() for p in self.partitions],
            "deleted_before_mirrored": [g.to_dict() for g in self.deleted_before_mirrored],
        }


def mirror_source(lake: Lake, name: str) -> tuple[MirrorSpec, KafkaCluster]:
    """The topic's `mirror:` and its cluster; an error naming the config key when it has none."""
    spec = lake.config.topics.get(name)
    if spec is None or spec.mirror is None:
        raise LakeCleanerError(
            f"topic {name} has no mirror source: add `mirror: {{cluster: <name>}}` under topics.{name} in "
            f"{lake.config.source} (and the cluster under kafka.clusters)"
        )
    return spec.mirror, lake.config.kafka_clusters[spec.mirror.cluster]


def mirror_topic(
    lake: Lake,
    name: str,
    limits: MirrorLimits,
    *,
    stop: threading.Event | None = None,
    on_append: Callable[[PartitionProgress], None] | None = None,
    restart_from_kafka: bool = False,
) -> MirrorReport:
    """Mirror the lake topic `name` from its configured Kafka topic until `limits` end the run;
    what was buffered is appended before it returns (also when `stop` is set).

    A partition that cannot be mirrored is in the report's `failures`, and the others are mirrored.

    Args:
        lake: the lake (opened with `extras.open_lake` for its tables to follow).
        name: the lake topic; its `mirror:` config names the cluster and the Kafka topic.
        limits: when the run ends (records, seconds, `--once`) and gives up on an absent cluster.
        stop: set to end the run early; what was read is appended first.
        on_append: told of each partition's progress after each append.
        restart_from_kafka: follow a recreated Kafka topic as a new history after every record
            the lake holds, instead of refusing it.

    Returns:
        Per partition: records appended, the Kafka and lake offsets reached, gaps, failures.

    Raises:
        MirrorMismatch: the Kafka topic is not the one the lake topic recorded; nothing is written.
        KafkaAccessDenied: the cluster refuses the client (SASL, TLS, ACLs).
        KafkaUnavailable: the cluster did not answer for `limits.give_up_s`.
        LakeCleanerError: the topic has no `mirror:` config.
        ConfigError: librdkafka refuses the cluster's client properties.
    """
    spec, cluster = mirror_source(lake, name)
    errors = ClusterErrors(cluster, spec.topic, limits.give_up_s)
    found = describe_topic(cluster, spec.topic, errors, limits.give_up_at())
    topic, created = _lake_topic(lake, name, found, cluster)
    topic, source = accepted_source(lake, topic, cluster, found, restart=restart_from_kafka, now_ms=wall_clock_ms())
    topic, added = _grown(lake, topic, found, cluster, created)
    client = consumer(cluster, f"mirror-{name}", on_error=errors)
    try:
        starts = starting_points(client, errors, topic, source, limits.give_up_at())
        run = MirrorRun(topic, source, starts, limits, stop or threading.Event(), on_append)
        stopped = run.consume(client, errors)
    finally:
        client.close()
    partitions = [run.progress[p] for p in sorted(run.progress)]
    return MirrorReport(name, cluster.name, source, created, added, stopped, partitions, run.gaps, restart_from_kafka)


def accepted_source(
    lake: Lake, topic: Topic, cluster: KafkaCluster, found: KafkaTopicIdentity, *, restart: bool, now_ms: int
) -> tuple[Topic, KafkaSource]:
    """The Kafka source the run mirrors from: recorded now at a topic's first mirror, the recorded
    one when the cluster's topic is that one, or with `restart` a new history after every record
    the lake holds. MirrorMismatch, with nothing written, when the cluster's topic is another one
    and `restart` is not given, or when `restart` is given for the topic recorded (on a cluster that
    gives no topic ids, whether it is another one is the user's word: the samples told)."""
    recorded = topic.metadata.source
    if recorded is None:
        source = KafkaSource(cluster.name, found.cluster_id, found.topic, found.topic_id, now_ms)
        return lake.record_source(topic.name, source, None), source
    problem = mismatch(recorded, found)
    if problem is None and not restart:
        if (recorded.topic_id is None and found.topic_id is not None) or recorded.cluster != cluster.name:
            # the cluster now gives ids, or was renamed in the file: the same topic, recorded as it is now
            source = replace(recorded, cluster=cluster.name, topic_id=found.topic_id)
            return lake.record_source(topic.name, source, recorded), source
        return topic, recorded
    if problem is None and found.topic_id is not None:
        raise MirrorMismatch(
            f"Kafka topic {found.topic} on cluster {cluster.name} is the one lake topic {topic.name} records "
            f"(topic id {found.topic_id}): there is no new history to restart from; nothing was written"
        )
    if not restart:
        raise MirrorMismatch(
            f"Kafka topic {found.topic} on cluster {cluster.name} is not the topic lake topic {topic.name} mirrors: "
            f"{problem}; nothing was written. Mirror it into a new lake topic, or follow it as a new history after "
            f"every record the lake holds with `lakecleaner mirror --topic {topic.name} --restart-from-kafka`"
        )
    source = recorded.restarted(cluster.name, found.cluster_id, found.topic, found.topic_id, _log_end(topic), now_ms)
    return lake.record_source(topic.name, source, recorded), source


def _log_end(topic: Topic) -> int:
    """The highest log end among the topic's partitions: where a new history begins, so that every
    partition's next records lie above every record it holds. MirrorMismatch when a partition's
    manifest cannot be read (its end could be the highest)."""
    read = topic.read_manifests()
    if read.failures:
        p, reason = min(read.failures.items())
        raise MirrorMismatch(
            f"partition {topic.name}-{p} cannot be read ({reason}), so a new history cannot be placed after it; "
            "repair it first (`lakecleaner repair`); nothing was written"
        )
    return max(m.next_offset for m in read.manifests.values())


def _kafka_cleanup_policy(cluster: KafkaCluster, source: str) -> str | None:
    """The Kafka topic's cleanup.policy (DescribeConfigs), or None when the cluster does not say
    within `_DESCRIBE_TIMEOUT_S` (then the lake topic takes the config file's, and a warning says so)."""
    resource = ConfigResource(ResourceType.TOPIC, source)
    try:
        client = admin(cluster)  # kept until the answer came: a collected client drops its requests
        described = client.describe_configs([resource], request_timeout=_DESCRIBE_TIMEOUT_S)
        entries = described[resource].result(timeout=_DESCRIBE_TIMEOUT_S)
    except (KafkaException, KeyError, TimeoutError) as exc:
        log.warning(
            "Kafka cluster %s did not say topic %s's cleanup.policy (%s): the lake topic takes the config file's",
            cluster.name,
            source,
            type(exc).__name__,
        )
        return None
    entry = entries.get("cleanup.policy")
    return None if entry is None or entry.value is None else str(entry.value)


def _lake_topic(lake: Lake, name: str, found: KafkaTopicIdentity, cluster: KafkaCluster) -> tuple[Topic, bool]:
    """The lake topic, created like the Kafka topic (partition count, cleanup.policy unless the
    config file sets one) when it does not exist; (topic, created)."""
    try:
        return lake.topic(name), False
    except TopicNotFound:
        pass
    spec = lake.config.topics.get(name)
    overrides: dict[str, object] = {}
    if not (spec and "cleanup.policy" in spec.overrides):  # the file's wins: Kafka is not asked
        policy = _kafka_cleanup_policy(cluster, found.topic)
        if policy:
            overrides["cleanup.policy"] = policy
    return lake.create_topic(name, found.partitions, overrides, exist_ok=True), True


def _grown(
    lake: Lake, topic: Topic, found: KafkaTopicIdentity, cluster: KafkaCluster, created: bool
) -> tuple[Topic, int]:
    """The lake topic grown to the Kafka topic's partition count, and the partitions added (all
    of them for a topic just created). MirrorMismatch when Kafka's topic has fewer: Kafka never
    removes partitions, so it is another topic."""
    if created:
        return topic, topic.partitions
    if found.partitions < topic.partitions:
        raise MirrorMismatch(
            f"Kafka topic {found.topic} on {cluster.name} has {found.partitions} partitions but lake topic "
            f"{topic.name} has {topic.partitions}: Kafka never removes partitions, so this is another topic; "
            "nothing was written"
        )
    if found.partitions > topic.partitions:
        return lake.add_partitions(topic.name, found.partitions), found.partitions - topic.partitions
    return topic, 0


__all__ = [
    "DEFAULT_BATCH_BYTES",
    "DEFAULT_GIVE_UP_S",
    "DEFAULT_LINGER_MS",
    "KafkaUnavailable",
    "MirrorLimits",
    "MirrorReport",
    "PartitionProgress",
    "mirror_source",
    "mirror_topic",
]
