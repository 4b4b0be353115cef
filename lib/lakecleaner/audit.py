"""Erasure audits (`lakecleaner audit key|topic`): where a key's records are still stored, and by
when each copy is physically gone (the rules are `policy.erasure`'s).

`audit_key` lists every object under the topic's prefix — live segments, files awaiting physical
deletion, staged or abandoned run outputs and their key spills — and reads the key column of each
(the values only of the rows that match), plus the lake's own objects (`_lakecleaner/` but other
topics' run reports and the embedded catalog, and the consumer offsets), which must never hold a
record's key: a hit there is reported like a stored copy with no deadline. `audit_topic` answers
per partition from the manifest and one listing: the oldest data that a deadline covers (the
dirty section, files awaiting deletion, unreferenced files).
Both count the topic's unfinished writes (`ObjectStore.list_unfinished`: a crashed writer's S3
multipart upload or local temporary file), which no listing shows and no read reaches: each may
hold any of the partition's keys until gc discards it, by the rule of unreferenced files.
The audits read; they never write, and their reports hold offsets and object names, never keys.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakecleaner.cleaner_state import CleanerState
from lakecleaner.engine.offsets_file import is_offsets_path
from lakecleaner.errors import LakeCleanerError, StorageError
from lakecleaner.io import ObjectInfo, UnfinishedWrite
from lakecleaner.io.concurrent import map_ordered
from lakecleaner.lake import Lake, Topic
from lakecleaner.log.commits import CommitRecord
from lakecleaner.log.deletion_vectors import VECTOR_PATH, read_vector
from lakecleaner.log.layout import MANIFEST_NAME, by_partition, partition_prefix, topic_prefix
from lakecleaner.log.leases import LEASE_SUFFIX
from lakecleaner.log.manifest import Manifest, Segment, SegmentFile
from lakecleaner.log.partition import unfinished_by_partition
from lakecleaner.log.segment_files import check_schema
from lakecleaner.offsets import OFFSETS_PREFIX
from lakecleaner.policy.cleanable import first_dirty_offset, vector_deadlines
from lakecleaner.policy.erasure import (
    BELOW_LOG_START,
    HIDDEN,
    LEFT_THE_LOG,
    LIVE,
    SUPERSEDED,
    TOMBSTONE,
    UNFINISHED,
    UNREFERENCED,
    Deadline,
    ErasureContext,
    dag_stalled,
    held_by_current_snapshot,
    hidden_deadline,
    left_the_log_deadline,
    released_deadline,
    schedule_interval_ms,
    superseded_deadline,
    tombstone_deadline,
    unreferenced_deadline,
    vectored_deadline,
)
from lakecleaner.policy.key_mentions import mentions_key
from lakecleaner.policy.metrics import deletion_deadline
from lakecleaner.policy.segment_times import rolling_timestamp
from lakecleaner.policy.uncleanable import still_uncleanable
from lakecleaner.runs.reports import RUNS_PREFIX, runs_prefix

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile

    from lakecleaner.iceberg.expiry import Reach

#: The lake's own folder: its objects must never hold a record's key.
LAKE_FOLDER = "_lakecleaner/"


@dataclass(frozen=True)
class KeyCopy:
    """One stored record of the audited key: where, which offset, what it is, and its deadline
    (None for the key's live value, which is not due to go)."""

    partition: int | None
    object: str
    offset: int | None
    kind: str
    deadline: Deadline | None

    @property
    def overdue(self) -> bool:
        return self.deadline is not None and self.deadline.overdue is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "object": self.object,
            "offset": self.offset,
            "kind": self.kind,
            **(self.deadline.to_dict() if self.deadline else {"gone_by_ms": None, "gone_by": None, "overdue": None}),
        }


