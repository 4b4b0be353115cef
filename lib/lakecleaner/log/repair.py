"""Rebuild a missing or corrupt manifest from the segment files' own metadata (`lakecleaner repair`).

Every segment file records its topic, partition, offsets, the segment it was written for,
the manifest version it was written to commit into, and its statistics. Repair reads only
the Parquet footers and chooses, for every offset, the newest file covering it: files are
taken in order of intended manifest version (newest first) and a file is kept only if its
range overlaps no file already kept. So a compacted file wins over the files it replaced,
and of two files written for the same offsets (an orphan left by a crashed append and the
append that succeeded) the later one wins. Files left out go to `pending_deletes`.

What repair cannot know: a log start offset moved by trim or retention whose files are still
present (pass `log_start_offset`), the cleaner checkpoint (reset: the next cleaning rescans
from the log start, which is correct, only slower), and which segment was still open (the
last one is reopened as the active segment unless it was written by a compaction).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from lakecleaner.clock import wall_clock_ms
from lakecleaner.config import TopicConfig
from lakecleaner.errors import (
    ConditionFailed,
    CorruptManifest,
    CorruptSegment,
    LakeCleanerError,
    ObjectNotFound,
    TopicNotFound,
)
from lakecleaner.io import ObjectStore
from lakecleaner.log.manifest import SEGMENT_PATH, Manifest, PendingDelete, Segment, SegmentFile
from lakecleaner.log.partition import PartitionLog
from lakecleaner.log.segment_files import KIND_COMPACTED, FileMeta, read_file_meta


@dataclass(frozen=True)
class RepairReport:
    topic: str
    partition: int
    previous_state: str
    manifest: Manifest
    kept_files: list[str] = field(default_factory=list)
    left_out: dict[str, str] = field(default_factory=dict)

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
        }


def _manifest_state(log: PartitionLog) -> tuple[str, str | None]:
    """('ok' | 'missing' | 'corrupt: …', etag of the current object or None)."""
    try:
        log.load()
    except TopicNotFound:
        return "missing", None
    except CorruptManifest as exc:
        _, etag = log.store.read_with_etag(log.manifest_key)
        return f"corrupt: {exc}", etag
    return "ok", log.store.read_with_etag(log.manifest_key)[1]


def _read_metas(store: ObjectStore, log: PartitionLog, left_out: dict[str, str]) -> dict[str, tuple[FileMeta, int]]:
    metas: dict[str, tuple[FileMeta, int]] = {}
    for obj in store.list(log.prefix + "segments/"):
        path = obj.key[len(log.prefix) :]
        if not SEGMENT_PATH.match(path):  # not a segment file name (e.g. in a sub-folder): not ours to judge
            continue
        try:
            meta = read_file_meta(store, obj.key)
        except (CorruptSegment, ObjectNotFound) as exc:
            left_out[path] = f"unreadable: {exc}"
            continue
        if (meta.topic, meta.partition) != (log.topic, log.partition):
            left_out[path] = f"belongs to {meta.topic}-{meta.partition}"
            continue
        metas[path] = (meta, obj.size)
    return metas


def _choose_files(metas: dict[str, tuple[FileMeta, int]], left_out: dict[str, str]) -> list[str]:
    """Newest-first, non-overlapping choice of files; returns the kept paths in offset order."""
    order = sorted(metas, key=lambda p: (metas[p][0].manifest_version, metas[p][0].written_ms), reverse=True)
    kept: list[tuple[int, int, str]] = []
    for path in order:
        stats = metas[path][0].stats
        if any(stats.base_offset < end and start < stats.next_offset for start, end, _ in kept):
            left_out[path] = "superseded by a newer file covering the same offsets"
            continue
        kept.append((stats.base_offset, stats.next_offset, path))
    return [p for _, _, p in sorted(kept)]


def _segments_from(paths: list[str], metas: dict[str, tuple[FileMeta, int]]) -> list[Segment]:
    """Group kept files into segments by the segment they were written for; fill offset gaps
    (compacted-away ranges) with empty sealed segments so that ranges touch."""
    segments: list[Segment] = []
    for path in paths:
        meta, size = metas[path]
        s = meta.stats
        file = SegmentFile(path, s.base_offset, s.next_offset, s.record_count, size)
        last = segments[-1] if segments else None
        if last is not None and last.next_offset < s.base_offset:
            segments.append(Segment(uuid.uuid4().hex[:16], last.next_offset, s.base_offset, sealed=True))
            last = segments[-1]
        same_segment = (
            last is not None
            and last.files
            and meta.kind != KIND_COMPACTED
            and metas[last.files[0].path][0].segment_base_offset == meta.segment_base_offset
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
    if segments and segments[-1].files and metas[segments[-1].files[-1].path][0].kind != KIND_COMPACTED:
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
) -> RepairReport:
    """Rebuild the manifest of `topic`-`partition` from its segment files and commit it.

    Refuses to overwrite a readable manifest unless `force`. The new manifest is written
    conditionally (create if missing, replace-if-unchanged if corrupt), so a concurrent
    repair or writer cannot be overwritten silently.
    """
    log = PartitionLog(store, topic, partition, config)
    state, etag = _manifest_state(log)
    if state == "ok" and not force:
        raise LakeCleanerError(
            f"manifest of {topic}-{partition} is readable; repair rebuilds only a missing or corrupt manifest "
            "(pass --force to rebuild it from the files anyway)"
        )
    now = wall_clock_ms() if now_ms is None else now_ms
    left_out: dict[str, str] = {}
    metas = _read_metas(store, log, left_out)
    kept = _choose_files(metas, left_out)
    segments = _segments_from(kept, metas)
    next_offset = segments[-1].next_offset if segments else 0
    start = segments[0].base_offset if segments else next_offset
    if log_start_offset is not None:
        if not start <= log_start_offset <= next_offset:
            raise LakeCleanerError(
                f"log start offset {log_start_offset} is outside the repaired log [{start}, {next_offset}]"
            )
        start = log_start_offset
    version = max((m.manifest_version for m, _ in metas.values()), default=0) + 1
    pending = tuple(
        PendingDelete(p, now + config.file_delete_delay_ms, "repair: " + why)
        for p, why in left_out.items()
        if not why.startswith("belongs to")
    )
    manifest = Manifest(topic, partition, version, start, next_offset, None, tuple(segments), pending, now)
    log.refuse_invalid(manifest)
    data = manifest.to_json()
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
    return RepairReport(topic, partition, state, manifest, kept, left_out)
