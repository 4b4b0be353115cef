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

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakecleaner.adopt.assemble import RECORD_COLUMNS, assemble
from lakecleaner.adopt.connect_names import NotASinkFile, SinkFile, parse_sink_key
from lakecleaner.adopt.connect_plan import (
    AdoptionPlan,
    Bundle,
    interleaved_windows,
    next_of_kind,
    plan_adoption,
    record_offsets,
)
from lakecleaner.adopt.connect_read import BundleRecords, ChangeEvents, read_bundle
from lakecleaner.adopt.late import check_below
from lakecleaner.adopt.originals import AdoptedSource, Original, adopted_sources, record_originals
from lakecleaner.clock import wall_clock_ms
from lakecleaner.config.adopt import ConnectSource
from lakecleaner.errors import LakeCleanerError, TopicNotFound
from lakecleaner.faults import crash_point
from lakecleaner.io import ObjectStore, open_store
from lakecleaner.io.concurrent import map_ordered
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
    #: Files kept, not adopted, because they arrived after their offsets were passed (key: why).
    late: dict[str, str] = field(default_factory=dict)
    #: Tombstones of files that came late, applied at the next offsets, and those a later record
    #: of their key superseded (`adopt.late`).
    late_tombstones: int = 0
    superseded_tombstones: int = 0
    #: The files adopted (a bundle's value file, or its tombstone folder's keys file).
    adopted: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "records": self.records,
            "next_offset": self.next_offset,
            "gaps": [{"from": a, "to": b} for a, b in self.gaps[:GAPS_SHOWN]],
            "gap_count": len(self.gaps),
            "interleaved_windows": self.interleaved_windows,
            "late": self.late,
            "late_tombstones": self.late_tombstones,
            "superseded_tombstones": self.superseded_tombstones,
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
    #: The partition of each file the run saw, by key.
    partition_of: dict[str, int] = field(default_factory=dict)

    def files(self) -> dict[int, list[dict[str, str]]]:
        """Every file the run saw, by partition, with what became of it and why: adopted, adopted
        by an earlier run, left for a later run, kept and not adopted, re-delivered (another copy
        read), or not adopted (its partition stopped at it or before it, or the run was a dry run)."""
        plan = self.plan
        status: dict[str, tuple[str, str]] = {}
        for key in plan.adopted_before:
            status[key] = ("adopted before", "the ledger holds it, unchanged")
        for key, why in plan.unsettled.items():
            status[key] = ("left for a later run", why)
        for read, other in plan.re_delivered:
            status[other] = ("re-delivered", f"the same offsets were read from {read}")
        for partition, bundles in plan.partitions.items():
            stopped = self.failures.get(partition, "a dry run reads, and adopts nothing")
            for bundle in bundles:
                status[bundle.main.key] = ("not adopted", stopped)
        for done in self.partitions.values():
            status.update({key: ("adopted", "") for key in done.adopted})
        for key, why in {**plan.late, **{k: w for d in self.partitions.values() for k, w in d.late.items()}}.items():
            status[key] = ("kept, not adopted", why)
        out: dict[int, list[dict[str, str]]] = {}
        for key, (what, why) in sorted(status.items()):
            out.setdefault(self.partition_of.get(key, -1), []).append({"file": key, "status": what, "reason": why})
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "source": self.source,
            "dry_run": self.dry_run,
            "plan": self.plan.to_dict(),
            "ignored": self.ignored,
            "partitions": {str(p): a.to_dict() for p, a in sorted(self.partitions.items())},
            "failures": {str(p): why for p, why in sorted(self.failures.items())},
            "files": {str(p): files for p, files in sorted(self.files().items())},
        }


