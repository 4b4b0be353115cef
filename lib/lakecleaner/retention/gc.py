"""Physical deletion (`lakecleaner gc`): the files that left the log, and files no log references.

1. Files in `pending_deletes` whose `delete_after_ms` ≤ now are deleted, then dropped from the
   manifest in one conditional commit. Deletion is idempotent, so a crash between the two, or
   in the middle of deleting, is repaired by the next run: it deletes the rest (again) and
   drops them all.
2. Orphans — files under `segments/` or `_staging/` that neither the segments nor
   `pending_deletes` reference (left by crashed appends or compactions) — are deleted once
   older than `file.delete.delay.ms`, and never younger than ORPHAN_MIN_AGE_MS (★ a safety
   margin), and never while a run holds a lease on the partition (`log/leases.py`: a running
   compaction's files are unreferenced until it commits; leases are judged by the wall clock,
   never by `--now`).
3. Commit records (`log/commits.py`) whose file is gone, after the deletions above.
4. Unfinished writes under the partition (`ObjectStore.list_unfinished`: an S3 multipart upload
   a crashed run never completed, a local temporary file never renamed) are discarded by the
   same rule as orphans: started at least that long ago, no live lease. Listings do not show
   them, yet they hold records (bytes the bucket bills, and copies of keys an erasure must reach).
5. For a topic that is an Iceberg table, the table's snapshots older than file.delete.delay.ms
   are expired first, and a pending file a kept snapshot still references stays pending until
   one no longer does (`iceberg/expiry.py`); when the table cannot be read, every pending file
   stays.
Physical deletion never guesses. The manifest is validated when read (every path a file in
`segments/`, pending deletes never live files), and a manifest that fails stops that partition.
Before anything is deleted, the topic's files are listed (once for every partition, before any
manifest is read): when a partition's manifest references a file that is not there, the
manifest does not describe the partition and nothing in it is deleted (the file may have been
renamed or restored elsewhere; `lakecleaner repair` settles it).
A file the manifest's segments reference is never deleted. `dry_run` lists what would go.

On S3 a bucket with versioning keeps a deleted object's old versions, so superseded and
deleted records would survive: gc refuses to run there unless `lake.storage.delete_all_versions`
is true, in which case the store deletes every version of each file (as of every object
lakecleaner deletes: `S3Store.delete_many`).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from lakecleaner.clock import wall_clock_ms
from lakecleaner.errors import LakeCleanerError
from lakecleaner.faults import crash_point
from lakecleaner.io import ObjectInfo, UnfinishedWrite
from lakecleaner.io.concurrent import map_ordered
from lakecleaner.lake import Lake, Topic
from lakecleaner.log.commits import stale_records
from lakecleaner.log.layout import by_partition, topic_prefix
from lakecleaner.log.leases import LEASE_SUFFIX, live_leases
from lakecleaner.log.manifest import Manifest
from lakecleaner.log.partition import PartitionLog, unfinished_by_partition
from lakecleaner.runs.reports import new_run_id, prune_runs, store_report

ORPHAN_MIN_AGE_MS = 3_600_000
logger = logging.getLogger(__name__)


class VersionedBucketError(LakeCleanerError):
    """Physical deletion refused on a versioned bucket."""


@dataclass(frozen=True)
class GcResult:
    topic: str
    partition: int
    deleted_pending: tuple[str, ...] = ()
    deleted_orphans: tuple[str, ...] = ()
    #: The objects (paths in the partition) whose unfinished writes were discarded.
    discarded_unfinished: tuple[str, ...] = ()
    waiting: int = 0
    error: str | None = None
    # Why orphans were left alone (a live run's lease), when they were.
    orphans_kept: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "deleted_pending": list(self.deleted_pending),
            "deleted_orphans": list(self.deleted_orphans),
            "discarded_unfinished": list(self.discarded_unfinished),
            "files_deleted": len(self.deleted_pending) + len(self.deleted_orphans),
            "pending_still_waiting": self.waiting,
            "error": self.error,
            "orphans_kept": self.orphans_kept,
        }


@dataclass(frozen=True)
class GcRunReport:
    topic: str
    run_id: str
    now_ms: int
    partitions: tuple[GcResult, ...] = field(default_factory=tuple)
    location: str | None = None
    dry_run: bool = False
    #: Storage operations retried after a transient error during the run.
    storage_retries: int = 0
    #: Runs whose report folders were pruned (`lake.report_retention_days`).
    run_reports_pruned: int = 0
    #: What gc could not do beside the partitions' own work, which went on without it (listing
    #: the topic's unfinished uploads, pruning run reports).
    warnings: tuple[str, ...] = ()
    #: The Kafka Connect sink's files adoption replaced, deleted once due (`adopt.originals`).
    originals_deleted: tuple[str, ...] = ()
    #: Why no file that left the log was deleted (the topic's tables could not be read), or None.
    blocked: str | None = None

    @property
    def files_deleted(self) -> int:
        return sum(len(p.deleted_pending) + len(p.deleted_orphans) for p in self.partitions)

    @property
    def failed(self) -> list[GcResult]:
        return [p for p in self.partitions if p.error]

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "gc",
            "dry_run": self.dry_run,
            "topic": self.topic,
            "run_id": self.run_id,
            "now_ms": self.now_ms,
            "files_deleted": self.files_deleted,
            "partitions_failed": len(self.failed),
            "storage_retries": self.storage_retries,
            "run_reports_pruned": self.run_reports_pruned,
            "warnings": list(self.warnings),
            "originals_deleted": list(self.originals_deleted),
            "blocked": self.blocked,
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


class PartitionNotAsDescribed(LakeCleanerError):
    """The manifest references files the partition does not hold: gc deletes nothing there."""


@dataclass(frozen=True)
class PartitionListing:
    """What the listings of a topic found under one partition's folder: its objects and its
    unfinished writes. Taken before the partition's manifest is read, so whatever a run committed
    before it is in the manifest, and a run still staging has its lease in it."""

    objects: Sequence[ObjectInfo] = ()
    unfinished: Sequence[UnfinishedWrite] = ()


def list_partitions(lake: Lake, topic: str, warnings: list[str]) -> dict[int, PartitionListing]:
    """Every partition's listing from two listings of the whole topic (a LIST request per thousand
    objects, however many partitions hold them). A store that cannot list unfinished uploads
    (an S3-compatible one without ListMultipartUploads) adds to `warnings` and lists none."""
    objects = by_partition(topic, lake.store.list(topic_prefix(topic)))
    unfinished, unlisted = unfinished_by_partition(lake.store, topic)
    if unlisted is not None:
        warnings.append(f"unfinished writes were not listed, so none was discarded: {unlisted}")
        logger.warning("gc of %s: %s", topic, warnings[-1])
    return {p: PartitionListing(objects.get(p, ()), unfinished.get(p, ())) for p in objects.keys() | unfinished.keys()}


def collect_garbage(
    lake: Lake,
    topic: Topic,
    partition: int,
    now_ms: int,
    *,
    listing: PartitionListing,
    orphan_min_age_ms: int = ORPHAN_MIN_AGE_MS,
    dry_run: bool = False,
    held: frozenset[str] | None = frozenset(),
) -> GcResult:
    """Delete one partition's expired pending files and old orphans, and discard its old
    unfinished writes (see the module docstring); `listing` is the partition's (`list_partitions`).
    `held`: locations of files readers of the topic's Iceberg table may still read, which stay
    pending (None: unknown, so every pending file stays)."""
    log = topic.partition(partition)
    files = {
        path: obj
        for obj in listing.objects
        if (path := obj.key[len(log.prefix) :]).startswith(("segments/", "_staging/"))
    }
    manifest, etag = log.load()
    unlisted = sorted(manifest.live_paths() - files.keys())  # e.g. appended since the listing
    missing = [path for path in unlisted if not lake.store.exists(log.prefix + path)]
    if missing:
        raise PartitionNotAsDescribed(
            f"partition {topic.name}-{partition}: the manifest references {len(missing)} file(s) that are not in "
            f"{lake.store.location(log.prefix + 'segments/')} (first: {missing[0]}); nothing was deleted. Restore "
            f"the files, or run `lakecleaner repair --topic {topic.name} --partition {partition}`"
        )
    due = [
        p.path
        for p in manifest.pending_deletes
        if p.delete_after_ms <= now_ms and held is not None and lake.store.location(log.prefix + p.path) not in held
    ]
    min_age_ms = max(topic.config.file_delete_delay_ms, orphan_min_age_ms)
    after, keep = manifest, manifest.referenced_paths()
    if not dry_run:
        after = _delete_due(lake, log, (manifest, etag), due, now_ms)
        keep = after.referenced_paths() | set(due)
    orphans, kept = _orphans(lake, files, keep, now_ms, min_age_ms)
    abandoned = _abandoned(listing.unfinished, now_ms, min_age_ms) if kept is None else []
    if not dry_run:
        lake.store.delete_many([log.prefix + path for path in orphans])
        for write in abandoned:
            lake.store.discard_unfinished(write)
        present = files.keys() - set(orphans) - set(due)
        lake.store.delete_many([log.prefix + path for path in stale_records(listing.objects, log.prefix, present)])
    waiting = sum(1 for p in after.pending_deletes if p.delete_after_ms > now_ms)
    relative = tuple(w.key[len(log.prefix) :] for w in abandoned)
    return GcResult(topic.name, partition, tuple(due), tuple(orphans), relative, waiting, orphans_kept=kept)


def _delete_due(lake: Lake, log: PartitionLog, known: tuple[Manifest, str], due: list[str], now_ms: int) -> Manifest:
    """Delete the pending files that are due (in one request where the store can), then drop them
    from the manifest in one commit, which starts from the manifest gc read (`known`: with its
    etag; one conditional PUT when nothing changed since); the manifest after it (the one read
    when none was due)."""
    manifest = known[0]
    lake.store.delete_many([log.prefix + path for path in due])
    crash_point("gc.before_manifest_commit")
    if not due:
        return manifest
    gone = set(due)

    def drop_deleted(current: Manifest) -> Manifest | None:
        kept = tuple(p for p in current.pending_deletes if p.path not in gone)
        if len(kept) == len(current.pending_deletes):
            return None
        return current.next_version(now_ms, pending_deletes=kept)

    return log.commit(drop_deleted, known=known)


def _orphans(
    lake: Lake, files: Mapping[str, ObjectInfo], keep: set[str], now_ms: int, min_age_ms: int
) -> tuple[list[str], str | None]:
    """The listed files, other than `keep`, old enough to delete as orphans; or none and why, while
    a run holds a lease on the partition."""
    leases = live_leases(lake.store, [obj for path, obj in files.items() if path.endswith(LEASE_SUFFIX)])
    if leases:
        holders = ", ".join(sorted(lease.run_id for lease in leases))
        return [], f"run(s) {holders} hold a lease on the partition: their unreferenced files are not orphans yet"
    return [p for p, obj in files.items() if p not in keep and obj.mtime_ms + min_age_ms <= now_ms], None


def _prune_run_reports(lake: Lake, topic: str, now_ms: int, dry_run: bool, warnings: list[str]) -> int:
    """The topic's run reports older than lake.report_retention_days go (`reports.prune_runs`):
    how many runs; an error that stops it adds to `warnings`. Their age is judged at `now_ms` or
    the wall clock, whichever is earlier: a `--now` ahead of the clock never erases history."""
    retention_ms = lake.config.report_retention_ms
    if retention_ms is None:
        return 0
    at = min(now_ms, wall_clock_ms())
    try:
        concurrency = lake.config.storage.max_concurrency
        return prune_runs(lake.store, topic, at, retention_ms, dry_run=dry_run, concurrency=concurrency)
    except LakeCleanerError as exc:
        warnings.append(f"old run reports were not pruned: {exc}")
        logger.warning("gc of %s: %s", topic, warnings[-1])
        return 0


def _held_by_table_readers(lake: Lake, topic: str, now_ms: int, dry_run: bool) -> frozenset[str] | str:
    """The files snapshots of the topic's Iceberg tables still reference, after the maintenance of
    its latest-values table (`iceberg.maintenance`) and expiring the snapshots readers no longer
    hold (`iceberg.expiry`); none for a topic without tables; or why they cannot
    be known (a damaged table or catalog, in one line naming it and the fix), when every pending
    file stays and the run says so (exit 1). The tables of a topic that no longer keeps them are
    dropped, their folders emptied after the delay (`iceberg.expiry.drop_turned_off`)."""
    enabled = lake.config.iceberg_enabled(topic)
    if dry_run or (not enabled and not lake.has_table_folders(topic)):
        return frozenset()
    try:
        from lakecleaner.iceberg.damage import iceberg_errors
        from lakecleaner.iceberg.expiry import drop_turned_off, expire_and_hold
        from lakecleaner.iceberg.maintenance import maintain_latest

        with iceberg_errors(lake, topic):
            if not enabled:
                drop_turned_off(lake, topic, now_ms)
                return frozenset()
            maintain_latest(lake.topic(topic), now_ms)
            return expire_and_hold(lake, topic, now_ms)
    except LakeCleanerError as exc:  # which files readers hold is unknown: none is deleted
        logger.warning("gc of %s: no file that left the log was deleted: %s", topic, exc)
        return f"no file that left the log was deleted: {exc}"


def _adopted_originals(lake: Lake, topic: str, now_ms: int, dry_run: bool, warnings: list[str]) -> list[str]:
    """Delete the sink's files an adoption replaced, once due and still the objects adopted
    (`adopt.originals`); one that changed since is kept, with a warning; a failure is a warning,
    and nothing of it is deleted."""
    from lakecleaner.adopt.originals import delete_due_originals

    try:
        swept = delete_due_originals(lake, topic, now_ms, dry_run=dry_run)
    except LakeCleanerError as exc:
        warnings.append(f"adopted originals: {exc}")
        return []
    warnings.extend(f"adopted original kept: it changed after it was adopted: {c}" for c in swept.changed)
    return swept.deleted


def _abandoned(unfinished: Collection[UnfinishedWrite], now_ms: int, min_age_ms: int) -> list[UnfinishedWrite]:
    """The unfinished writes old enough to discard: started at least `min_age_ms` before now (a
    write in progress is seconds old; a live lease on the partition keeps every one)."""
    return [w for w in unfinished if w.started_ms + min_age_ms <= now_ms]


def gc_topic(
    lake: Lake,
    topic_name: str,
    now_ms: int | None = None,
    *,
    partitions: Collection[int] | None = None,
    run_id: str | None = None,
    orphan_min_age_ms: int = ORPHAN_MIN_AGE_MS,
    dry_run: bool = False,
) -> GcRunReport:
    """`collect_garbage` for every (or the given) partition, each on its own, concurrently over
    the bounded metadata pool: a partition that fails is reported (`error`) and the others
    proceed. The report goes to gc.json."""
    now = wall_clock_ms() if now_ms is None else now_ms
    ensure_deletes_are_final(lake)
    topic = lake.topic(topic_name)
    retries_before = lake.store.retries
    warnings: list[str] = []
    listings = list_partitions(lake, topic_name, warnings)  # before any manifest is read
    readers = _held_by_table_readers(lake, topic_name, now, dry_run)
    held, blocked = (None, readers) if isinstance(readers, str) else (readers, None)

    def collect(p: int) -> GcResult:
        try:
            listing = listings.get(p, PartitionListing())
            return collect_garbage(
                lake, topic, p, now, listing=listing, orphan_min_age_ms=orphan_min_age_ms, dry_run=dry_run, held=held
            )
        except LakeCleanerError as exc:
            logger.warning("gc of %s-%d: %s", topic_name, p, exc)
            return GcResult(topic_name, p, error=str(exc))

    chosen = sorted(partitions) if partitions is not None else range(topic.partitions)
    results = map_ordered(collect, chosen, lake.config.storage.max_concurrency)
    pruned = _prune_run_reports(lake, topic_name, now, dry_run, warnings)
    originals = _adopted_originals(lake, topic_name, now, dry_run, warnings)
    run = run_id or new_run_id(now)
    report = GcRunReport(
        topic_name,
        run,
        now,
        tuple(results),
        dry_run=dry_run,
        storage_retries=lake.store.retries - retries_before,
        run_reports_pruned=pruned,
        warnings=tuple(warnings),
        originals_deleted=tuple(originals),
        blocked=blocked,
    )
    if dry_run:  # a dry run leaves no trace: its report is what the command prints
        return report
    return replace(report, location=store_report(lake.store, topic_name, run, "gc", report.to_dict()))
