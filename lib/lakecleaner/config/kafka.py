"""The config file's Kafka side (issue 47): named clusters at the lake level, and per topic a
mirror source and where its consumer groups' committed offsets are read.

    kafka:
      clusters:
        main:
          bootstrap.servers: 127.0.0.1:9092
          # any librdkafka client property (security.protocol, sasl.*, ssl.*); ${VAR} reads the environment
    topics:
      orders:
        mirror: {cluster: main, topic: orders}   # topic defaults to the lake topic's name
        consumer_groups: [billing]
        consumer_offsets: {cluster: main}        # default: the lake's own store; the groups' offsets of
                                                 # the mirrored topic (`topic:` names it when not mirrored)

A cluster's properties may hold credentials (sasl.password, ssl.key.password): they are never
shown, in a repr, a message or a report.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lakecleaner.config.sections import check_keys, client_properties
from lakecleaner.config.values import shown
from lakecleaner.errors import InvalidTopicName
from lakecleaner.names import validate_topic_name

_KAFKA_KEYS = {"clusters"}
_MIRROR_KEYS = {"cluster", "topic", "max_seconds"}
#: How long a DAG run's `mirror` task reads at most, by default (`mirror.max_seconds`).
DEFAULT_MIRROR_SECONDS = 300.0
_OFFSETS_KEYS = {"cluster", "topic"}
#: The client properties lakecleaner sets itself (what it reads, and how), refused in the file.
RESERVED_PROPERTIES = frozenset(
    {"group.id", "enable.auto.commit", "isolation.level", "enable.partition.eof", "auto.offset.reset"}
)


@dataclass(frozen=True)
class KafkaCluster:
    """A Kafka cluster: its name in the file and its librdkafka client properties."""

    name: str
    properties: Mapping[str, str] = field(repr=False)

    @property
    def bootstrap_servers(self) -> str:
        return self.properties["bootstrap.servers"]


@dataclass(frozen=True)
class MirrorSpec:
    """Where a lake topic's records come from: a topic of a named cluster; `max_seconds`: how long
    a DAG run's `mirror` task reads at most (it stops earlier at the high watermarks it saw)."""

    cluster: str
    topic: str
    max_seconds: float = DEFAULT_MIRROR_SECONDS


def parse_clusters(raw: object, where: str, problems: list[str]) -> dict[str, KafkaCluster]:
    """The `kafka.clusters` section: each a mapping of client properties with bootstrap.servers."""
    section = check_keys(raw, _KAFKA_KEYS, where, problems)
    clusters = section.get("clusters") or {}
    if not isinstance(clusters, dict):
        problems.append(f"{where}.clusters: must be a mapping of cluster name to client properties")
        return {}
    return {
        str(name): cluster
        for name, props in clusters.items()
        if (cluster := _parse_cluster(str(name), props, f"{where}.clusters.{name}", problems)) is not None
    }


def _parse_cluster(name: str, raw: object, where: str, problems: list[str]) -> KafkaCluster | None:
    if not isinstance(raw, dict):
        problems.append(f"{where}: must be a mapping of client properties (bootstrap.servers: host:port, ...)")
        return None
    for key in raw.keys() & RESERVED_PROPERTIES:
        problems.append(f"{where}.{key}: set by lakecleaner itself (it reads by offset, read_committed); remove it")
    allowed = {key: value for key, value in raw.items() if key not in RESERVED_PROPERTIES}
    properties = client_properties(allowed, where, "librdkafka client property", problems)
    if not properties.get("bootstrap.servers"):
        problems.append(f"{where}: bootstrap.servers is missing; give host:port[,host:port...] of the cluster")
        return None
    return KafkaCluster(name, properties)


