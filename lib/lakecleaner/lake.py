"""The Python API: a lake, its topics and their partition logs.

    lake = Lake.open("file:///tmp/lake")            # or s3://bucket/prefix, or a LakeConfig
    orders = lake.create_topic("orders", partitions=3, config={"cleanup.policy": "compact"})
    orders.partition(0).append([Record(b"k", b"v")])
    table = orders.partition(0).read()

A topic's config resolves as: overrides stored with the topic (set by `topics create --config`
or `topics alter`) over the topic's `config:` in the YAML file, over the YAML's broker-level
`defaults:`, over Kafka's defaults.
"""

from __future__ import annotations

import difflib
import functools
import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from lakecleaner.cleaner_state import CleanerStateStore
from lakecleaner.clock import wall_clock_ms
from lakecleaner.config import LONG_MAX, LakeConfig, TopicConfig, load_config, parse_config
from lakecleaner.errors import (
    ConditionFailed,
    CorruptManifest,
    LakeCleanerError,
    MirrorMismatch,
    ObjectNotFound,
    StorageError,
    TopicExists,
    TopicNotFound,
)
from lakecleaner.io import ObjectStore, open_store
from lakecleaner.io.concurrent import map_ordered
from lakecleaner.io.strict_json import Fields, Malformed, load_object
from lakecleaner.lake_id import lake_id_of
from lakecleaner.log.layout import (
    TABLE_FOLDER_NAMES,
    TOPICS_PREFIX,
    config_marker_key,
    partition_numbers,
    topic_metadata_key,
    topic_prefix,
)
from lakecleaner.log.manifest import Manifest
from lakecleaner.log.partition import PartitionLog
from lakecleaner.log.source import ADOPTION_WRITER, MIRROR_WRITER, KafkaSource, OwningSource
from lakecleaner.names import validate_partition, validate_topic_name
from lakecleaner.offsets import OffsetStore
from lakecleaner.runs.reports import RUNS_PREFIX

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TopicMetadata:
    """What the lake stores about a topic: its partition count, its own config overrides, and for a
    mirrored topic the Kafka topic it follows, by identity (`log/source.py`)."""

    name: str
    partitions: int
    overrides: Mapping[str, object] = field(default_factory=dict)
    created_ms: int = 0
    source: KafkaSource | None = None

    def to_json(self) -> bytes:
        data: dict[str, object] = {
            "name": self.name,
            "partitions": self.partitions,
            "config": dict(self.overrides),
            "created_ms": self.created_ms,
        }
        if self.source is not None:
            data["source"] = self.source.to_dict()
        return json.dumps(data, indent=1).encode()

    @staticmethod
    def from_json(data: bytes, location: str, name: str, max_partitions: int) -> TopicMetadata:
        """Parse strictly (`io/strict_json.py`) and validate a topic's topic.json, whose partition
        count may be at most `max_partitions` (`lake.max_partitions_per_topic`); CorruptManifest
        naming `location` and the fix, whatever the bytes hold."""
        fix = f"run `lakecleaner repair --topic {name}` (it rebuilds topic.json from the partitions in storage)"
        try:
            f = load_object(data, max_bytes=1 << 20, fractions=True)
            overrides = f.object("config", default={})
            source = f.optional_object("source")
            metadata = TopicMetadata(
                f.text("name", max_chars=249),
                f.integer("partitions", lo=1, hi=max_partitions),
                {k: _override(overrides, k) for k in overrides.names()},
                f.integer("created_ms", default=0),
                None if source is None else KafkaSource.from_fields(source),
            )
        except Malformed as exc:
            raise CorruptManifest(
                f"topic metadata {location} is corrupt ({exc}); {fix}, or raise lake.max_partitions_per_topic "
                f"({max_partitions}) if the topic really has more partitions"
            ) from None
        if metadata.name != name:
            raise CorruptManifest(f"topic metadata {location} names topic {metadata.name!r}, not {name!r}; {fix}")
        return metadata