@dataclass
class KeyAudit:
    """Every stored copy of a key in a topic, and the objects that could not be read (which may
    hold one: they count as overdue)."""

    topic: str
    now_ms: int
    copies: list[KeyCopy] = field(default_factory=list)
    unreadable: dict[str, str] = field(default_factory=dict)

    @property
    def overdue(self) -> bool:
        return bool(self.unreadable) or any(c.overdue for c in self.copies)

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "now_ms": self.now_ms,
            "overdue": self.overdue,
            "copies": [c.to_dict() for c in self.copies],
            "unreadable": dict(self.unreadable),
        }


@dataclass(frozen=True)
class _Found:
    """Rows of the key in one object."""

    offsets: tuple[int, ...]
    tombstones: tuple[bool, ...]
    horizons: tuple[int | None, ...]
    #: Each row's position in a segment file (empty for a spill).
    positions: tuple[int, ...] = ()


def topic_context(lake: Lake, topic: Topic, now_ms: int, cleaner: CleanerState) -> ErasureContext:
    """What every partition's deadlines depend on, computed once per topic: its config, its DAG's
    schedule interval (the config file's) and whether that DAG still runs. A partition's own
    uncleanable mark is added by `partition_context`."""
    spec = lake.config.topics.get(topic.name)
    schedule_ms = schedule_interval_ms(spec.schedule if spec is not None else None, now_ms)
    stalled = dag_stalled(cleaner.last_dag_run_ms, topic.metadata.created_ms, schedule_ms, now_ms)
    return ErasureContext(topic.config, schedule_ms, now_ms, None, stalled)


def partition_context(ctx: ErasureContext, cleaner: CleanerState, manifest: Manifest) -> ErasureContext:
    """The topic's context with the partition's uncleanable mark, while it still applies."""
    entry = cleaner.uncleanable.get(manifest.partition)
    marked = entry is not None and still_uncleanable(entry, manifest, ctx.config)
    return replace(ctx, uncleanable=entry.reason if marked and entry is not None else None)


def holds_no_records(path: str) -> bool:
    """Whether an object of a partition (path relative to it) is one of the few that lakecleaner
    writes from metadata alone — the manifest, a run's lease, a commit record, pass 1's winning
    offsets, its groups' shares and their expected offsets (`engine.offsets_file`), a file's
    deletion vector (row positions, `log.deletion_vectors`) — and so cannot hold a key or a value.
    Every other object is searched: segment files, staged outputs, the offset map's and the
    quality gate's key spills, and whatever a later writer adds (an object the audit cannot parse
    is reported unreadable, and that is overdue, never silence)."""
    return (
        path == MANIFEST_NAME
        or path.endswith(LEASE_SUFFIX)
        or CommitRecord.parse(path) is not None
        or is_offsets_path(path)
        or VECTOR_PATH.match(path) is not None
    )


def record_objects(lake: Lake, topic: str) -> dict[int, list[ObjectInfo]]:
    """The objects of each partition of the topic that can hold records (`holds_no_records`), from
    one listing of the topic's prefix."""
    found = by_partition(topic, lake.store.list(topic_prefix(topic)))
    return {
        p: [o for o in objects if not holds_no_records(o.key[len(partition_prefix(topic, p)) :])]
        for p, objects in found.items()
    }


def unfinished_writes(lake: Lake, topic: str) -> tuple[dict[int, list[UnfinishedWrite]], str | None]:
    """The unfinished writes under each partition of the topic, from one listing; or none and why
    they could not be listed (a store without ListMultipartUploads): then nothing proves they
    are gone, and the audits say so."""
    unfinished, unlisted = unfinished_by_partition(lake.store, topic)
    return unfinished, None if unlisted is None else f"the unfinished writes could not be listed: {unlisted}"


