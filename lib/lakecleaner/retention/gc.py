"""Physical deletion (`lakecleaner gc`): the files that left the log, and files no log references.

1. Files in `pending_deletes` whose `delete_after_ms` ≤ now are deleted, then dropped from the
   manifest in one conditional commit. Deletion is idempotent, so a crash between the two, or
   in the middle of deleting, is repaired by the next run: it deletes the rest (again) and
   drops them all.
2. Orphans — files under `segments/` or `_staging/` that neither the segments nor
   `pending_deletes` reference (left by crashed appends or compactions) — are deleted once
   older than `file.delete.delay.ms`, and never younger than ORPHAN_MIN_AGE_MS (★ a safety
   margin: a running compaction stages files for longer than the one-minute default delay, and
   they are unreferenced until it commits).
A file the manifest's segments reference is never deleted, whatever `pending_deletes` says.

On S3 a bucket with versioning keeps a deleted object's old versions, so superseded and
deleted records would survive: gc refuses to run there unless `lake.storage.delete_all_versions`
is true, in which case it deletes every version of each file.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field, replace
from typing import Any

from lakecleaner.clock import wall_clock_ms
from lakecleaner.errors import LakeCleanerError
from lakecleaner.faults import crash_point
from lakecleaner.lake import Lake, Topic
from lakecleaner.log.manifest import Manifest
from lakecleaner.reports import new_run_id, store_report

ORPHAN_MIN_AGE_MS = 3_600_000


class VersionedBucketError(LakeCleanerError):
    """Physical deletion refused on a versioned bucket."""


@dataclass(frozen=True)
class GcResult:
    topic: str
    partition: int
    deleted_pending: tuple[str, ...] = ()
    deleted_orphans: tuple[str, ...] = ()
    waiting: int = 0
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "deleted_pending": list(self.deleted_pending),
            "deleted_orphans": list(self.deleted_orphans),
            "files_deleted": len(self.deleted_pending) + len(self.deleted_orphans),
            "pending_still_waiting": self.waiting,
            "error": self.error,
        }


@dataclass(frozen=True)
class GcRunReport:
    topic: str
    run_id: str
    now_ms: int
    partitions: tuple[GcResult, ...] = field(default_factory=tuple)
    location: str | None = None

    @property
    def files_deleted(self) -> int:
        return sum(len(p.deleted_pending) + len(p.deleted_orphans) for p in self.partitions)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "gc",
            "topic": self.topic,
            "run_id": self.run_id,
            "now_ms": self.now_ms,
            "files_deleted": self.files_deleted,
            "partitions": [p.to_dict() for p in self.partitions],
        }


def ensure_deletes_are_final(lake: Lake) -> None:
    """Refuse physical deletion on a versioned bucket unless every version is to be deleted."""
    if lake.store.versioning_enabled() and not lake.config.storage.delete_all_versions:
        raise VersionedBucketError(
            f"the bucket of {lake.uri} has versioning enabled: deleting a file there keeps its old version, "
            "so superseded and deleted records would survive. Disable versioning, or set "
            "lake.storage.delete_all_versions: true to delete every version"
        )


def _delete(lake: Lake, key: str) -> None:
    if lake.config.storage.delete_all_versions:
        lake.store.delete_all_versions(key)
    else:
        lake.store.delete(key)


def _live_paths(manifest: Manifest) -> set[str]:
    return {f.path for s in manifest.segments for f in s.files}


def collect_garbage(
    lake: Lake, topic: Topic, partition: int, now_ms: int, *, orphan_min_age_ms: int = ORPHAN_MIN_AGE_MS
) -> GcResult:
    """Delete one partition's expired pending files and old orphans (see the module docstring)."""
    log = topic.partition(partition)
    manifest = log.manifest()
    live = _live_paths(manifest)
    due = [p.path for p in manifest.pending_deletes if p.delete_after_ms <= now_ms and p.path not in live]
    for i, path in enumerate(due):
        _delete(lake, log.prefix + path)
        if i == 0:
            crash_point("gc.after_first_delete")
    crash_point("gc.before_manifest_commit")
    gone = set(due)

    def drop_deleted(current: Manifest) -> Manifest | None:
        kept = tuple(p for p in current.pending_deletes if p.path not in gone)
        if len(kept) == len(current.pending_deletes):
            return None
        return current.next_version(now_ms, pending_deletes=kept)

    after = log.commit(drop_deleted) if due else manifest
    orphans = _delete_orphans(
        lake, log.prefix, after, now_ms, max(topic.config.file_delete_delay_ms, orphan_min_age_ms)
    )
    waiting = sum(1 for p in after.pending_deletes if p.delete_after_ms > now_ms)
    return GcResult(topic.name, partition, tuple(due), tuple(orphans), waiting)


def _delete_orphans(lake: Lake, prefix: str, manifest: Manifest, now_ms: int, min_age_ms: int) -> list[str]:
    referenced = manifest.referenced_paths()
    deleted = []
    for directory in ("segments/", "_staging/"):
        for obj in lake.store.list(prefix + directory):
            path = obj.key[len(prefix) :]
            if path in referenced or obj.mtime_ms + min_age_ms > now_ms:
                continue
            _delete(lake, obj.key)
            deleted.append(path)
    return deleted


def gc_topic(
    lake: Lake,
    topic_name: str,
    now_ms: int | None = None,
    *,
    partitions: Collection[int] | None = None,
    run_id: str | None = None,
    orphan_min_age_ms: int = ORPHAN_MIN_AGE_MS,
) -> GcRunReport:
    """`collect_garbage` for every (or the given) partition; the report goes to gc.json."""
    now = wall_clock_ms() if now_ms is None else now_ms
    ensure_deletes_are_final(lake)
    topic = lake.topic(topic_name)
    results = []
    for p in sorted(partitions) if partitions is not None else range(topic.partitions):
        try:
            results.append(collect_garbage(lake, topic, p, now, orphan_min_age_ms=orphan_min_age_ms))
        except LakeCleanerError as exc:
            results.append(GcResult(topic_name, p, error=str(exc)))
    run = run_id or new_run_id(now)
    report = GcRunReport(topic_name, run, now, tuple(results))
    return replace(report, location=store_report(lake.store, topic_name, run, "gc", report.to_dict()))
