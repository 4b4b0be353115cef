"""`lakecleaner adopt connect`: a topic's log built from what Kafka Connect's S3 sink wrote (issue 49).

The sink's files are listed and named (`connect_names`), planned (`connect_plan`: settled,
re-delivered, already adopted, offsets), read (`connect_read`) and appended to the topic's
partitions at the records' own offsets, as a mirror appends (`PartitionLog.append(offsets=)`), a
commit per `APPEND_RECORDS` records, so a run that stops leaves a log that the next run goes on
from. They are converted, never registered in place: the sink's files hold no offsets, and keys
and headers only in separate files, so no file is a segment as it is. Once adopted, the topic is
like any other: compaction, retention, the quality gate and the erasure audit apply unchanged.
A run reads the files no earlier run adopted and never one younger than the settle time. The
sink's files it adopted are recorded for gc, which deletes them once due (`adopt.originals`),
unless `keep_originals`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakecleaner.adopt.connect_names import NotASinkFile, SinkFile, parse_sink_key
from lakecleaner.adopt.connect_plan import (
    AdoptionPlan,
    Bundle,
    interleaved_windows,
    next_of_kind,
    plan_adoption,
    record_offsets,
)
from lakecleaner.adopt.connect_read import BundleRecords, read_bundle
from lakecleaner.adopt.originals import Original, record_originals
from lakecleaner.clock import wall_clock_ms
from lakecleaner.config.adopt import ConnectSource
from lakecleaner.errors import LakeCleanerError, TopicNotFound
from lakecleaner.io import ObjectStore, open_store
from lakecleaner.log.source import ADOPTION_WRITER

if TYPE_CHECKING:
    from lakecleaner.lake import Lake, Topic
    from lakecleaner.log.partition import PartitionLog

#: Records per append (one commit each).
APPEND_RECORDS = 200_000
#: Gaps listed in a report, at most.
GAPS_SHOWN = 20


@dataclass
class PartitionAdoption:
    """What a run appended to one partition."""

    files: int = 0
    records: int = 0
    next_offset: int = 0
    gaps: list[tuple[int, int]] = field(default_factory=list)
    interleaved_windows: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "records": self.records,
            "next_offset": self.next_offset,
            "gaps": [{"from": a, "to": b} for a, b in self.gaps[:GAPS_SHOWN]],
            "gap_count": len(self.gaps),
            "interleaved_windows": self.interleaved_windows,
        }


@dataclass
class AdoptionReport:
    """One adoption run: what it planned and, unless a dry run, what it appended."""

    topic: str
    source: str
    dry_run: bool
    plan: AdoptionPlan
    ignored: list[str] = field(default_factory=list)
    partitions: dict[int, PartitionAdoption] = field(default_factory=dict)
    #: Partitions whose adoption stopped, with why (what they appended before stays).
    failures: dict[int, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "source": self.source,
            "dry_run": self.dry_run,
            "plan": self.plan.to_dict(),
            "ignored": self.ignored,
            "partitions": {str(p): a.to_dict() for p, a in sorted(self.partitions.items())},
            "failures": {str(p): why for p, why in sorted(self.failures.items())},
        }


def adopt_connect(
    lake: Lake, topic: str, source: ConnectSource, *, dry_run: bool = False, now_ms: int | None = None
) -> AdoptionReport:
    """Adopt what the sink wrote of `topic` since the last run (creating the topic, with as many
    partitions as the sink's files name, when it does not exist). A partition whose files cannot
    be read stops at the file before (reported in `failures`); the others proceed."""
    store = open_store(source.uri, lake.config.storage)
    files, ignored = sink_files(store, topic, source)
    log_topic = _topic_for(lake, topic, files, create=not dry_run)
    compacted = log_topic.config.compact if log_topic is not None else lake.config.topic_config(topic).compact
    has_sidecars = any(f.view == "keys" for f in files)
    if compacted and not has_sidecars and source.key_field is None:
        raise LakeCleanerError(
            f"topic {topic} is compacted (cleanup.policy includes compact) but the sink's files under "
            f"{source.uri} hold no keys: set store.kafka.keys=true on the connector, or pass --key-field "
            "with the value's key field (e.g. after.id for Debezium); time and size retention need neither"
        )
    next_offsets = (
        {} if log_topic is None else {log.partition: log.manifest().next_offset for log in log_topic.partition_logs()}
    )
    now = wall_clock_ms() if now_ms is None else now_ms
    plan = plan_adoption(files, next_offsets, now, source.settle_ms, keys_from_sidecars=has_sidecars)
    report = AdoptionReport(topic, source.uri, dry_run, plan, ignored)
    if dry_run or log_topic is None:
        return report
    for partition, bundles in sorted(plan.partitions.items()):
        log = log_topic.partition(partition)
        try:
            report.partitions[partition] = _adopt_partition(lake, store, log, next_offsets[partition], bundles, source)
        except LakeCleanerError as exc:  # a damaged file stops its partition; the others proceed
            report.failures[partition] = str(exc)
    return report


def sink_files(store: ObjectStore, topic: str, source: ConnectSource) -> tuple[list[SinkFile], list[str]]:
    """The source folder's files the sink wrote for `topic` in the source's format, and the keys of
    the other objects there."""
    files, ignored = [], []
    for obj in store.list(""):
        try:
            sink_file = parse_sink_key(obj.key, topic, obj.size, obj.mtime_ms, source.tombstone_partition)
        except NotASinkFile:
            ignored.append(obj.key)
            continue
        if source.format is None or sink_file.format == source.format:
            files.append(sink_file)
        else:
            ignored.append(obj.key)
    return files, ignored


def _topic_for(lake: Lake, topic: str, files: Sequence[SinkFile], *, create: bool) -> Topic | None:
    """The lake's topic, created for the sink's partitions when missing (unless a dry run); one
    with fewer partitions than the sink's files name is refused."""
    needed = max((f.partition for f in files), default=0) + 1
    try:
        existing = lake.topic(topic)
    except TopicNotFound:
        if not create:
            return None
        spec = lake.config.topics.get(topic)
        return lake.create_topic(topic, max(needed, spec.partitions if spec else 1), exist_ok=True)
    if existing.partitions < needed:
        raise LakeCleanerError(
            f"topic {topic} has {existing.partitions} partitions and the sink wrote partition {needed - 1}: "
            f"add partitions first (lakecleaner topics alter {topic} --partitions {needed})"
        )
    return existing


def _adopt_partition(
    lake: Lake, store: ObjectStore, log: PartitionLog, position: int, bundles: Sequence[Bundle], source: ConnectSource
) -> PartitionAdoption:
    """Append the bundles' records from the log's next offset `position` on (`previous` is the
    last offset appended: the log's next offset is always previous + 1)."""
    done = PartitionAdoption(next_offset=position)
    limits = next_of_kind(bundles)
    previous = position - 1
    failure: LakeCleanerError | None = None
    for whole in _chunks(list(zip(bundles, limits, strict=True))):
        read, failure = _read_until_failure(store, [b for b, _ in whole], source)
        chunk = whole[: len(read)]
        files = [(b.start, b.main.tombstones, len(r.values), limit) for (b, limit), r in zip(chunk, read, strict=True)]
        # The first run of bundles starts with one adopted before: its records below the log's next
        # offset are dropped. Later runs follow the records appended before them.
        offsets = record_offsets(files, previous=-1 if done.files == 0 else previous)
        done.interleaved_windows += interleaved_windows(files)
        rows: dict[str, list[Any]] = {"key": [], "value": [], "timestamp": [], "headers": []}
        kept: list[int] = []
        for records, file_offsets in zip(read, offsets, strict=True):
            for i, offset in enumerate(file_offsets):
                if offset > previous:  # -1: a re-delivered record; below: adopted before
                    kept.append(offset)
                    rows["key"].append(records.keys[i])
                    rows["value"].append(records.values[i])
                    rows["timestamp"].append(records.timestamps[i])
                    rows["headers"].append(records.headers[i])
        order = sorted(range(len(kept)), key=kept.__getitem__)
        offsets_in_order = [kept[i] for i in order]
        for a, b in zip([previous, *offsets_in_order], offsets_in_order, strict=False):
            if b > a + 1 and a >= 0:
                done.gaps.append((a + 1, b - 1))
        if kept:
            table = pa.table({name: [values[i] for i in order] for name, values in rows.items()})
            log.append(table, offsets=offsets_in_order, writer=ADOPTION_WRITER)
            previous = offsets_in_order[-1]
        adopted_ms = wall_clock_ms()
        adopted = [Original(f.key, log.partition, previous + 1, adopted_ms) for b, _ in chunk for f in b.objects]
        record_originals(lake, log.topic, source, adopted)
        done.files += len(chunk)
        done.records += len(kept)
        done.next_offset = previous + 1
        if failure is not None:
            raise failure  # what the files before it held is appended
    return done


def _read_until_failure(
    store: ObjectStore, bundles: Sequence[Bundle], source: ConnectSource
) -> tuple[list[BundleRecords], LakeCleanerError | None]:
    """The bundles' records, up to the first that cannot be read (and why it cannot)."""
    read = []
    for bundle in bundles:
        try:
            read.append(read_bundle(store, bundle, source.key_field, source.timestamp_field))
        except LakeCleanerError as exc:
            return read, exc
    return read, None


def _chunks(items: list[tuple[Bundle, int | None]]) -> Iterator[list[tuple[Bundle, int | None]]]:
    """The bundles in runs of about APPEND_RECORDS records (by size: a record is taken as 100 bytes)."""
    chunk: list[tuple[Bundle, int | None]] = []
    size = 0
    for item in items:
        chunk.append(item)
        size += sum(f.size for f in item[0].objects)
        if size >= APPEND_RECORDS * 100:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


__all__ = [
    "APPEND_RECORDS",
    "AdoptionReport",
    "ConnectSource",
    "PartitionAdoption",
    "adopt_connect",
    "sink_files",
]
