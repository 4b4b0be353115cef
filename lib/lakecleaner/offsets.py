"""Consumer groups' committed offsets (Kafka's __consumer_offsets), stored in the lake.

One JSON object per group at `_consumer_offsets/<group>.json`. As in Kafka, a committed
offset is the next offset the group will consume: every record below it has been consumed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from lakecleaner.clock import wall_clock_ms
from lakecleaner.config import LakeConfig
from lakecleaner.errors import (
    CorruptOffsets,
    InvalidTopicName,
    ObjectNotFound,
    StorageError,
)
from lakecleaner.io import ObjectStore
from lakecleaner.io.concurrent import map_ordered
from lakecleaner.io.kafka.committed import ClusterRead, CommittedOffset
from lakecleaner.io.strict_json import Fields, Malformed, load_object
from lakecleaner.log.source import KafkaSource
from lakecleaner.names import validate_group_id, validate_partition, validate_topic_name


@dataclass(frozen=True)
class ConsumedPosition:
    """The minimum committed offset of one partition over every subscribed group (KIP-68).

    `offset` is None when it is unknown: a group's offsets could not be read, or a subscribed
    group has no committed offset for this partition. Unknown is never treated as zero or as
    "everything consumed": consumed retention is skipped for the partition. `groups` maps each
    subscribed group to its committed offset (None when missing or unreadable); `reason` says
    in words why the offset is unknown. With no subscribed group at all, `offset` is None and
    `reason` says so: nothing is consumed by nobody. Offsets are the lake's: a Kafka group's
    committed offset of a mirrored topic is translated by the history's delta (`log/source.py`).
    """

    offset: int | None
    groups: Mapping[str, int | None] = field(default_factory=dict)
    reason: str | None = None
    #: The lake offset the groups' offsets begin to speak for: a mirrored topic that follows a new
    #: Kafka history (`mirror --restart-from-kafka`) holds the earlier history's records below it,
    #: which no offset of the new one says anything of (None: the whole log).
    since_offset: int | None = None

    @property
    def known(self) -> bool:
        return self.offset is not None

    @property
    def holding_groups(self) -> tuple[str, ...]:
        """Groups whose committed offset equals the minimum (they hold consumed retention back)."""
        if self.offset is None:
            return tuple(g for g, o in self.groups.items() if o is None)
        return tuple(g for g, o in self.groups.items() if o == self.offset)


# ----------------------------------------------------------------------------------------------
# The store


def group_key(group: str) -> str:
    return f"{OFFSETS_PREFIX}{group}.json"


OFFSETS_PREFIX = "_consumer_offsets/"


def _partitions(parts: Fields) -> dict[int, CommittedOffset]:
    """A topic's committed offsets by partition ("0": {"offset", "commit_ms", "metadata"})."""
    found: dict[int, CommittedOffset] = {}
    for name in parts.names():
        if not name.isdigit() or len(name) > 9:
            raise Malformed(f"field {parts.where}.{name[:40]} is not a partition number")
        c = parts.object(name)
        found[int(name)] = CommittedOffset(
            c.integer("offset"), c.integer("commit_ms", default=0), c.text("metadata", default="", max_chars=4096)
        )
    return found


@dataclass(frozen=True)
class GroupOffsets:
    """One consumer group's committed offsets: topic → partition → CommittedOffset.

    A group with an entry for a topic is subscribed to it, even before its first commit for
    some partitions.
    """

    group: str
    topics: Mapping[str, Mapping[int, CommittedOffset]] = field(default_factory=dict)

    def to_json(self) -> bytes:
        data = {
            "group": self.group,
            "topics": {
                t: {
                    str(p): {"offset": c.offset, "commit_ms": c.commit_ms, "metadata": c.metadata}
                    for p, c in sorted(parts.items())
                }
                for t, parts in sorted(self.topics.items())
            },
        }
        return json.dumps(data, indent=1).encode()

    @staticmethod
    def from_json(data: bytes, location: str) -> GroupOffsets:
        """Parse strictly (`io/strict_json.py`): CorruptOffsets naming `location` and the fix,
        whatever the bytes hold."""
        try:
            f = load_object(data, max_bytes=64 << 20)
            topics_field = f.object("topics")
            topics = {t: _partitions(topics_field.object(t)) for t in topics_field.names()}
            offsets = GroupOffsets(f.text("group", max_chars=249), topics)
        except Malformed as exc:
            raise CorruptOffsets(
                f"consumer offsets {location} are corrupt ({exc}); recommit the group's offsets"
            ) from None
        return offsets