def parse_mirror(topic: str, raw: object, where: str, problems: list[str]) -> MirrorSpec | None:
    """`topics.<t>.mirror`: {cluster, topic}; the topic defaults to the lake topic's name."""
    if raw is None:
        return None
    section = check_keys(raw, _MIRROR_KEYS, where, problems)
    cluster = _cluster_named(section, where, problems)
    if cluster is None:
        return None
    source = section.get("topic", topic)
    seconds = section.get("max_seconds", DEFAULT_MIRROR_SECONDS)
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not 0 < seconds < 86_400:
        problems.append(f"{where}.max_seconds={shown(seconds)}: must be a number of seconds above 0, below a day")
        seconds = DEFAULT_MIRROR_SECONDS
    try:
        return MirrorSpec(cluster, validate_topic_name(source), float(seconds))
    except InvalidTopicName as exc:
        problems.append(f"{where}.topic: {exc}")
        return None


@dataclass(frozen=True)
class ClusterOffsets:
    """Where consumed retention (KIP-68) reads the committed offsets of a topic's consumer groups:
    a Kafka cluster, and the Kafka topic they are offsets of — the one the lake topic mirrors, or
    for a topic that is not mirrored (adopted from Connect's sink, say) the one `topic:` names."""

    cluster: str
    topic: str


def parse_offsets_source(
    topic: str, raw: object, mirror: MirrorSpec | None, where: str, problems: list[str]
) -> ClusterOffsets | None:
    """`topics.<t>.consumer_offsets`: {cluster, topic} to read the groups' offsets of that Kafka topic
    from that cluster; absent: the lake's own store. A mirrored topic's groups are those of the Kafka
    topic it mirrors, on the cluster it mirrors: their offsets are the lake's offsets, and no others
    are (another cluster's offsets of the topic, or another topic's, would delete what no group read)."""
    if raw is None:
        return None
    section = check_keys(raw, _OFFSETS_KEYS, where, problems)
    cluster = _cluster_named(section, where, problems)
    named = section.get("topic")
    if cluster is None:
        return None
    if mirror is not None and cluster != mirror.cluster:
        problems.append(
            f"{where}.cluster={shown(cluster)}: the topic mirrors cluster {mirror.cluster}, whose offsets are the "
            f"lake's; read its groups from there (consumer_offsets: {{cluster: {mirror.cluster}}})"
        )
    if mirror is not None and named is not None and named != mirror.topic:
        problems.append(
            f"{where}.topic={shown(named)}: the topic mirrors Kafka topic {mirror.topic}, whose groups' offsets are "
            "the lake's; remove consumer_offsets.topic"
        )
    source = mirror.topic if mirror is not None else (topic if named is None else named)
    try:
        return ClusterOffsets(cluster, validate_topic_name(source) if isinstance(source, str) else "")
    except InvalidTopicName as exc:
        problems.append(f"{where}.topic: {exc}")
        return None


def _cluster_named(section: Mapping[str, Any], where: str, problems: list[str]) -> str | None:
    """The section's `cluster`: a name (whether kafka.clusters defines it is `unknown_clusters`'s rule)."""
    cluster = section.get("cluster")
    if not isinstance(cluster, str) or not cluster:
        problems.append(f"{where}.cluster={shown(cluster)}: must name a cluster of kafka.clusters")
        return None
    return cluster


def unknown_clusters(topics: Mapping[str, Any], clusters: Mapping[str, KafkaCluster], where: str) -> list[str]:
    """A problem for each topic naming a cluster `kafka.clusters` does not define."""
    problems = []
    known = ", ".join(sorted(clusters)) or "none is defined"
    for name, spec in topics.items():
        for key, cluster in (
            ("mirror.cluster", spec.mirror and spec.mirror.cluster),
            ("consumer_offsets.cluster", spec.consumer_offsets and spec.consumer_offsets.cluster),
        ):
            if cluster and cluster not in clusters:
                problems.append(f"{where}.{name}.{key}={shown(cluster)}: no such cluster in kafka.clusters ({known})")
    return problems


__all__ = [
    "ClusterOffsets",
    "KafkaCluster",
    "MirrorSpec",
    "parse_clusters",
    "parse_mirror",
    "parse_offsets_source",
    "unknown_clusters",
]