def audit_key(lake: Lake, topic_name: str, key: bytes, now_ms: int) -> KeyAudit:
    """Every stored copy of `key` in the topic and the lake's own folders, with its deadline."""
    topic = lake.topic(topic_name)
    audit = KeyAudit(topic_name, now_ms)
    by_partition = record_objects(lake, topic_name)
    read = topic.read_manifests()
    for partition, reason in read.failures.items():
        audit.unreadable[f"{partition_prefix(topic_name, partition)}manifest.json"] = reason
    cleaner = lake.cleaner_state.read(topic_name)
    ctx = topic_context(lake, topic, now_ms, cleaner)
    objects = [(p, o) for p in sorted(by_partition) for o in by_partition[p]]
    found = map_ordered(lambda item: _search(lake, item[1], key), objects, lake.config.storage.max_concurrency)
    hits: dict[int, list[tuple[ObjectInfo, _Found]]] = {}
    for (partition, obj), hit in zip(objects, found, strict=True):
        if isinstance(hit, str):
            audit.unreadable[obj.key] = hit
        elif hit.offsets:
            hits.setdefault(partition, []).append((obj, hit))
    reaches = table_reaches(lake, topic_name)
    for partition, held in hits.items():
        manifest = read.manifests.get(partition)
        if manifest is not None:  # an unreadable manifest is reported above
            judged = partition_context(ctx, cleaner, manifest)
            indexes = _index_files(manifest, partition)
            files = [h for h in held if h[0].key not in indexes]
            copies = list(_judge(lake, partition, manifest, files, judged, reaches.log))
            audit.copies.extend([*copies, *_index_copies(indexes, held, copies)])
    unfinished, unlisted = unfinished_writes(lake, topic_name)
    if unlisted is not None:
        audit.unreadable[topic_prefix(topic_name)] = unlisted
    for partition, writes in sorted(unfinished.items()):
        manifest = read.manifests.get(partition)
        judged = ctx if manifest is None else partition_context(ctx, cleaner, manifest)
        audit.copies.extend(
            KeyCopy(partition, w.key, None, UNFINISHED, unreferenced_deadline(w.started_ms, judged)) for w in writes
        )
    audit.copies.extend(_lake_folder_hits(lake, key, audit))
    audit.copies.extend(table_files(lake, topic_name, key, audit, ctx, reaches))
    audit.copies.extend(sink_files(lake, topic_name, key, audit, ctx))
    return audit


def sink_files(lake: Lake, topic: str, key: bytes, audit: KeyAudit, ctx: ErasureContext) -> Iterator[KeyCopy]:
    """Files of Kafka Connect's S3 sink the topic was adopted from that hold the key
    (`adopt.search`): an adopted one goes at the first gc after file.delete.delay.ms from its
    adoption, as a file that left the log; one not adopted (or kept with --keep-originals) has
    no deadline, as nothing of lakecleaner's deletes it."""
    from lakecleaner.adopt.search import sink_copies

    not_deleted = "a file of Kafka Connect's sink not adopted (or kept with --keep-originals): nothing deletes it"
    for copy in sink_copies(lake, topic, key, audit.unreadable):
        if copy.original is None:
            yield KeyCopy(copy.partition, copy.location, None, UNREFERENCED, Deadline(None, not_deleted))
        else:
            due = copy.original.adopted_ms + ctx.config.file_delete_delay_ms
            yield KeyCopy(copy.partition, copy.location, None, LEFT_THE_LOG, left_the_log_deadline(due, ctx))


@dataclass(frozen=True)
class TableReaches:
    """What the metadata of the topic's Iceberg log and latest-values tables reaches
    (`iceberg.expiry.Reach`); None for a table the topic does not keep or has not made yet."""

    log: Reach | None = None
    latest: Reach | None = None


def table_reaches(lake: Lake, topic: str) -> TableReaches:
    """The topic's `TableReaches`, from the tables as they are (an audit only reads: `find_table`)."""
    if not lake.config.iceberg_enabled(topic):
        return TableReaches()
    from lakecleaner.iceberg.expiry import reach_of, table_kinds
    from lakecleaner.iceberg.schema import LATEST_TABLE, LOG_TABLE
    from lakecleaner.iceberg.sync import find_table

    kept = table_kinds(lake, topic)
    log, latest = (find_table(lake, topic, kind) if kind in kept else None for kind in (LOG_TABLE, LATEST_TABLE))
    return TableReaches(None if log is None else reach_of(log), None if latest is None else reach_of(latest))