def adopt_connect(
    lake: Lake,
    topic: str,
    source: ConnectSource,
    *,
    dry_run: bool = False,
    now_ms: int | None = None,
    prefer: Collection[str] = (),
) -> AdoptionReport:
    """Adopt what the sink wrote of `topic` since the last run (creating the topic, with as many
    partitions as the sink's files name, when it does not exist). A partition whose files cannot
    be read stops at the file before, and one with a conflict (a file changed after adoption, two
    files holding one offset with other bytes) adopts nothing more: each reported in `failures`;
    the others proceed. A dry run reads the files it would adopt, and says what would stop a
    partition.

    Args:
        lake: the lake (opened with `extras.open_lake` for its tables to follow).
        topic: the topic, as the sink names it in its files.
        source: the sink's folder and how to read it (format, key and timestamp fields, settle
            time, tombstone folder, deletes, whether gc keeps the originals).
        dry_run: read and plan only; write nothing.
        now_ms: the time against which files are settled; None for the wall clock.
        prefer: objects that changed after adoption, or one of two conflicting files, to take
            as they are now.

    Returns:
        The plan and, per partition, the files and records adopted, gaps, late files, failures;
        `files()` lists every file the run saw with what became of it.

    Raises:
        LakeCleanerError: a compacted topic whose sink stored no keys and no `key_field` is given.
        StorageError: the source's or the lake's store failed after its retries.
    """
    store = open_store(source.uri, lake.config.storage)
    files, ignored = sink_files(store, topic, source)
    if not files and not ignored and not _adopted_from(lake, topic, source.uri):
        raise LakeCleanerError(
            f"{source.uri} holds no Kafka Connect S3 sink file of topic {topic} (<topic>+<partition>+<offset> under "
            f"topics/{topic}/ or the sink's own folders): check --from and the topic's name"
        )
    log_topic = _topic_for(lake, topic, files, create=not dry_run)
    beyond = _beyond(topic, log_topic.partitions if log_topic else lake.config.max_partitions_per_topic, files)
    files = [f for f in files if f.partition not in beyond]
    compacted = log_topic.config.compact if log_topic is not None else lake.config.topic_config(topic).compact
    events = ChangeEvents(
        source.key_field,
        source.timestamp_field,
        tombstones=compacted and source.deletes == "tombstone",
        require_keys=compacted,
    )
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
    ledger = next((a for a in adopted_sources(lake, topic) if a.source.uri == source.uri), None)
    plan = plan_adoption(files, next_offsets, now, source.settle_ms, has_sidecars, ledger, prefer)
    report = AdoptionReport(topic, source.uri, dry_run, plan, ignored, partition_of={f.key: f.partition for f in files})
    report.failures.update(beyond)
    if dry_run or log_topic is None:
        report.failures.update(_would_stop(store, plan, events, lake.config.storage.max_concurrency))
        return report
    for partition, bundles in sorted(plan.partitions.items()):
        log = log_topic.partition(partition)
        done = report.partitions[partition] = PartitionAdoption(next_offset=next_offsets[partition])
        try:
            _adopt_partition(lake, store, log, done, bundles, source, events, ledger, plan.tracked_from, prefer)
        except LakeCleanerError as exc:  # a damaged file stops its partition (what came before stays); the others go on
            report.failures[partition] = str(exc)
    return report


def _would_stop(store: ObjectStore, plan: AdoptionPlan, events: ChangeEvents, max_workers: int) -> dict[int, str]:
    """A dry run's reading of the files it would adopt: what would stop each partition (a file
    that does not parse, a record without a key on a compacted topic, a timestamp out of range),
    with the file and the line or record."""
    out = {}
    for partition, bundles in sorted(plan.partitions.items()):
        _, failure = _read_until_failure(store, bundles, events, max_workers)
        if failure is not None:
            out[partition] = f"would stop: {failure}"
    return out


def sink_files(store: ObjectStore, topic: str, source: ConnectSource) -> tuple[list[SinkFile], list[str]]:
    """The source folder's files the sink wrote for `topic` in the source's format, and the keys of
    the other objects there."""
    files, ignored = [], []
    for obj in store.list(""):
        try:
            sink_file = parse_sink_key(
                obj.key, topic, obj.size, obj.mtime_ms, source.tombstone_partition, obj.version_tag
            )
        except NotASinkFile:
            ignored.append(obj.key)
            continue
        if source.format is None or sink_file.format == source.format:
            files.append(sink_file)
        else:
            ignored.append(obj.key)
    return files, ignored