def _override(overrides: Fields, key: str) -> object:
    """A stored config override: a string, a number or a bool (the values `topics create --config`,
    `topics alter` and the Python API store); their meaning is checked with the topic's config."""
    value = overrides.raw[key]
    if isinstance(value, bool):
        return overrides.flag(key)
    if isinstance(value, int):
        return overrides.integer(key, lo=-LONG_MAX)
    return overrides.number(key) if isinstance(value, float) else overrides.text(key, max_chars=4096)


@dataclass(frozen=True)
class TopicMetadataRepair:
    """A rebuilt topic.json: what it holds now, what the old one was, and whether its config
    overrides could be kept."""

    metadata: TopicMetadata
    previous_state: str
    overrides_kept: bool

    def to_dict(self) -> dict[str, object]:
        return {
            "topic": self.metadata.name,
            "partitions": self.metadata.partitions,
            "previous_state": self.previous_state,
            "config": dict(self.metadata.overrides),
            "overrides_kept": self.overrides_kept,
            "source": None if self.metadata.source is None else self.metadata.source.to_dict(),
        }


def _salvaged_source(data: bytes | None) -> KafkaSource | None:
    """The Kafka source a damaged topic.json still records, when it can be read whole: a repair
    that dropped it would let the next mirror take whatever topic the cluster now has under the
    name (the partitions' record samples still stop a rewritten log, `log/source.py`)."""
    try:
        found = load_object(data or b"", max_bytes=1 << 20, fractions=True).optional_object("source")
        return None if found is None else KafkaSource.from_fields(found)
    except Malformed:
        return None


def _salvaged(data: bytes | None, config: LakeConfig, name: str) -> tuple[dict[str, object], int, bool]:
    """What a damaged topic.json still says that can be trusted, read with the same strict decoder
    and override rules as a sound one (`TopicMetadata.from_json`): its config overrides when they
    are a valid set for the topic, its creation time when it is an integer; and whether the
    overrides were kept (False: there were none to read, or they were dropped)."""
    try:
        f = load_object(data or b"", max_bytes=1 << 20, fractions=True)
    except Malformed:
        return {}, 0, False
    try:
        created = f.integer("created_ms", default=0)
    except Malformed:
        created = 0
    try:
        fields = f.object("config")
        overrides = {k: _override(fields, k) for k in fields.names()}
        config.topic_config(name, overrides)
    except (Malformed, LakeCleanerError, ValueError):
        return {}, created, False
    return overrides, created, True


@dataclass(frozen=True)
class PartitionManifests:
    """A topic's readable manifests by partition, and why each other partition could not be read;
    `etags`: each readable manifest's etag as read, so a commit that starts from it needs no second
    read when nothing changed since (`PartitionLog.commit(known=)`)."""

    manifests: dict[int, Manifest]
    failures: dict[int, str]
    etags: dict[int, str]

    def known(self, partition: int) -> tuple[Manifest, str]:
        """The partition's manifest with its etag, for `PartitionLog.commit(known=)`."""
        return self.manifests[partition], self.etags[partition]


def failure_runs(failures: Mapping[int, str]) -> list[tuple[int, int, str]]:
    """(first, last, reason) for each run of consecutive partitions failing for the same reason,
    so that readers show a topic.json naming partitions storage does not hold as one line."""
    runs: list[tuple[int, int, str]] = []
    for p in sorted(failures):
        if runs and runs[-1][1] == p - 1 and runs[-1][2] == failures[p]:
            runs[-1] = (runs[-1][0], p, failures[p])
        else:
            runs.append((p, p, failures[p]))
    return runs


def partitions_label(first: int, last: int) -> str:
    """`3` for one partition, `3..9999` for a run of them."""
    return str(first) if first == last else f"{first}..{last}"