def table_files(
    lake: Lake, topic: str, key: bytes, audit: KeyAudit, ctx: ErasureContext, reaches: TableReaches
) -> Iterator[KeyCopy]:
    """Files of the topic's Iceberg tables' own folders (metadata, the latest values, another
    writer's data) that hold the key (`iceberg.search`); the log table registers the log's own
    files, and its folders hold no record of ours (a trim's delete files hold positions only).
    In the latest-values table's current snapshot a file holding the key holds its live value, or
    a value a delete file hides (issue 80); once no snapshot kept for readers is current it goes
    file.delete.delay.ms after that, at a gc (`iceberg.expiry`); unreached, at the next gc. One
    the log table's current snapshot reaches (another writer's statistics or data) has no
    deadline. The folders are read whatever the config says now (`reaches`, `table_reaches`, has
    only the tables kept): those of a topic whose tables were turned off hold nothing current, and
    go at the first gc after file.delete.delay.ms (`iceberg.expiry.drop_turned_off`)."""
    if reaches == TableReaches() and not lake.has_table_folders(topic):
        return
    from lakecleaner.iceberg.expiry import Reach, table_objects
    from lakecleaner.iceberg.schema import LATEST_TABLE, LOG_TABLE
    from lakecleaner.iceberg.search import holds_key

    def holds(obj: ObjectInfo) -> bool | str:
        try:
            return holds_key(obj.key, lake.store.read(obj.key), key)
        except (LakeCleanerError, ValueError, OSError, pa.ArrowException) as exc:
            return f"{type(exc).__name__}: {exc}"

    for kind, kept in ((LOG_TABLE, reaches.log), (LATEST_TABLE, reaches.latest)):
        objects = table_objects(lake, topic, kind)
        if not objects:
            continue
        reach = Reach({}, frozenset()) if kept is None else kept
        by_location = {lake.store.location(obj.key): obj for obj in objects}
        for obj, hit in zip(objects, map_ordered(holds, objects, lake.config.storage.max_concurrency), strict=True):
            location = lake.store.location(obj.key)
            if isinstance(hit, str):
                audit.unreadable[obj.key] = hit
            elif not hit:
                continue
            elif location in reach.current and kind is LATEST_TABLE and "/data/" in obj.key:
                hidden = _hidden_since(lake, obj, key, reach.hiding(location), by_location)
                if isinstance(hidden, str):
                    audit.unreadable[obj.key] = hidden
                elif hidden is None:
                    yield KeyCopy(None, obj.key, None, LIVE, None)
                else:
                    yield KeyCopy(None, obj.key, None, HIDDEN, hidden_deadline(hidden, ctx))
            elif location in reach.current:
                reason = "the Iceberg table's current snapshot reaches it (another writer's statistics or data)"
                yield KeyCopy(None, obj.key, None, UNREFERENCED, Deadline(None, reason))
            else:
                since = reach.released_ms.get(location, obj.mtime_ms)
                yield KeyCopy(None, obj.key, None, UNREFERENCED, unreferenced_deadline(since, ctx))


def _hidden_since(
    lake: Lake, obj: ObjectInfo, key: bytes, hiders: Sequence[DataFile], by_location: Mapping[str, ObjectInfo]
) -> int | str | None:
    """When the key's rows in a table's current data file were hidden by position-delete files
    `hiders` (the latest of the files hiding them, by when it was written), None when a row of the
    key is live; why the files could not be read otherwise (issue 80)."""
    if not hiders:
        return None
    from lakecleaner.iceberg.position_deletes import POSITION_DELETES
    from lakecleaner.iceberg.search import key_positions

    try:
        positions = key_positions(lake.store.read(obj.key), key)
        location, hidden_ms, hidden = lake.store.location(obj.key), 0, np.zeros(len(positions), bool)
        for hider in hiders:
            written = by_location.get(hider.file_path)
            if written is None:
                return f"position-delete file {hider.file_path} is missing"
            rows = pq.read_table(io.BytesIO(lake.store.read(written.key))).cast(POSITION_DELETES)
            mine = rows.filter(pc.equal(rows.column("file_path"), location)).column("pos").to_numpy()
            hits = np.isin(positions, mine)
            if hits.any():
                hidden |= hits
                hidden_ms = max(hidden_ms, written.mtime_ms)
    except (LakeCleanerError, ValueError, OSError, pa.ArrowException) as exc:
        return f"{type(exc).__name__}: {exc}"
    return hidden_ms if len(positions) and hidden.all() else None


