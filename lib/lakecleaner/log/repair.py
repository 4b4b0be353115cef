"""Rebuild a missing or damaged manifest from the segment files' own metadata (`lakecleaner repair`).

Repair never trusts the object it repairs: whatever the damaged manifest holds (bad JSON, wrong
types, nesting, a manifest of another partition), it is not read for anything but whether it can
be used, and the new manifest is built from the partition's files alone. Every segment file records
its topic, partition, offsets, the segment it was written for, the manifest version it was written
to commit into and its statistics; every commit that added files left a commit record naming them
(`log/commits.py`). Repair reads the footers and the records, and chooses, for every offset, one
file (`choose_files`):

1. A file a commit acknowledged (named by a commit record) beats any file no commit acknowledged,
   and of two acknowledged files covering the same offsets the one acknowledged by the later
   commit wins (a compaction's output over the files it replaced).
2. A file no commit acknowledged is kept where no chosen file covers its offsets (a commit whose
   record was lost in a crash, or an append past the end that never committed: records, not
   garbage). Where it overlaps an acknowledged file it is left out when it was written for the
   same or an older version (the loser of a race for that version, or a file a later commit
   replaced), or when it is newer but the acknowledged files cover its every offset (a crashed
   run's output: the old log is whole).
3. Anything else is ambiguous: two files of the same version that no record tells apart, or a
   newer unacknowledged file over offsets no acknowledged file holds. Repair then writes and
   deletes nothing, names the files and says how to choose (`--prefer FILE`). It never chooses by
   the time a file was started or finished: a crashed writer's orphan is often the later one.

Files of a compaction that holds a live lease on the partition (`log/leases.py`) are not the log's
yet: repair leaves them where they are, out of the manifest and out of `pending_deletes`, and that
run's commit then finds its inputs gone and aborts. The manifest repair writes carries the version
it wrote (`Manifest.repaired_version`), so a writer whose files a repair adopted anyway (an expired
lease, an append in flight) reports it instead of claiming the commit (`PartitionLog.commit`).
Files left out because another file holds their offsets go to `pending_deletes`; unreadable files
stay where they are, reported, for someone to look at.

What repair cannot know: a log start offset moved by trim or retention whose files are still
present (pass `log_start_offset`), the cleaner checkpoint (reset: the next cleaning rescans
from the log start, which is correct, only slower), and which segment was still open (the
last one is reopened as the active segment unless it was written by a compaction).
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from lakecleaner.clock import wall_clock_ms
from lakecleaner.config import TopicConfig
from lakecleaner.errors import (
    ConditionFailed,
    CorruptManifest,
    CorruptSegment,
    LakeCleanerError,
    ObjectNotFound,
)
from lakecleaner.io import ObjectInfo, ObjectStore
from lakecleaner.io.concurrent import map_ordered
from lakecleaner.log.commits import COMMITS, acknowledged_files
from lakecleaner.log.deletion_vectors import VECTOR_PATH, DeletionVector, decode_vector
from lakecleaner.log.layout import partition_marker_key
from lakecleaner.log.leases import leases_on
from lakecleaner.log.manifest import (
    REPAIRED_VERSION,
    SEGMENT_PATH,
    Manifest,
    PendingDelete,
    Segment,
    SegmentFile,
    new_commit_id,
)
from lakecleaner.log.partition import PartitionLog
from lakecleaner.log.segment_files import KIND_COMPACTED, FileMeta, read_file_meta

#: The reason a file left out because another file holds its offsets starts with (it goes to
#: `pending_deletes`; other files left out stay where they are).
SUPERSEDED = "superseded"

#: The erasure deadline of a deletion vector repair adopts (its manifest entry, which held the
#: deadline, is lost): at once, so the next clean rewrites its file (KIP-354 kept, at a cost).
REPAIRED_ERASE_BY_MS = 0


class RepairAmbiguous(LakeCleanerError):
    """Files cover the same offsets and nothing says which one a commit acknowledged: repair wrote
    and deleted nothing (the message names the files and `--prefer`)."""


@dataclass(frozen=True)
class Candidate:
    """A readable segment file of the partition, as repair weighs it: `acknowledged` is the
    version of the commit whose record names it (None: no record does)."""

    path: str
    meta: FileMeta
    size: int
    acknowledged: int | None = None

    @property
    def base_offset(self) -> int:
        return self.meta.stats.base_offset

    @property
    def next_offset(self) -> int:
        return self.meta.stats.next_offset

    def describe(self) -> str:
        told = "no commit record" if self.acknowledged is None else f"acknowledged by version {self.acknowledged}"
        return (
            f"{self.path} [{self.base_offset}, {self.next_offset}), {self.meta.kind} for version "
            f"{self.meta.manifest_version}, {told}"
        )


@dataclass(frozen=True)
class Choice:
    """What `choose_files` decided: the kept paths in offset order, the files left out and why, and
    the pairs of files it could not choose between."""

    kept: list[str]
    left_out: dict[str, str]
    conflicts: list[tuple[str, str]]


@dataclass(frozen=True)
class RepairReport:
    topic: str
    partition: int
    previous_state: str
    manifest: Manifest
    kept_files: list[str] = field(default_factory=list)
    left_out: dict[str, str] = field(default_factory=dict)
    #: Files of runs holding a live lease: not the log's yet, left where they are.
    in_flight: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "previous_state": self.previous_state,
            "segments": len(self.manifest.segments),
            "records": self.manifest.record_count,
            "log_start_offset": self.manifest.log_start_offset,
            "next_offset": self.manifest.next_offset,
            "kept_files": self.kept_files,
            "left_out": self.left_out,
            "in_flight": self.in_flight,
        }


def _manifest_state(log: PartitionLog) -> tuple[str, str | None]:
    """('ok' | 'missing' | 'corrupt: …', etag of the current object or None). The object is
    untrusted: whatever it holds, the strict parser (`Manifest.from_json`) gives the manifest or
    CorruptManifest, and nothing of a damaged one is used."""
    try:
        data, etag = log.store.read_with_etag(log.manifest_key)
    except ObjectNotFound:
        return "missing", None
    try:
        manifest = Manifest.from_json(data, log.store.location(log.manifest_key))
        if (manifest.topic, manifest.partition) != (log.topic, log.partition):
            raise CorruptManifest(f"it names partition {manifest.topic}-{manifest.partition}")
    except CorruptManifest as exc:
        return f"corrupt: {str(exc)[:300]}", etag
    return "ok", etag


def _live_runs(store: ObjectStore, log: PartitionLog) -> dict[str, int]:
    """The runs holding a live lease on the partition, with when each lease ends."""
    return {lease.run_id: lease.expires_ms for lease in leases_on(store, log.prefix)}


def _candidates(
    store: ObjectStore, log: PartitionLog, max_workers: int, left_out: dict[str, str], in_flight: dict[str, str]
) -> tuple[dict[str, Candidate], int]:
    """The partition's segment files as repair weighs them: footers read concurrently, commit
    records (a listing) applied; files it cannot use are put in `left_out` (unreadable, another partition's)
    or `in_flight` (a live run's) with the reason. With them, the highest version a commit record
    names (of a file still there or not: that version was committed). A storage error is raised:
    a file that could not be read is not a file that does not belong."""
    listed = [o for o in store.list(log.prefix + "segments/") if SEGMENT_PATH.match(o.key[len(log.prefix) :])]

    def read(obj: ObjectInfo) -> FileMeta | str:
        try:
            return read_file_meta(store, obj.key)
        except (CorruptSegment, ObjectNotFound) as exc:
            return f"unreadable, left where it is: {exc}"

    acknowledged = acknowledged_files(store.list(log.prefix + COMMITS), log.prefix)
    runs = _live_runs(store, log)
    found: dict[str, Candidate] = {}
    for obj, meta in zip(listed, map_ordered(read, listed, max_workers), strict=True):
        path = obj.key[len(log.prefix) :]
        if isinstance(meta, str):
            left_out[path] = meta
        elif (meta.topic, meta.partition) != (log.topic, log.partition):
            left_out[path] = f"belongs to {meta.topic}-{meta.partition}"
        elif meta.run_id is not None and meta.run_id in runs:
            in_flight[path] = (
                f"written by run {meta.run_id}, whose lease on the partition is live until {runs[meta.run_id]}"
            )
        else:
            found[path] = Candidate(path, meta, obj.size, acknowledged.get(path))
    return found, max(acknowledged.values(), default=0)


def _rank(c: Candidate, prefer: Collection[str]) -> tuple[int, int, int]:
    """Sort key, strongest first: preferred files, then acknowledged ones by the version that
    acknowledged them, then the rest by the version they were written for."""
    if c.path in prefer:
        return (0, 0, 0)
    if c.acknowledged is not None:
        return (1, -c.acknowledged, -c.meta.manifest_version)
    return (2, 0, -c.meta.manifest_version)


def _covered(c: Candidate, holders: list[Candidate]) -> bool:
    """Whether `holders`' ranges together cover every offset of `c`'s range."""
    at = c.base_offset
    for h in sorted(holders, key=lambda h: h.base_offset):
        if h.base_offset > at:
            return False
        at = max(at, h.next_offset)
    return at >= c.next_offset


def _beats(kept: Candidate, other: Candidate, holders: list[Candidate], prefer: Collection[str]) -> bool:
    """Whether the already chosen `kept` rightly wins over `other`, which covers some of the same
    offsets (`holders`: every chosen file that does): the rules of the module docstring."""
    if kept.path in prefer:
        return other.path not in prefer
    if kept.acknowledged is not None and other.acknowledged is not None:
        return kept.acknowledged > other.acknowledged
    if kept.acknowledged is not None:  # `other` has no record
        if other.meta.manifest_version <= kept.acknowledged:
            return True
        acknowledged = [h for h in holders if h.acknowledged is not None or h.path in prefer]
        return len(acknowledged) == len(holders) and _covered(other, holders)
    return kept.meta.manifest_version > other.meta.manifest_version  # neither has a record


def choose_files(candidates: Mapping[str, Candidate], prefer: Collection[str] = ()) -> Choice:
    """For every offset, the file that holds it (the module docstring's rules; pure)."""
    order = sorted(candidates.values(), key=lambda c: (_rank(c, prefer), c.base_offset, c.path))
    kept: list[Candidate] = []
    left_out: dict[str, str] = {}
    conflicts: list[tuple[str, str]] = []
    for c in order:
        holders = [k for k in kept if k.base_offset < c.next_offset and c.base_offset < k.next_offset]
        if not holders:
            kept.append(c)
            continue
        rivals = [k for k in holders if not _beats(k, c, holders, prefer)]
        if rivals:
            conflicts += [(k.path, c.path) for k in rivals]
        else:
            names = ", ".join(k.path for k in holders)
            left_out[c.path] = f"{SUPERSEDED}: {names} hold(s) the same offsets and a commit acknowledged them"
    return Choice([k.path for k in sorted(kept, key=lambda k: k.base_offset)], left_out, conflicts)


def _ambiguity(log: PartitionLog, candidates: Mapping[str, Candidate], conflicts: list[tuple[str, str]]) -> str:
    pairs = "; ".join(f"{candidates[a].describe()} and {candidates[b].describe()}" for a, b in conflicts)
    return (
        f"partition {log.topic}-{log.partition} was not repaired: files cover the same offsets and nothing says "
        f"which one a commit acknowledged: {pairs}. Nothing was written or deleted. Read each file "
        f"(`lakecleaner consume` of the other partitions is unaffected), then choose the one that holds the records "
        f"the producers were told were written: `lakecleaner repair --topic {log.topic} --partition {log.partition} "
        f"--prefer FILE` (several --prefer allowed)"
    )


def _vectors(
    store: ObjectStore, log: PartitionLog, metas: Mapping[str, Candidate], left_out: dict[str, str]
) -> dict[str, DeletionVector]:
    """The deletion vector each file of `metas` gets back: its largest readable one (a file's
    vectors only grow, `log.deletion_vectors`; a smaller one is an earlier clean's, left for gc);
    an unreadable one is put in `left_out` with the reason. When its rows must be physically gone
    is not stored in the blob: they are due at once (`REPAIRED_ERASE_BY_MS`)."""
    found: dict[str, DeletionVector] = {}
    for obj in store.list(log.prefix + "segments/"):
        path = obj.key[len(log.prefix) :]
        named = VECTOR_PATH.match(path)
        if named is None or named.group(1) not in metas:
            continue
        file = named.group(1)
        try:
            blob = store.read(obj.key)
            positions = decode_vector(blob, store.location(obj.key))
        except (CorruptSegment, ObjectNotFound) as exc:
            left_out[path] = f"unreadable, left where it is: {exc}"
            continue
        if not len(positions) or positions[-1] >= metas[file].meta.stats.record_count:
            left_out[path] = f"unreadable, left where it is: not a vector of {file}'s rows"
            continue
        vector = DeletionVector.of_blob(path, blob, len(positions), REPAIRED_ERASE_BY_MS)
        held = found.get(file)
        if held is None or (vector.cardinality, _version(vector)) > (held.cardinality, _version(held)):
            found[file] = vector
    return found


def _version(vector: DeletionVector) -> int:
    named = VECTOR_PATH.match(vector.path)
    return int(named.group(2)) if named else 0


def _segments_from(
    paths: list[str], metas: Mapping[str, Candidate], vectors: Mapping[str, DeletionVector]
) -> list[Segment]:
    """Group kept files into segments by the segment they were written for, each with the
    deletion vector it gets back; fill offset gaps (compacted-away ranges) with empty sealed
    segments so that ranges touch."""
    segments: list[Segment] = []
    for path in paths:
        meta, size = metas[path].meta, metas[path].size
        s = meta.stats
        file = SegmentFile(path, s.base_offset, s.next_offset, s.record_count, size, vectors.get(path))
        last = segments[-1] if segments else None
        if last is not None and last.next_offset < s.base_offset:
            segments.append(Segment(uuid.uuid4().hex[:16], last.next_offset, s.base_offset, sealed=True))
            last = segments[-1]
        same_segment = (
            last is not None
            and last.files
            and meta.kind != KIND_COMPACTED
            and metas[last.files[0].path].meta.segment_base_offset == meta.segment_base_offset
        )
        if same_segment and last is not None:
            horizons = [h for h in (last.earliest_delete_horizon_ms, s.earliest_delete_horizon_ms) if h is not None]
            segments[-1] = Segment(
                last.id,
                last.base_offset,
                s.next_offset,
                (*last.files, file),
                last.record_count + s.record_count,
                last.size_bytes + size,
                last.first_batch_max_timestamp,
                max(last.max_timestamp, s.max_timestamp),
                last.created_ms,
                True,
                last.tombstone_count + s.tombstone_count,
                min(horizons) if horizons else None,
                last_modified_ms=meta.written_ms,
            )
        else:
            segments.append(
                Segment(
                    uuid.uuid4().hex[:16],
                    s.base_offset,
                    s.next_offset,
                    (file,),
                    s.record_count,
                    size,
                    meta.first_batch_max_timestamp,
                    s.max_timestamp if meta.segment_max_timestamp is None else meta.segment_max_timestamp,
                    meta.written_ms,
                    True,
                    s.tombstone_count,
                    s.earliest_delete_horizon_ms,
                    last_modified_ms=meta.last_modified_ms,
                )
            )
    if segments and segments[-1].files and metas[segments[-1].files[-1].path].meta.kind != KIND_COMPACTED:
        last = segments[-1]
        segments[-1] = Segment(**{**last.__dict__, "sealed": False})
    return segments


def repair_partition(
    store: ObjectStore,
    topic: str,
    partition: int,
    config: TopicConfig,
    *,
    force: bool = False,
    log_start_offset: int | None = None,
    now_ms: int | None = None,
    prefer: Collection[str] = (),
    max_workers: int = 8,
    announced_version: int = 0,
) -> RepairReport:
    """Rebuild the manifest of `topic`-`partition` from its segment files and commit records, and
    commit it (the module docstring says how files are chosen).

    Refuses to overwrite a readable manifest unless `force`. `prefer`: paths (relative to the
    partition, as the RepairAmbiguous message names them) that win over any file covering the
    same offsets. The new manifest is written conditionally (create if missing, replace-if-
    unchanged if damaged), so a concurrent repair or writer cannot be overwritten silently.
    Raises RepairAmbiguous, having written and deleted nothing, when files cannot be told apart.

    `announced_version`: the highest manifest version of the partition the lake-wide views were
    told of (`SummaryStore.announced_version`). The rebuilt manifest takes a version above it,
    above every candidate's and above every commit record's: a view compares versions to tell a
    current summary entry from a stale one (summaries/read.py), and an Iceberg table never moves
    to an older version than it reflects, so a version must never go back.
    """
    log = PartitionLog(store, topic, partition, config)
    state, etag = _manifest_state(log)
    if state == "ok" and not force:
        raise LakeCleanerError(
            f"manifest of {topic}-{partition} is readable; repair rebuilds only a missing or damaged manifest "
            "(pass --force to rebuild it from the files anyway)"
        )
    now = wall_clock_ms() if now_ms is None else now_ms
    left_out: dict[str, str] = {}
    in_flight: dict[str, str] = {}
    candidates, recorded = _candidates(store, log, max_workers, left_out, in_flight)
    unknown = sorted(set(prefer) - candidates.keys())
    if unknown:
        raise LakeCleanerError(
            f"--prefer {unknown[0]}: not a readable segment file of {topic}-{partition} (give the path as the "
            "repair message names it, e.g. segments/00000000000000000042-0123456789abcdef.parquet)"
        )
    choice = choose_files(candidates, prefer)
    if choice.conflicts:
        raise RepairAmbiguous(_ambiguity(log, candidates, choice.conflicts))
    left_out.update(choice.left_out)
    kept = {path: candidates[path] for path in choice.kept}
    segments = _segments_from(choice.kept, candidates, _vectors(store, log, kept, left_out))
    next_offset = segments[-1].next_offset if segments else 0
    start = segments[0].base_offset if segments else next_offset
    if log_start_offset is not None:
        if not start <= log_start_offset <= next_offset:
            raise LakeCleanerError(
                f"log start offset {log_start_offset} is outside the repaired log [{start}, {next_offset}]"
            )
        start = log_start_offset
    versions = [c.meta.manifest_version for c in candidates.values()]
    versions += [c.acknowledged for c in candidates.values() if c.acknowledged is not None]
    version = max([*versions, recorded, announced_version], default=0) + 1
    pending = tuple(
        PendingDelete(p, now + config.file_delete_delay_ms, "repair: " + why)
        for p, why in left_out.items()
        if why.startswith(SUPERSEDED)
    )
    manifest = Manifest(
        topic,
        partition,
        version,
        start,
        next_offset,
        None,
        tuple(segments),
        pending,
        now,
        properties={REPAIRED_VERSION: str(version)},
    ).with_commit_id(new_commit_id())
    log.refuse_invalid(manifest)
    data = manifest.to_json()
    # a crashed run's staged files are unsynced until a commit names them (`ObjectStore.sync`)
    map_ordered(lambda path: store.sync(log.prefix + path), sorted(manifest.live_paths()), max_workers)
    store.write(partition_marker_key(topic, partition, version), b"")
    try:
        if etag is None:
            store.create(log.manifest_key, data)
        else:
            store.replace(log.manifest_key, data, etag)
    except ConditionFailed:
        # A write whose reply was lost is retried and meets itself as a 412: it landed if the
        # manifest now holds exactly what this repair wrote; otherwise another writer got there first.
        if store.read(log.manifest_key) != data:
            raise
    return RepairReport(topic, partition, state, manifest, choice.kept, left_out, in_flight)