def _topic_for(lake: Lake, topic: str, files: Sequence[SinkFile], *, create: bool) -> Topic | None:
    """The lake's topic, created for the sink's partitions when missing (unless a dry run; as many
    as the sink's files name, within `lake.max_partitions_per_topic`)."""
    try:
        return lake.topic(topic)
    except TopicNotFound:
        if not create:
            return None
    limit = lake.config.max_partitions_per_topic
    needed = max((f.partition for f in files if f.partition < limit), default=0) + 1
    spec = lake.config.topics.get(topic)
    return lake.create_topic(topic, max(needed, spec.partitions if spec else 1), exist_ok=True)


def _adopted_from(lake: Lake, topic: str, uri: str) -> bool:
    """Whether the topic has adopted from `uri` before (its originals may all be deleted now)."""
    return any(a.source.uri == uri for a in adopted_sources(lake, topic))


def _beyond(topic: str, partitions: int, files: Sequence[SinkFile]) -> dict[int, str]:
    """Why the files of each partition past the topic's are not adopted (the others are)."""
    return {
        p: f"the sink wrote partition {p} but topic {topic} has {partitions} partitions: add partitions first "
        f"(lakecleaner topics alter {topic} --partitions {p + 1}), or move its files aside"
        for p in sorted({f.partition for f in files if f.partition >= partitions})
    }


class AdoptionConflict(LakeCleanerError):
    """Files that hold one offset with other bytes, or a file that changed after it was adopted:
    the partition is held, and every file kept, until someone decides (`--prefer`, or moving one
    aside)."""


def _adopt_partition(
    lake: Lake,
    store: ObjectStore,
    log: PartitionLog,
    done: PartitionAdoption,
    bundles: Sequence[Bundle],
    source: ConnectSource,
    events: ChangeEvents,
    ledger: AdoptedSource | None,
    tracked_from: Mapping[int, int],
    prefer: Collection[str],
) -> None:
    """Append the bundles' records from the log's next offset (`done.next_offset`) on, counting into
    `done` as it goes, so that a partition that stops still says what it adopted (`previous` is the
    last offset appended: the log's next offset is always previous + 1), a chunk of bundles a
    commit, as columns. The ledger is written before each append (`adopt.originals`); a chunk
    with a conflict appends nothing and stops the partition (AdoptionConflict), unless each file
    it names is one of `prefer`."""
    limits = next_of_kind(bundles)
    previous = done.next_offset - 1
    gaps = list(ledger.gaps.get(log.partition, ())) if ledger is not None else []
    failure: LakeCleanerError | None = None
    held: list[tuple[tuple[Bundle, int | None], BundleRecords]] = []
    for whole in _chunks(list(zip(bundles, limits, strict=True))):
        fresh, failure = _read_until_failure(store, [b for b, _ in whole], events, lake.config.storage.max_concurrency)
        items = held + list(zip(whole, fresh, strict=False))
        held = [] if failure is not None else _held_back(items)
        items = items[: len(items) - len(held)]
        if not items and failure is None:
            continue
        chunk = [b for (b, _), _ in items]
        read = [r for _, r in items]
        files = [(b.start, b.main.tombstones, len(r), limit) for (b, limit), r in items]
        # The first run of bundles may start below the log's next offset: its records there are
        # checked (`adopt.late`). Later runs follow the records appended before them.
        offsets = record_offsets(files, previous=-1 if done.files == 0 else previous)
        done.interleaved_windows += interleaved_windows(files)
        assembled = assemble(chunk, read, offsets, previous)
        late = check_below(log, log.manifest(), assembled.below, chunk, gaps, assembled.after.column("key"))
        conflicts = [c for c in assembled.overlaps + late.conflicts if not any(key in c for key in prefer)]
        if conflicts:
            raise AdoptionConflict("; ".join(conflicts))
        records = _with_tombstones(assembled.after, late.tombstones, previous)
        kept = records.column("offset").to_numpy()
        new_gaps = _gaps(previous, assembled.offsets())
        adopted_ms = wall_clock_ms()
        through = (int(kept[-1]) if len(kept) else previous) + 1
        late_keys = {chunk[n].main.key: why for n, why in late.late_files.items()}
        adopted = [
            _original(f, log.partition, through, adopted_ms, records, n, source)
            for n, b in enumerate(chunk)
            if b.main.key not in late_keys
            for f in b.objects
        ]
        record_originals(lake, log.topic, source, adopted, tracked_from, {log.partition: new_gaps})
        crash_point("adopt.after_ledger_write")
        if len(kept):
            log.append(records.select(RECORD_COLUMNS), offsets=kept.tolist(), writer=ADOPTION_WRITER)
            previous = int(kept[-1])
        crash_point("adopt.after_append")
        gaps += new_gaps
        done.gaps += new_gaps
        done.late.update(late_keys)
        done.late_tombstones += late.tombstones.num_rows
        done.superseded_tombstones += late.superseded
        done.adopted += [b.main.key for b in chunk if b.main.key not in late_keys]
        done.files += len(chunk) - len(late_keys)
        done.records += len(kept)
        done.next_offset = previous + 1
        if failure is not None:
            raise failure  # what the files before it held is appended