def _search(lake: Lake, obj: ObjectInfo, key: bytes) -> _Found | str:
    """The key's rows in a segment file (key and offset columns first; the value and horizon only
    of matching rows) or a key spill (Arrow IPC); why the object could not be read otherwise."""
    try:
        path = lake.store.arrow_path(obj.key)
        with lake.store.arrow_fs.open_input_file(path) as source:
            if obj.key.endswith(".parquet"):
                parquet = pq.ParquetFile(source)
                check_schema(parquet.schema_arrow, lake.store.location(obj.key))
                table = parquet.read(columns=["offset", "key"])
                matches = pc.equal(table.column("key"), pa.scalar(key, pa.binary()))
                if not pc.any(matches).as_py():
                    return _Found((), (), ())
                rows = parquet.read(columns=["offset", "value", "delete_horizon_ms"]).filter(matches)
                return _Found(
                    tuple(rows.column("offset").to_pylist()),
                    tuple(v is None for v in rows.column("value").to_pylist()),
                    tuple(rows.column("delete_horizon_ms").to_pylist()),
                    tuple(np.flatnonzero(matches.to_numpy(zero_copy_only=False)).tolist()),
                )
            spill = pa.ipc.open_file(source).read_all()
            if "key" not in spill.column_names:
                return _Found((), (), ())
            rows = spill.filter(pc.equal(spill.column("key"), pa.scalar(key, pa.binary())))
            offsets = tuple(rows.column("offset").to_pylist()) if "offset" in rows.column_names else ()
            return _Found(offsets, (False,) * len(offsets), (None,) * len(offsets))
    except (OSError, pa.ArrowException, StorageError, LakeCleanerError) as exc:
        return f"{type(exc).__name__}: {exc}"


def _index_files(manifest: Manifest, partition: int) -> dict[str, str]:
    """The object of each key index of the partition's files (`log.key_index`), with its file's."""
    prefix = partition_prefix(manifest.topic, partition)
    return {prefix + f.key_index.path: prefix + f.path for s in manifest.segments for f in s.files if f.key_index}


def _index_copies(
    files_of: Mapping[str, str], hits: list[tuple[ObjectInfo, _Found]], copies: list[KeyCopy]
) -> Iterator[KeyCopy]:
    """The copies in key indexes (`files_of`: each index's file): an index holds its file's keys,
    row for row, and leaves with it, so each copy in it is the file's copy at that offset
    (`copies`), with its kind and deadline. An index no file of the log references is judged as
    any other object (`_judge`)."""
    by_row = {(c.object, c.offset): c for c in copies}
    for obj, hit in hits:
        for offset in hit.offsets if obj.key in files_of else ():
            copy = by_row.get((files_of[obj.key], offset))
            if copy is not None:  # else the file could not be read, and the audit says so
                yield replace(copy, object=obj.key)