def _report_absent(topic: Topic, found: set[int], failures: dict[int, str]) -> None:
    """Every partition topic.json names that has no folder in storage is a failure, all of them
    sharing one message (one string, however many partitions), which names the fix."""
    reason = (
        f"topic.json names {topic.partitions} partitions but storage holds no folder for this one "
        f"(found {len(found)}); if topic.json is wrong, correct it with `lakecleaner repair --topic {topic.name}` "
        "after moving it aside, or recreate the missing partitions with `lakecleaner topics create "
        f"{topic.name} --if-not-exists`"
    )
    for p in range(topic.partitions):
        if p not in found:
            failures[p] = reason


def owning_source(config: LakeConfig, name: str, recorded: KafkaSource | None) -> OwningSource | None:
    """The source that alone appends to topic `name` (DESIGN section 9): its mirror when the config
    gives it `mirror:`, its adoption when `adopt:`; for a topic the config does not declare (a lake
    opened by its URI alone), the Kafka source its topic.json recorded; None for a topic that is its
    own source (declared without either: the config's word, so a mirror can be turned off)."""
    spec = config.topics.get(name)
    if spec is None and recorded is not None:
        return OwningSource(
            MIRROR_WRITER,
            f"Kafka topic {recorded.topic} (cluster id {recorded.cluster_id}), as its topic.json records",
            "produce to the Kafka topic instead, or declare the topic in the config file without `mirror:` to make "
            "the lake topic its own source",
        )
    if spec is not None and spec.mirror is not None:
        return OwningSource(
            MIRROR_WRITER,
            f"Kafka cluster {spec.mirror.cluster}'s topic {spec.mirror.topic} (`mirror:` in {config.source})",
            "produce to the Kafka topic instead, or remove `mirror:` to make the lake topic its own source",
        )
    if spec is not None and spec.adopt is not None:
        return OwningSource(
            ADOPTION_WRITER,
            f"Kafka Connect's S3 sink at {spec.adopt.uri} (`adopt:` in {config.source})",
            "write through the Kafka Connect sink instead, or remove `adopt:` to make the lake topic its own source",
        )
    return None


class PartitionUnreadable(LakeCleanerError):
    """A partition's manifest could not be read (the message says why and how to fix it)."""


class Topic:
    """A topic in the lake: metadata plus its effective config."""

    def __init__(self, lake: Lake, metadata: TopicMetadata) -> None:
        self.lake = lake
        self.metadata = metadata
        self.name = metadata.name
        self.config: TopicConfig = lake.config.topic_config(metadata.name, metadata.overrides)
        #: The source that alone appends to the topic, when it has one.
        self.owner = owning_source(lake.config, metadata.name, metadata.source)

    @property
    def partitions(self) -> int:
        return self.metadata.partitions

    def partition(self, partition: int) -> PartitionLog:
        """The log of one partition (nothing is read until it is used).

        Args:
            partition: 0 to `partitions - 1`.

        Returns:
            The partition's log, telling the lake's commit listeners of its commits.

        Raises:
            TopicNotFound: the topic has no such partition.
        """
        validate_partition(partition)
        if partition >= self.partitions:
            raise TopicNotFound(
                f"topic {self.name} has partitions 0..{self.partitions - 1}; partition {partition} does not exist"
            )
        return PartitionLog(self.lake.store, self.name, partition, self.config, self._follow(partition), self.owner)

    def _follow(self, partition: int) -> Callable[[Manifest, Manifest], None] | None:
        """What a partition's commits tell: each of the lake's commit listeners, in turn."""
        listeners = self.lake.listeners
        if not listeners:
            return None

        def committed(before: Manifest, after: Manifest) -> None:
            for listener in listeners:
                listener.committed(self, partition, before, after)

        return committed

    def partition_logs(self) -> list[PartitionLog]:
        return [self.partition(p) for p in range(self.partitions)]

    def read_manifests(self, partitions: Iterable[int] | None = None) -> PartitionManifests:
        """The manifests of every (or the given) partition, read concurrently. A partition whose
        manifest cannot be read (missing, corrupt, or the storage failing after its retries) is
        reported in `failures` with the reason, and the others are still returned: one damaged
        partition never hides the rest of the topic."""
        return self.lake.read_manifests_of({self: partitions})[self.name]

    def manifests(self) -> dict[int, Manifest]:
        """Every partition's manifest; raises the first partition's error when any cannot be read
        (for callers that need the whole topic; the rest use `read_manifests`)."""
        read = self.read_manifests()
        if read.failures:
            partition, reason = next(iter(read.failures.items()))
            raise PartitionUnreadable(f"partition {self.name}-{partition}: {reason}")
        return read.manifests