def _held_back(
    items: Sequence[tuple[tuple[Bundle, int | None], BundleRecords]],
) -> list[tuple[tuple[Bundle, int | None], BundleRecords]]:
    """The chunk's files from its last value file on, when that file holds records past the next
    value file's start (a re-delivery) and so must be compared with it (`assemble`'s overlaps):
    they go into the next chunk, which holds that file, so both are compared, and appended or
    refused, together."""
    last = next((n for n in range(len(items) - 1, -1, -1) if not items[n][0][0].main.tombstones), None)
    if last is None:
        return []
    (bundle, limit), records = items[last]
    return list(items[last:]) if limit is not None and len(records) > limit - bundle.start else []


def _with_tombstones(after: pa.Table, tombstones: pa.Table, previous: int) -> pa.Table:
    """The chunk's records, then its late tombstones at the offsets after them."""
    if not tombstones.num_rows:
        return after
    last = int(after.column("offset")[-1].as_py()) if after.num_rows else previous
    placed = tombstones.set_column(0, "offset", pa.array(np.arange(last + 1, last + 1 + tombstones.num_rows)))
    return pa.concat_tables([after, placed.cast(after.schema)])


def _original(
    sink_file: SinkFile,
    partition: int,
    through: int,
    adopted_ms: int,
    records: pa.Table,
    file_index: int,
    source: ConnectSource,
) -> Original:
    """A ledger entry for one object of the chunk's file `file_index`, with the offsets its records
    landed at."""
    mine = records.filter(pc.equal(records.column("file"), file_index)).column("offset")
    first = None if not len(mine) else int(pc.min(mine).as_py())
    last = None if not len(mine) else int(pc.max(mine).as_py())
    return Original(
        sink_file.key,
        partition,
        through,
        adopted_ms,
        sink_file.size,
        sink_file.tag,
        first,
        last,
        source.keep_originals,
    )


def _gaps(previous: int, offsets: np.ndarray) -> list[tuple[int, int]]:
    """The offsets missing between `previous` (when there is one) and the records after it."""
    if not len(offsets):
        return []
    edges = np.concatenate([[previous], offsets]) if previous >= 0 else offsets
    jumps = np.nonzero(np.diff(edges) > 1)[0]
    return [(int(edges[i]) + 1, int(edges[i + 1]) - 1) for i in jumps]


def _read_until_failure(
    store: ObjectStore, bundles: Sequence[Bundle], events: ChangeEvents, max_workers: int
) -> tuple[list[BundleRecords], LakeCleanerError | None]:
    """The bundles' records, up to the first that cannot be read (and why it cannot); the files are
    read on the process's I/O pool (`io.concurrent`), `max_workers` at once (pyarrow's parsers and
    kernels run outside the GIL)."""
    read = map_ordered(partial(_read_or_failure, store, events), bundles, max_workers)
    for n, got in enumerate(read):
        if isinstance(got, LakeCleanerError):
            return [r for r in read[:n] if isinstance(r, BundleRecords)], got
    return [r for r in read if isinstance(r, BundleRecords)], None


def _read_or_failure(store: ObjectStore, events: ChangeEvents, bundle: Bundle) -> BundleRecords | LakeCleanerError:
    try:
        return read_bundle(store, bundle, events)
    except LakeCleanerError as exc:
        return exc


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