def _judge(
    lake: Lake,
    partition: int,
    manifest: Manifest,
    hits: list[tuple[ObjectInfo, _Found]],
    ctx: ErasureContext,
    log_reach: Reach | None,
) -> Iterator[KeyCopy]:
    """Each copy's kind and deadline within one partition; a file that left the log waits for the
    readers of the Iceberg log table's snapshots that reference it (`log_reach`, None without one)."""
    live_files = {f.path: (s, f) for s in manifest.segments for f in s.files}
    pending = {p.path: p.delete_after_ms for p in manifest.pending_deletes}
    prefix = partition_prefix(manifest.topic, partition)
    live: list[tuple[int, Segment, bool, int | None, str]] = []
    removed: list[tuple[int, Segment, SegmentFile, str]] = []
    for obj, hit in hits:
        path = obj.key[len(prefix) :]
        gone = _removed_positions(lake, prefix, live_files[path][1]) if path in live_files else frozenset()
        positions = hit.positions or (-1,) * len(hit.offsets)
        for offset, tombstone, horizon, position in zip(
            hit.offsets, hit.tombstones, hit.horizons, positions, strict=True
        ):
            if path in live_files and position in gone:
                removed.append((offset, *live_files[path], obj.key))
            elif path in live_files:
                live.append((offset, live_files[path][0], tombstone, horizon, obj.key))
            elif path in pending:
                yield KeyCopy(
                    partition,
                    obj.key,
                    offset,
                    LEFT_THE_LOG,
                    _pending_deadline(lake, obj, pending[path], ctx, log_reach),
                )
            else:
                yield KeyCopy(partition, obj.key, offset, UNREFERENCED, unreferenced_deadline(obj.mtime_ms, ctx))
    live.sort()
    in_log = [entry for entry in live if entry[0] >= manifest.log_start_offset]
    for offset, segment, file, name in removed:
        yield KeyCopy(partition, name, offset, HIDDEN, _removed_deadline(offset, segment, file, in_log, ctx))
    for offset, segment, tombstone, horizon, name in live:
        if offset < manifest.log_start_offset:
            yield KeyCopy(partition, name, offset, BELOW_LOG_START, _below_log_start(segment, manifest, ctx))
        elif (offset, segment, tombstone, horizon, name) == in_log[-1]:
            if tombstone:
                yield KeyCopy(partition, name, offset, TOMBSTONE, tombstone_deadline(segment, horizon, ctx))
            else:
                yield KeyCopy(partition, name, offset, LIVE, None)
        else:
            superseder = next(e[1] for e in in_log if e[0] > offset)
            yield KeyCopy(partition, name, offset, SUPERSEDED, superseded_deadline(segment, superseder, ctx))


def _vectored_candidates(manifest: Manifest, ctx: ErasureContext) -> list[tuple[Deadline, str]]:
    """The records the partition's deletion vectors hide, by the vector whose deadline comes first
    (issue 79: logically deleted, physically present until a clean rewrites the file)."""
    vectored = vector_deadlines(manifest.segments)
    if not vectored:
        return []
    erase_by, segment, file = min(vectored, key=lambda v: v[0])
    assert file.deletion_vector is not None
    what = f"{file.deletion_vector.cardinality} records a deletion vector hides in {file.path}"
    return [(vectored_deadline(segment, erase_by, ctx), what)]


def _removed_positions(lake: Lake, prefix: str, file: SegmentFile) -> frozenset[int]:
    """The positions a live file's deletion vector removes (none without one; the rows are read
    as stored, so a vector that cannot be read hides nothing from the audit)."""
    if file.deletion_vector is None:
        return frozenset()
    try:
        return frozenset(read_vector(lake.store, prefix, file.deletion_vector, file.record_count).tolist())
    except LakeCleanerError:
        return frozenset()


def _removed_deadline(
    offset: int,
    segment: Segment,
    file: SegmentFile,
    in_log: list[tuple[int, Segment, bool, int | None, str]],
    ctx: ErasureContext,
) -> Deadline:
    """A row a deletion vector removed (logically deleted, issue 79) is physically present until
    a clean rewrites its file: by the vector's `erase_by_ms` (KIP-354's bound, kept by the
    planner's vector-erasure trigger), else by KIP-354's bound for a superseded record, from the
    record of its key that superseded it (its own segment's when none is in the log)."""
    vector = file.deletion_vector
    if vector is not None and vector.erase_by_ms is not None:
        return vectored_deadline(segment, vector.erase_by_ms, ctx)
    superseder = next((e[1] for e in in_log if e[0] > offset), segment)
    return superseded_deadline(segment, superseder, ctx)