class CommitListener(Protocol):
    """Told of every manifest commit of a partition of the lake, after it (Kafka's
    `LogOffsetsListener`: a notification; what the listener does is its own, the commit stands).
    Registered where a process is assembled (`extras.open_lake`), so the lake imports none."""

    def committed(self, topic: Topic, partition: int, before: Manifest, after: Manifest) -> None: ...


class Lake:
    """A lake root (s3:// or file://) with its config, and the listeners told of its commits."""

    def __init__(self, store: ObjectStore, config: LakeConfig, listeners: Sequence[CommitListener] = ()) -> None:
        self.store = store
        self.config = config
        self.listeners = tuple(listeners)
        self.offsets = OffsetStore(store, config, self._recorded_source)
        self.cleaner_state = CleanerStateStore(store)

    def _recorded_source(self, name: str) -> KafkaSource | None:
        """The Kafka source topic `name` recorded (None: none, or no such topic yet)."""
        try:
            return self.topic(name).metadata.source
        except TopicNotFound:
            return None

    @classmethod
    def open(cls, target: str | LakeConfig | None = None, listeners: Sequence[CommitListener] = ()) -> Lake:
        """Open a lake by URI (with default settings), by a loaded LakeConfig, or from the config
        file; with `listeners` told of its commits (a process that works on the lake opens it with
        `extras.open_lake`, which adds the installed extras' listeners).

        Args:
            target: `s3://bucket/prefix` or `file:///path`; a `LakeConfig`; None for the config
                file (`$LAKECLEANER_CONFIG`, else `./lakecleaner.yaml`).
            listeners: told of every manifest commit of the lake's partitions, in order.

        Returns:
            The lake. Nothing is read from storage until it is used.

        Raises:
            ConfigError: the config file is missing, unreadable or invalid (naming the key).
            StorageError: the URI's scheme is neither s3:// nor file://.
        """
        if isinstance(target, LakeConfig):
            config = target
        elif isinstance(target, str):
            config = parse_config({"lake": {"uri": target}}, "<uri>")
        else:
            config = load_config()
        return cls(open_store(config.lake_uri, config.storage), config, listeners)

    @property
    def uri(self) -> str:
        return self.config.lake_uri

    @functools.cached_property
    def lake_id(self) -> str:
        """The lake's id (`lake_id.py`), read or made once per `Lake`."""
        return lake_id_of(self.store)

    def create_topic(
        self,
        name: str,
        partitions: int | None = None,
        config: Mapping[str, object] | None = None,
        *,
        exist_ok: bool = False,
        now_ms: int | None = None,
    ) -> Topic:
        """Create a topic and its partitions. The partition count defaults to the YAML's, else 1.

        The config overrides are validated before anything is written. Creation is
        idempotent after a crash: partitions already created are kept.

        Args:
            name: a legal Kafka topic name (`names.validate_topic_name`).
            partitions: 1 to `lake.max_partitions_per_topic`; None for the config's, else 1.
            config: Kafka topic keys over the lake's defaults (`cleanup.policy`, `segment.bytes`, …).
            exist_ok: an existing topic is returned as it is instead of refused.
            now_ms: the creation time (epoch ms); None for the wall clock.

        Returns:
            The topic, with its partitions' empty manifests written.

        Raises:
            InvalidTopicName: the name breaks Kafka's rule.
            ValueError: the partition count is out of range.
            ConfigError: an override names an unknown key or an invalid value.
            TopicExists: the topic exists and `exist_ok` is false.
            StorageError: the store failed after its retries.
        """
        validate_topic_name(name)
        spec = self.config.topics.get(name)
        count = partitions if partitions is not None else (spec.partitions if spec else 1)
        limit = self.config.max_partitions_per_topic
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= limit:
            raise ValueError(
                f"topic {name}: partitions={count!r} must be a whole number from 1 to {limit} "
                "(lake.max_partitions_per_topic)"
            )
        overrides = dict(config or {})
        self.config.topic_config(name, overrides)
        now = wall_clock_ms() if now_ms is None else now_ms
        metadata = TopicMetadata(name, count, overrides, now)
        try:
            self._put_metadata(name, metadata, None)
        except ConditionFailed:
            if not exist_ok:
                raise TopicExists(f"topic {name} already exists in {self.uri}") from None
            metadata = self._load_metadata(name)
        topic = Topic(self, metadata)
        map_ordered(lambda log: log.create(now), topic.partition_logs(), self.config.storage.max_concurrency)
        return topic

    def add_partitions(self, name: str, count: int, *, now_ms: int | None = None) -> Topic:
        """Grow the topic to `count` partitions, as Kafka's CreatePartitions does: topic.json is
        replaced conditionally, then the new partitions' empty manifests are created (idempotent
        after a crash, as `create_topic`). A topic never shrinks: fewer partitions is an error."""
        current, etag = self._read_metadata(name)
        limit = self.config.max_partitions_per_topic
        if count < current.partitions or count > limit:
            raise ValueError(
                f"topic {name} has {current.partitions} partitions: it can grow to at most {limit} "
                f"(lake.max_partitions_per_topic), never shrink; {count} asked"
            )
        if count > current.partitions:
            grown = replace(current, partitions=count)
            self._put_metadata(name, grown, etag)
            current = grown
        topic = Topic(self, current)
        now = wall_clock_ms() if now_ms is None else now_ms
        map_ordered(lambda log: log.create(now), topic.partition_logs(), self.config.storage.max_concurrency)
        return topic

    def alter_topic(self, name: str, config: Mapping[str, object]) -> Topic:
        """Set topic-level overrides (merged over the stored ones; a None value removes a key)."""
        current, etag = self._read_metadata(name)
        merged = {**current.overrides, **config}
        merged = {k: v for k, v in merged.items() if v is not None}
        self.config.topic_config(name, merged)
        updated = replace(current, overrides=merged)
        self._put_metadata(name, updated, etag)
        return Topic(self, updated)

    def record_source(self, name: str, source: KafkaSource, expected: KafkaSource | None) -> Topic:
        """Record the Kafka topic the lake topic mirrors (`log/source.py`) in its topic.json, by a
        conditional write over the topic.json that held `expected`; MirrorMismatch, with nothing
        written, when another process recorded something else meanwhile."""
        current, etag = self._read_metadata(name)
        if current.source != expected:
            raise MirrorMismatch(
                f"topic {name}'s recorded Kafka source changed while this run compared it (another mirror or "
                "`--restart-from-kafka` ran at the same time); nothing was written: run the mirror again"
            )
        updated = replace(current, source=source)
        try:
            self._put_metadata(name, updated, etag)
        except ConditionFailed:
            raise MirrorMismatch(
                f"topic {name}'s topic.json changed while this run recorded its Kafka source; nothing was "
                "written: run the mirror again"
            ) from None
        return Topic(self, updated)

    def _put_metadata(self, name: str, metadata: TopicMetadata, etag: str | None) -> None:
        """Write topic.json conditionally (create when `etag` is None), after the pending marker
        that tells the topic's summary readers it may be stale (summaries.layout). A write refused
        because topic.json holds something else takes its marker back: it will never land, and
        the marker would keep the views off the topic's summary until it expired."""
        data = metadata.to_json()
        marker = config_marker_key(name, data)
        self.store.write(marker, b"")
        try:
            if etag is None:
                self.store.create(topic_metadata_key(name), data)
            else:
                self.store.replace(topic_metadata_key(name), data, etag)
        except ConditionFailed:
            try:
                stored: bytes | None = self.store.read(topic_metadata_key(name))
            except ObjectNotFound:
                stored = None
            if stored != data:  # not this write's own reply, lost and retried
                self.store.delete(marker)
            raise

    def _read_metadata(self, name: str) -> tuple[TopicMetadata, str]:
        """The topic's validated topic.json and its etag."""
        metadata, etag, _ = self.read_metadata(name)
        return metadata, etag

    def read_metadata(self, name: str) -> tuple[TopicMetadata, str, bytes]:
        """The topic's validated topic.json, its etag and its bytes (TopicNotFound when absent)."""
        validate_topic_name(name)
        key = topic_metadata_key(name)
        try:
            data, etag = self.store.read_with_etag(key)
        except ObjectNotFound:
            raise TopicNotFound(
                f"topic {name} does not exist in {self.uri}; create it with `lakecleaner topics create {name}`"
            ) from None
        metadata = TopicMetadata.from_json(data, self.store.location(key), name, self.config.max_partitions_per_topic)
        return metadata, etag, data

    def repair_metadata(self, name: str, *, now_ms: int | None = None) -> TopicMetadataRepair | None:
        """Rebuild a missing or damaged topic.json from the partitions found in storage (`lakecleaner
        repair --topic`): the partition count is one past the highest `partition=<p>/` folder; the
        config overrides are kept when the damaged object still holds a valid set, else dropped and
        said so. None when topic.json is readable (nothing to do). TopicNotFound when storage holds
        no partition of the topic. The write is conditional, like every other."""
        validate_topic_name(name)
        key = topic_metadata_key(name)
        try:
            data: bytes | None
            data, etag = self.store.read_with_etag(key)
        except ObjectNotFound:
            data, etag = None, None
        if data is not None:
            try:
                TopicMetadata.from_json(data, self.store.location(key), name, self.config.max_partitions_per_topic)
                return None
            except CorruptManifest:
                pass
        folders = self.store.list_folders(topic_prefix(name))
        found = [p for p in partition_numbers(folders) if p < self.config.max_partitions_per_topic]
        if not found:
            raise TopicNotFound(
                f"topic {name} has no partition in {self.uri}: there is nothing to rebuild its topic.json from"
            )
        overrides, created, kept = _salvaged(data, self.config, name)
        metadata = TopicMetadata(
            name,
            max(found) + 1,
            overrides,
            created or (wall_clock_ms() if now_ms is None else now_ms),
            _salvaged_source(data),
        )
        self._put_metadata(name, metadata, etag)
        return TopicMetadataRepair(metadata, "missing" if data is None else "damaged", kept)

    def _load_metadata(self, name: str) -> TopicMetadata:
        return self._read_metadata(name)[0]

    def topic(self, name: str) -> Topic:
        """The topic `name`, its topic.json read and validated.

        Args:
            name: the topic's name.

        Returns:
            The topic, with its effective config (its overrides over the lake's defaults).

        Raises:
            TopicNotFound: the lake has no such topic.
            LakeCleanerError: its topic.json is damaged (the message names the field).
            StorageError: the store failed after its retries.
        """
        try:
            return Topic(self, self._load_metadata(name))
        except TopicNotFound as exc:
            near = self.topics_like(name)
            if not near:
                raise
            raise TopicNotFound(
                f"topic {name} does not exist in {self.uri}; did you mean {' or '.join(near)}? (else create it with "
                f"`lakecleaner topics create {name}`)"
            ) from exc

    def topics_like(self, name: str) -> list[str]:
        """The lake's and the config's topics whose names are close to `name` (a misspelling, `_`
        for `-`), closest first, at most three: what an error about a missing topic suggests."""
        known = sorted({*self.list_topics(), *self.config.topics})
        return difflib.get_close_matches(name, known, n=3, cutoff=0.75)

    def read_topics(self, names: Iterable[str]) -> tuple[dict[str, Topic], dict[str, str]]:
        """The named topics, their topic.json files read concurrently, and why each other one
        could not be opened (no such topic, a corrupt topic.json, the storage failing)."""
        wanted = list(names)

        def read(name: str) -> Topic | LakeCleanerError:
            try:
                return self.topic(name)
            except LakeCleanerError as exc:
                return exc

        results = dict(zip(wanted, map_ordered(read, wanted, self.config.storage.max_concurrency), strict=True))
        topics = {n: r for n, r in results.items() if isinstance(r, Topic)}
        return topics, {n: str(r) for n, r in results.items() if not isinstance(r, Topic)}

    def read_manifests_of(self, topics: Mapping[Topic, Iterable[int] | None]) -> dict[str, PartitionManifests]:
        """Every (or the given) partition's manifest of each topic, all read in one concurrent
        fan-out (a lake-wide view costs one round of requests, not one per topic). A partition
        whose manifest cannot be read is in its topic's `failures` with the reason.

        For a whole topic, its `partition=<p>/` folders are listed first (one delimited LIST per
        thousand partitions) and only the partitions found are read: a partition count in
        topic.json that storage does not back costs one shared failure line, not a request and
        an error object per partition named (issue 45: a damaged or lying topic.json)."""
        present = self._present_partitions([t for t, chosen in topics.items() if chosen is None])
        out = {topic.name: PartitionManifests({}, {}, {}) for topic in topics}
        work: list[tuple[Topic, int]] = []
        for topic, chosen in topics.items():
            if chosen is not None:
                work.extend((topic, p) for p in chosen)
                continue
            found = present[topic.name]
            named = range(topic.partitions)
            work.extend((topic, p) for p in (named if found is None else sorted(found.intersection(named))))
            if found is not None and len(found.intersection(named)) < len(named):
                _report_absent(topic, found, out[topic.name].failures)

        def read(item: tuple[Topic, int]) -> tuple[Manifest, str] | LakeCleanerError:
            try:
                return item[0].partition(item[1]).load()
            except LakeCleanerError as exc:
                return exc

        for (topic, p), result in zip(work, map_ordered(read, work, self.config.storage.max_concurrency), strict=True):
            if isinstance(result, LakeCleanerError):
                out[topic.name].failures[p] = str(result)
            else:
                out[topic.name].manifests[p], out[topic.name].etags[p] = result
        return out

    def _present_partitions(self, topics: list[Topic]) -> dict[str, set[int] | None]:
        """The partitions each topic's folder holds in storage, by one listing per topic, read
        concurrently; None for a topic whose listing failed (its partitions are then read one by
        one, and each failure says why)."""

        def listed(topic: Topic) -> set[int] | None:
            try:
                return set(partition_numbers(self.store.list_folders(topic_prefix(topic.name))))
            except StorageError:
                return None

        found = map_ordered(listed, topics, self.config.storage.max_concurrency)
        return {topic.name: result for topic, result in zip(topics, found, strict=True)}

    def has_table_folders(self, name: str) -> bool:
        """Whether topic `name`'s prefix holds a folder Iceberg tables own (`TABLE_FOLDER_NAMES`;
        one delimited LIST): what gc and the erasure audit look at, whatever the config says now
        (a topic whose tables were turned off keeps them until gc empties them). A store that
        lists emptied folders (SeaweedFS) answers yes for them: the caller then lists them."""
        return any(folder in TABLE_FOLDER_NAMES for folder in self.store.list_folders(topic_prefix(name)))

    def list_topics(self) -> list[str]:
        """The topics in the lake: the folders under topics/, by one delimited listing (a folder
        without a readable topic.json is listed, and fails where it is opened, saying why)."""
        return list(self.store.list_folders(TOPICS_PREFIX))


__all__ = [
    "RUNS_PREFIX",
    "CommitListener",
    "Lake",
    "Topic",
    "TopicMetadata",
    "TopicMetadataRepair",
    "failure_runs",
    "partitions_label",
]