class OffsetStore:
    """Commit and read consumer groups' offsets; the minimum committed offset per partition."""

    def __init__(
        self,
        store: ObjectStore,
        config: LakeConfig,
        recorded_source: Callable[[str], KafkaSource | None] = lambda topic: None,
    ) -> None:
        self.store = store
        self.config = config
        #: The Kafka source a mirrored topic recorded (its topic.json), by topic name.
        self.recorded_source = recorded_source

    def read_group(self, group: str) -> GroupOffsets:
        """A group's offsets; an unknown group has none."""
        validate_group_id(group)
        try:
            data = self.store.read(group_key(group))
        except ObjectNotFound:
            return GroupOffsets(group)
        location = self.store.location(group_key(group))
        offsets = GroupOffsets.from_json(data, location)
        if offsets.group != group:
            raise CorruptOffsets(
                f"consumer offsets {location} name the group {offsets.group!r}, not {group!r}: the file was "
                "copied or renamed; recommit the group's offsets"
            )
        return offsets

    def commit(
        self, group: str, topic: str, offsets: Mapping[int, int], *, metadata: str = "", now_ms: int | None = None
    ) -> GroupOffsets:
        """Commit `offsets` (partition → next offset to consume) for `group` on `topic`.

        Offsets must be ≥ 0. An empty mapping subscribes the group to the topic without offsets.
        The group file is updated by a conditional write, retried when another member commits.

        Args:
            group: the consumer group id (Kafka's topic-name rule).
            topic: the topic the offsets are of.
            offsets: partition → the next offset the group will consume.
            metadata: kept with each offset, as Kafka's OffsetCommit does.
            now_ms: the commit time; None for the wall clock.

        Returns:
            The group's offsets after the commit.

        Raises:
            InvalidTopicName: the group id or topic name breaks the rule.
            ValueError: a partition or an offset is negative or not a whole number.
            ConcurrentModification: other members kept winning the conditional write past its retries.
            StorageError: the store failed after its retries.
        """
        validate_group_id(group)
        validate_topic_name(topic)
        for p, o in offsets.items():
            validate_partition(p)
            if isinstance(o, bool) or not isinstance(o, int) or o < 0:
                raise ValueError(f"offset {o!r} for {topic}-{p} must be a non-negative integer (the next offset)")
        now = wall_clock_ms() if now_ms is None else now_ms
        key = group_key(group)
        committed: list[GroupOffsets] = []

        def commit_offsets(data: bytes | None) -> bytes:
            current = GroupOffsets(group) if data is None else GroupOffsets.from_json(data, self.store.location(key))
            topics = {t: dict(parts) for t, parts in current.topics.items()}
            topics.setdefault(topic, {}).update({p: CommittedOffset(o, now, metadata) for p, o in offsets.items()})
            committed[:] = [GroupOffsets(group, topics)]
            return committed[0].to_json()

        self.store.update(key, commit_offsets, what=f"the offset commit of consumer group {group}")
        return committed[0]

    def list_groups(self) -> list[str]:
        return sorted(
            o.key[len(OFFSETS_PREFIX) : -len(".json")]
            for o in self.store.list(OFFSETS_PREFIX)
            if o.key.endswith(".json")
        )

    def subscribed_offsets(
        self, topic: str, groups: Mapping[str, GroupOffsets | str] | None = None
    ) -> tuple[list[str], dict[str, Mapping[int, CommittedOffset]], dict[str, str]]:
        """Groups subscribed to `topic` (declared in the config, or with an entry for it), their
        committed offsets on it, and the groups whose offsets could not be read with the reason.
        Each group's file is read once, or not at all when `groups` (`read_all_groups`) is given
        (a view of many topics reads them once for all)."""
        subscribed = set(self.config.topics[topic].consumer_groups) if topic in self.config.topics else set()
        offsets: dict[str, Mapping[int, CommittedOffset]] = {}
        failures: dict[str, str] = {}
        for group, read in (self.read_all_groups() if groups is None else groups).items():
            if isinstance(read, str):
                failures[group] = read
            elif topic in read.topics:
                subscribed.add(group)
                offsets[group] = read.topics[topic]
        return sorted(subscribed), offsets, failures

    def read_all_groups(self) -> dict[str, GroupOffsets | str]:
        """Every group's offsets (read concurrently), or, for a group that cannot be used, why."""
        groups = self.list_groups()
        reads = map_ordered(self._read_listed, groups, self.config.storage.max_concurrency)
        return dict(zip(groups, reads, strict=True))

    def _read_listed(self, group: str) -> GroupOffsets | str:
        """A listed group's offsets, or why they cannot be used: an object under _consumer_offsets/
        whose name is no group id (a stray or misplaced object), unreadable, or corrupt. Such an
        object holds back consumed retention as one unreadable group would, and nothing else."""
        try:
            validate_group_id(group)
        except InvalidTopicName as exc:
            return (
                f"the object {self.store.location(group_key(group))} is not a consumer group's offsets file ({exc}); "
                f"move or delete it (group files are {OFFSETS_PREFIX}<group id>.json)"
            )
        try:
            return self.read_group(group)
        except (CorruptOffsets, StorageError) as exc:
            return str(exc)

    def consumed_position(self, topic: str, partition: int) -> ConsumedPosition:
        """The minimum committed offset of `topic`-`partition` over every subscribed group (KIP-68).

        Unknown (offset None) when any group's offsets cannot be read, when a subscribed group
        has no committed offset for the partition, or when no group is subscribed.

        Args:
            topic: the lake topic (its `consumer_offsets:` says whether a Kafka cluster keeps them).
            partition: the partition.

        Returns:
            The position below which every subscribed group has consumed, or unknown with why.
            A failure to read offsets is an unknown position, never an error: consumed retention
            then deletes nothing.
        """
        return self.consumed_positions(topic, [partition])[partition]

    def consumed_positions(
        self, topic: str, partitions: list[int], groups: Mapping[str, GroupOffsets | str] | None = None
    ) -> dict[int, ConsumedPosition]:
        """`consumed_position` for several partitions, reading each group's offsets once (or
        using `groups`, from `read_all_groups`). A topic whose config says `consumer_offsets:
        {cluster: …}` reads its declared groups' offsets from that Kafka cluster instead, of the
        Kafka topic it mirrors (`io/kafka/groups.py`)."""
        cluster = self.offsets_cluster(topic)
        if cluster is not None:
            read = self.cluster_offsets(topic, partitions)
            subscribed = sorted(self.config.topics[topic].consumer_groups)
            delta = read.offset_delta
            return {p: _min_position(p, subscribed, read.offsets, read.failures, delta) for p in partitions}
        subscribed, offsets, failures = self.subscribed_offsets(topic, groups)
        return {p: _min_position(p, subscribed, offsets, failures) for p in partitions}

    def cluster_offsets(self, topic: str, partitions: list[int], groups: list[str] | None = None) -> ClusterRead:
        """The declared (or the given) groups' committed offsets of the Kafka topic `topic`'s
        `consumer_offsets:` names, read from its cluster and tied to the Kafka source the lake topic
        recorded (`io/kafka/groups.py`)."""
        from lakecleaner.io.kafka.groups import cluster_offsets

        spec = self.config.topics[topic]
        where = spec.consumer_offsets
        assert where is not None, "a topic whose offsets the lake keeps has no cluster to read them from"
        recorded = self.recorded_source(topic) if spec.mirror is not None else None
        wanted = sorted(spec.consumer_groups) if groups is None else groups
        return cluster_offsets(self.config.kafka_clusters[where.cluster], wanted, where.topic, partitions, recorded)

    def source_of(self, topic: str | None) -> str:
        """Where consumed retention of `topic` reads committed offsets, for people: a Kafka
        cluster (its name and bootstrap servers) and topic, or the lake's own store."""
        spec = None if topic is None else self.config.topics.get(topic)
        where = None if spec is None else spec.consumer_offsets
        if where is None:
            return f"the lake's {OFFSETS_PREFIX}"
        servers = self.config.kafka_clusters[where.cluster].bootstrap_servers
        return f"Kafka cluster {where.cluster} ({servers}), topic {where.topic}"

    def offsets_cluster(self, topic: str) -> str | None:
        """The Kafka cluster whose committed offsets consumed retention of `topic` reads, or None
        for the lake's own store (`_consumer_offsets/`)."""
        spec = self.config.topics.get(topic)
        return None if spec is None or spec.consumer_offsets is None else spec.consumer_offsets.cluster


def _min_position(
    partition: int,
    subscribed: list[str],
    offsets: Mapping[str, Mapping[int, CommittedOffset]],
    failures: Mapping[str, str],
    delta: int = 0,
) -> ConsumedPosition:
    """The minimum over the subscribed groups, in lake offsets (`delta` added to each); unknown
    when a group cannot be read or has no offset for the partition."""
    since = delta or None
    groups: dict[str, int | None] = {}
    for group in subscribed:
        committed = offsets.get(group, {}).get(partition)
        groups[group] = None if committed is None else committed.offset + delta
    if failures:
        groups.update({g: None for g in failures})
        name, reason = next(iter(sorted(failures.items())))
        return ConsumedPosition(None, groups, f"offsets of group {name} cannot be read: {reason}", since)
    if not subscribed:
        return ConsumedPosition(None, groups, "no consumer group is subscribed to the topic", since)
    missing = sorted(g for g, o in groups.items() if o is None)
    if missing:
        reason = f"group {missing[0]} has no committed offset for partition {partition}"
        return ConsumedPosition(None, groups, reason, since)
    return ConsumedPosition(min(o for o in groups.values() if o is not None), groups, since_offset=since)