def _pending_deadline(
    lake: Lake, obj: ObjectInfo, delete_after_ms: int, ctx: ErasureContext, log_reach: Reach | None
) -> Deadline:
    """`left_the_log_deadline` of a pending file, held while the log table's snapshots reach it."""
    location = lake.store.location(obj.key)
    if log_reach is not None and location in log_reach.current:
        return held_by_current_snapshot()
    released = None if log_reach is None else log_reach.released_ms.get(location)
    return left_the_log_deadline(delete_after_ms, ctx, released)


def _below_log_start(segment: Segment, manifest: Manifest, ctx: ErasureContext) -> Deadline:
    """A record below the log start offset (a trim) leaves with its segment: at the next run when
    the whole segment lies below the log start, else when a cleaning rewrites its group, which the
    earliest dirty segment's KIP-354 deadline bounds (or retention, whichever comes first)."""
    if segment.next_offset <= manifest.log_start_offset:
        return released_deadline(ctx)
    return superseded_deadline(segment, _earliest_dirty(manifest) or segment, ctx)


def _earliest_dirty(manifest: Manifest) -> Segment | None:
    """The segment of the dirty section whose KIP-354 deadline comes first: the earliest rolling
    timestamp (the first batch's, or the creation time when it has none)."""
    first_dirty, _ = first_dirty_offset(manifest)
    return min((s for s in manifest.segments if s.next_offset > first_dirty), key=rolling_timestamp, default=None)


def _lake_objects(lake: Lake, topic: str) -> list[ObjectInfo]:
    """The lake's own objects that could hold a record of `topic`: every consumer group's offsets,
    and everything under `_lakecleaner/` but the run reports of other topics (a lake of hundreds
    of topics keeps millions of those; none has a record of this topic any more than this
    topic's own reports have) and the embedded Iceberg catalog (pyiceberg's SQL catalog on
    SQLite: table names and the locations of their metadata files, which the audit reads in the
    tables' folders)."""
    from lakecleaner.iceberg.catalog import EMBEDDED_FOLDER

    objects = [*lake.store.list(OFFSETS_PREFIX), *lake.store.list_here(LAKE_FOLDER)]
    for folder in lake.store.list_folders(LAKE_FOLDER):
        inside = f"{LAKE_FOLDER}{folder}/"
        if inside != f"{EMBEDDED_FOLDER}/":
            objects += lake.store.list(runs_prefix(topic) if inside == RUNS_PREFIX else inside)
    return objects


def _lake_folder_hits(lake: Lake, key: bytes, audit: KeyAudit) -> Iterator[KeyCopy]:
    """Objects of the lake's own folders that mention the key (they must not; the rule of a
    mention is `policy.key_mentions`'s): a hit has no deadline, so it is overdue."""
    objects = _lake_objects(lake, audit.topic)

    def holds(obj: ObjectInfo) -> bool | str:
        try:
            return mentions_key(lake.store.read(obj.key), key)
        except LakeCleanerError as exc:
            return str(exc)

    for obj, hit in zip(objects, map_ordered(holds, objects, lake.config.storage.max_concurrency), strict=True):
        if isinstance(hit, str):
            audit.unreadable[obj.key] = hit
        elif hit:
            reason = "the lake's own files must never hold a record's key: nothing deletes it"
            yield KeyCopy(None, obj.key, None, UNREFERENCED, Deadline(None, reason))


# ----------------------------------------------------------------------------------------------
# The topic audit


@dataclass(frozen=True)
class PartitionErasure:
    """A partition's data awaiting erasure: the earliest deadline among its dirty section (KIP-354
    and tombstone horizons), its files awaiting deletion and its unreferenced files, and why it is
    overdue; `error` when the partition could not be read."""

    partition: int
    pending_files: int = 0
    unreferenced_files: int = 0
    unfinished_writes: int = 0
    deadline: Deadline | None = None
    what: str | None = None
    error: str | None = None

    @property
    def overdue(self) -> bool:
        return self.error is not None or (self.deadline is not None and self.deadline.overdue is not None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "pending_files": self.pending_files,
            "unreferenced_files": self.unreferenced_files,
            "unfinished_writes": self.unfinished_writes,
            "what": self.what,
            "deadline": None if self.deadline is None else self.deadline.to_dict(),
            "overdue": self.overdue,
            "error": self.error,
        }


def audit_topic(lake: Lake, topic_name: str, now_ms: int) -> list[PartitionErasure]:
    """Per partition, the earliest deadline by which data it still stores must be gone."""
    topic = lake.topic(topic_name)
    read = topic.read_manifests()
    erasures = partition_erasures(lake, topic, read.manifests, lake.cleaner_state.read(topic_name), now_ms)
    return [
        PartitionErasure(p, error=read.failures[p]) if p in read.failures else erasures[p]
        for p in range(topic.partitions)
    ]


def partition_erasures(
    lake: Lake, topic: Topic, manifests: Mapping[int, Manifest], cleaner: CleanerState, now_ms: int
) -> dict[int, PartitionErasure]:
    """`audit_topic` for manifests already read: one listing of the topic's objects (one LIST
    request per thousand), no other request."""
    files = record_objects(lake, topic.name)
    unfinished, unlisted = unfinished_writes(lake, topic.name)
    ctx = topic_context(lake, topic, now_ms, cleaner)
    return {
        p: _partition_erasure(
            manifest, files.get(p, []), (unfinished.get(p, []), unlisted), partition_context(ctx, cleaner, manifest)
        )
        for p, manifest in sorted(manifests.items())
    }


def _partition_erasure(
    manifest: Manifest,
    objects: Sequence[ObjectInfo],
    writes: tuple[Sequence[UnfinishedWrite], str | None],
    ctx: ErasureContext,
) -> PartitionErasure:
    """`writes`: the partition's unfinished writes, and why they could not be listed, if so."""
    unfinished, unlisted = writes
    prefix = partition_prefix(manifest.topic, manifest.partition)
    referenced = manifest.referenced_paths()
    unreferenced = [o for o in objects if o.key[len(prefix) :] not in referenced]
    candidates: list[tuple[Deadline, str]] = []
    if ctx.config.compact:
        first_dirty, _ = first_dirty_offset(manifest)
        promised = deletion_deadline(manifest, ctx.config, first_dirty, ctx.now_ms)
        oldest = _earliest_dirty(manifest)
        if oldest is not None:
            candidates.append((superseded_deadline(oldest, oldest, ctx), f"records superseded in segment {oldest.id}"))
        if promised is not None and promised.tombstone_horizon_ms is not None:
            horizon = promised.tombstone_horizon_ms
            holding = next(s for s in manifest.segments if s.earliest_delete_horizon_ms == horizon)
            candidates.append((tombstone_deadline(holding, horizon, ctx), f"a tombstone in segment {holding.id}"))
        candidates += _vectored_candidates(manifest, ctx)
    for pending in manifest.pending_deletes:
        candidates.append((left_the_log_deadline(pending.delete_after_ms, ctx), f"{pending.path} ({pending.reason})"))
    for obj in unreferenced:
        candidates.append(
            (unreferenced_deadline(obj.mtime_ms, ctx), f"{obj.key[len(prefix) :]} (no manifest references it)")
        )
    for write in unfinished:
        candidates.append(
            (unreferenced_deadline(write.started_ms, ctx), f"{write.key[len(prefix) :]} (an unfinished write)")
        )
    if unlisted is not None:
        candidates.append((Deadline(None, unlisted), "unfinished writes, which could not be listed"))
    result = PartitionErasure(manifest.partition, len(manifest.pending_deletes), len(unreferenced), len(unfinished))
    if not candidates:
        return result
    deadline, what = min(candidates, key=lambda c: (c[0].overdue is None, c[0].gone_by_ms or 0))
    return replace(result, deadline=deadline, what=what)
