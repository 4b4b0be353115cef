"""Applying retention plans (DESIGN section 4, "Retention") to the lake.

For each partition: plan on the current manifest (pure, lakecleaner.policy.retention), check
the result with Great Expectations, and commit it as ONE conditional manifest write on the
manifest it was planned on. The partitions' results are checked together, in one validation
(`_check_together`: a validation's fixed cost, not its rows, is what a partition paid). When
another writer commits first, the plan is made and checked again on the new manifest, so a
retention commit can never delete a segment a concurrent compaction or append has just changed.
Deleted segments' files go to `pending_deletes`; they are deleted physically by `gc` once
`file.delete.delay.ms` has passed, so a reader holding the previous manifest can finish.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq

from lakecleaner.clock import wall_clock_ms
from lakecleaner.errors import LakeCleanerError, StorageError
from lakecleaner.faults import crash_point
from lakecleaner.io.concurrent import map_ordered
from lakecleaner.lake import Lake, Topic
from lakecleaner.log.manifest import Manifest
from lakecleaner.log.segment_files import read_failure
from lakecleaner.offsets import ConsumedPosition
from lakecleaner.policy.retention import CONSUMED, RetentionPlan, apply_retention, plan_retention
from lakecleaner.policy.trim import apply_trim
from lakecleaner.runs.reports import new_run_id, store_report

if TYPE_CHECKING:
    from lakecleaner.quality import Check, QualityReport

COMMITTED, NOTHING_TO_DO, DRY_RUN, FAILED_QUALITY, FAILED = (
    "committed",
    "nothing-to-do",
    "dry-run",
    "failed-quality",
    "failed",
)


class RetentionQualityError(LakeCleanerError):
    def __init__(self, report: QualityReport, unreadable: list[str] | None = None) -> None:
        self.report = report
        files = f"; unreadable: {'; '.join(unreadable)}" if unreadable else ""
        super().__init__(report.summary() + files)


@dataclass(frozen=True)
class PartitionRetentionResult:
    topic: str
    partition: int
    status: str
    plan: RetentionPlan | None
    quality: QualityReport | None = None
    manifest_version: int | None = None
    consumers_below_log_start: dict[str, int] = field(default_factory=dict)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        plan = self.plan
        per_rule: dict[str, dict[str, int]] = {}
        for d in plan.deletions if plan else ():
            entry = per_rule.setdefault(d.rule, {"segments": 0, "bytes": 0, "records": 0})
            entry["segments"] += 1
            entry["bytes"] += d.size_bytes
            entry["records"] += d.record_count
        return {
            "topic": self.topic,
            "partition": self.partition,
            "status": self.status,
            "deleted_by_rule": per_rule,
            "new_log_start_offset": plan.new_log_start_offset if plan else None,
            "held_back_by": list(plan.held_back_by) if plan else [],
            "consumed_skipped": plan.consumed_skipped if plan else None,
            "plan": plan.to_dict() if plan else None,
            "quality": self.quality.to_dict() if self.quality else None,
            "manifest_version": self.manifest_version,
            "consumers_below_log_start": self.consumers_below_log_start,
            "error": self.error,
        }


@dataclass(frozen=True)
class RetentionRunReport:
    topic: str
    run_id: str
    now_ms: int
    partitions: tuple[PartitionRetentionResult, ...]
    location: str | None = None
    #: Storage operations retried after a transient error during the run.
    storage_retries: int = 0
    #: Where consumed retention read the groups' committed offsets (`OffsetStore.source_of`); None
    #: when the topic has no consumed retention.
    offsets_source: str | None = None

    @property
    def success(self) -> bool:
        return all(p.status not in (FAILED, FAILED_QUALITY) for p in self.partitions)

    def to_dict(self) -> dict[str, Any]:
        parts = [p.to_dict() for p in self.partitions]
        return {
            "kind": "retention",
            "topic": self.topic,
            "run_id": self.run_id,
            "now_ms": self.now_ms,
            "success": self.success,
            "partitions_failed": sum(p.status in (FAILED, FAILED_QUALITY) for p in self.partitions),
            "storage_retries": self.storage_retries,
            "offsets_source": self.offsets_source,
            "segments_deleted": sum(len(p.plan.deletions) for p in self.partitions if p.plan and p.status == COMMITTED),
            "bytes_deleted": sum(p.plan.deleted_bytes for p in self.partitions if p.plan and p.status == COMMITTED),
            "partitions": parts,
        }


def _readable_records(lake: Lake, prefix: str, manifest: Manifest) -> list[dict[str, Any]]:
    """One row per remaining segment: the records the manifest expects and those its files hold
    (from each file's Parquet footer). A file that is missing or does not parse counts as -1 and is
    named in the row (`unreadable`); a storage error is raised (transient is not corrupt)."""
    rows = []
    for seg in manifest.segments:
        readable, unreadable = 0, None
        for f in seg.files:
            location = lake.store.location(prefix + f.path)
            try:
                readable += pq.read_metadata(
                    lake.store.arrow_path(prefix + f.path), filesystem=lake.store.arrow_fs
                ).num_rows
            except FileNotFoundError:
                readable, unreadable = -1, f"{location} is missing"
                break
            except (OSError, ValueError) as exc:
                failure = read_failure(exc, location)
                if isinstance(failure, StorageError):
                    raise failure from exc
                readable, unreadable = -1, str(failure)
                break
        rows.append({"segment": seg.id, "expected": seg.record_count, "readable": readable, "unreadable": unreadable})
    return rows


def _retention_facts(
    lake: Lake, prefix: str, before: Manifest, after: Manifest, plan: RetentionPlan, consumed: ConsumedPosition | None
) -> list[dict[str, Any]]:
    """What the retention checks judge of one partition's result, a row each: every deleted
    segment (`allowed`: not a consumed deletion above the minimum committed offset), every
    remaining segment (the records its manifest entry expects and its files hold), and the new
    log start offset (`allowed`: the base of the first remaining segment, next_offset when
    nothing remains, never moved back)."""
    deleted = [
        {
            "kind": "deleted",
            "segment": d.segment_id,
            "rule": d.rule,
            "next_offset": d.next_offset,
            "allowed": d.rule != CONSUMED
            or (consumed is not None and consumed.offset is not None and d.next_offset <= consumed.offset),
            "expected": 0,
            "readable": 0,
        }
        for d in plan.deletions
    ]
    expected_start = after.segments[0].base_offset if after.segments else after.next_offset
    log_start = {
        "kind": "log_start",
        "allowed": after.log_start_offset == max(expected_start, before.log_start_offset),
        "expected": 0,
        "readable": 0,
    }
    remaining = [{"kind": "remaining", "allowed": True, **r} for r in _readable_records(lake, prefix, after)]
    return [{"partition": after.partition, **row} for row in [*deleted, *remaining, log_start]]


def _retention_checks() -> list[Check]:
    """The retention checks, new for each validation (GX binds an expectation to one suite)."""
    from lakecleaner.quality import Check, expectations

    gxe = expectations()
    return [
        Check(
            "consumed retention deletes only segments every subscribed group has consumed, and "
            "the log start offset is the base of the first remaining segment",
            gxe.ExpectColumnValuesToBeInSet(column="allowed", value_set=[True]),
        ),
        Check(
            "every record of every remaining segment is still readable",
            gxe.ExpectColumnPairValuesToBeEqual(column_A="expected", column_B="readable"),
        ),
    ]


def _validate_facts(subject: str, facts: list[dict[str, Any]]) -> QualityReport:
    # Imported here, not with the module: Great Expectations takes seconds to import, and every
    # Airflow task of a topic's DAG imports this module (through the DAG file), not only retention.
    import pandas as pd

    from lakecleaner.quality import validate

    return validate(subject, pd.DataFrame(facts), _retention_checks())


def _unreadable(facts: list[dict[str, Any]]) -> list[str]:
    return [r["unreadable"] for r in facts if r.get("unreadable")]


def check_retention(
    lake: Lake,
    prefix: str,
    before: Manifest,
    after: Manifest,
    plan: RetentionPlan,
    consumed: ConsumedPosition | None,
) -> QualityReport:
    """GX checks on one partition's retention result before it is committed (`_retention_facts`):
    no segment removed above the minimum committed offset unless a forced rule (retention.ms,
    retention.bytes, log start breach / trim) removed it; the new log start offset is the first
    remaining base (next_offset when nothing remains); every remaining segment's records are
    readable. Raises RetentionQualityError, naming any unreadable file, when a check fails."""
    facts = _retention_facts(lake, prefix, before, after, plan, consumed)
    report = _validate_facts(f"retention of {after.topic}-{after.partition}", facts)
    if not report.success:
        raise RetentionQualityError(report, _unreadable(facts))
    return report


@dataclass(frozen=True)
class _Planned:
    """A partition's retention, planned on its manifest as read (`known`: manifest and etag) and
    not yet committed: the manifest to commit and the facts its checks judge."""

    partition: int
    known: tuple[Manifest, str]
    plan: RetentionPlan
    updated: Manifest
    facts: list[dict[str, Any]]


def _check_together(topic: str, planned: list[_Planned]) -> dict[int, QualityReport]:
    """The retention checks of many partitions in one GX validation over all their facts: a
    validation costs some 40 ms whatever its size, which at 1,000 partitions, one validation
    each, was most of a retention run. When it fails, each half is validated again, down to the
    partitions that fail on their own (a partition's report is that of the smallest set it passed
    in, or its own failure): k failing partitions of n cost about 2k·log2(n) validations."""
    if not planned:
        return {}
    first, last = planned[0].partition, planned[-1].partition
    subject = f"retention of {topic}-{first}"
    if len(planned) > 1:
        subject = f"retention of {topic} partitions {first}..{last} ({len(planned)} checked together)"
    report = _validate_facts(subject, [row for p in planned for row in p.facts])
    if report.success or len(planned) == 1:
        return {p.partition: report for p in planned}
    half = len(planned) // 2
    return {**_check_together(topic, planned[:half]), **_check_together(topic, planned[half:])}


def _consumers_below(consumed: ConsumedPosition | None, log_start: int) -> dict[str, int]:
    """Groups whose committed offset is below the new log start: like Kafka consumers, they will
    get an out-of-range reset."""
    if consumed is None:
        return {}
    return {g: o for g, o in consumed.groups.items() if o is not None and o < log_start}


def retain_partition(
    lake: Lake,
    topic: Topic,
    partition: int,
    now_ms: int,
    consumed: ConsumedPosition | None,
    *,
    dry_run: bool = False,
) -> PartitionRetentionResult:
    """Plan, check and apply retention for one partition (one conditional commit, re-planned on a
    lost race)."""
    planned = _plan(lake, topic, partition, now_ms, consumed, dry_run=dry_run)
    if isinstance(planned, PartitionRetentionResult):
        return planned
    report = _check_together(topic.name, [planned])[partition]
    return _commit(lake, topic, planned, report, now_ms, consumed)


def _plan(
    lake: Lake, topic: Topic, partition: int, now_ms: int, consumed: ConsumedPosition | None, *, dry_run: bool
) -> _Planned | PartitionRetentionResult:
    """The partition's retention planned on its current manifest, with the facts its checks
    judge; or its result when there is nothing to commit (nothing due, or a dry run)."""
    log = topic.partition(partition)
    manifest, etag = log.load()
    plan = plan_retention(manifest, topic.config, consumed, now_ms)
    if not plan.deletions or dry_run:
        status = DRY_RUN if plan.deletions else NOTHING_TO_DO
        below = _consumers_below(consumed, plan.new_log_start_offset)
        return PartitionRetentionResult(topic.name, partition, status, plan, None, manifest.version, below)
    updated = apply_retention(manifest, plan, now_ms)
    facts = _retention_facts(lake, log.prefix, manifest, updated, plan, consumed)
    return _Planned(partition, (manifest, etag), plan, updated, facts)


def _commit(
    lake: Lake,
    topic: Topic,
    planned: _Planned,
    report: QualityReport,
    now_ms: int,
    consumed: ConsumedPosition | None,
) -> PartitionRetentionResult:
    """Commit a planned retention whose checks passed (`report`), in one conditional write on the
    manifest it was planned on. When another writer committed first, the retention is planned and
    checked again, on its own, on the manifest that writer left."""
    partition, log = planned.partition, topic.partition(planned.partition)
    if not report.success:
        error = RetentionQualityError(report, _unreadable(planned.facts))
        return PartitionRetentionResult(topic.name, partition, FAILED_QUALITY, planned.plan, report, error=str(error))
    seen: dict[str, Any] = {"plan": planned.plan, "quality": report}

    def change(manifest: Manifest) -> Manifest | None:
        if manifest is planned.known[0]:
            return planned.updated
        plan = plan_retention(manifest, topic.config, consumed, now_ms)
        seen.update(plan=plan, quality=None)
        if not plan.deletions:
            return None
        updated = apply_retention(manifest, plan, now_ms)
        try:
            seen["quality"] = check_retention(lake, log.prefix, manifest, updated, plan, consumed)
        except RetentionQualityError as exc:
            seen["quality"] = exc.report
            raise
        return updated

    try:
        committed = log.commit(change, known=planned.known)
    except RetentionQualityError as exc:
        return PartitionRetentionResult(topic.name, partition, FAILED_QUALITY, seen["plan"], exc.report, error=str(exc))
    plan: RetentionPlan = seen["plan"]
    status = COMMITTED if plan.deletions else NOTHING_TO_DO
    below = _consumers_below(consumed, plan.new_log_start_offset)
    return PartitionRetentionResult(topic.name, partition, status, plan, seen["quality"], committed.version, below)


def retain_topic(
    lake: Lake,
    topic_name: str,
    now_ms: int | None = None,
    *,
    partitions: Collection[int] | None = None,
    dry_run: bool = False,
    run_id: str | None = None,
) -> RetentionRunReport:
    """Retention for every (or the given) partition of a topic: every partition planned, over the
    bounded metadata pool; the results checked together (`_check_together`); each committed on its
    own, over the pool. A failing partition does not stop the others. The report is stored under
    _lakecleaner/runs/<topic>/<run id>/retention.json."""
    now = wall_clock_ms() if now_ms is None else now_ms
    topic = lake.topic(topic_name)
    chosen = sorted(partitions) if partitions is not None else list(range(topic.partitions))
    retries_before = lake.store.retries
    positions: dict[int, ConsumedPosition] = {}
    if topic.config.consumed_retention_enabled:
        positions = lake.offsets.consumed_positions(topic_name, chosen)
    concurrency = lake.config.storage.max_concurrency

    def plan(p: int) -> _Planned | PartitionRetentionResult:
        try:
            return _plan(lake, topic, p, now, positions.get(p), dry_run=dry_run)
        except LakeCleanerError as exc:
            return PartitionRetentionResult(topic_name, p, FAILED, None, error=str(exc))

    planned = map_ordered(plan, chosen, concurrency)
    reports = _check_together(topic_name, [p for p in planned if isinstance(p, _Planned)])
    crash_point("retention.after_validation")

    def commit(item: _Planned | PartitionRetentionResult) -> PartitionRetentionResult:
        if isinstance(item, PartitionRetentionResult):
            return item
        try:
            return _commit(lake, topic, item, reports[item.partition], now, positions.get(item.partition))
        except LakeCleanerError as exc:
            return PartitionRetentionResult(topic_name, item.partition, FAILED, None, error=str(exc))

    results = map_ordered(commit, planned, concurrency)
    run = run_id or new_run_id(now)
    retries = lake.store.retries - retries_before
    source = lake.offsets.source_of(topic_name) if topic.config.consumed_retention_enabled else None
    report = RetentionRunReport(topic_name, run, now, tuple(results), storage_retries=retries, offsets_source=source)
    if dry_run:
        return report
    return replace(report, location=store_report(lake.store, topic_name, run, "retention", report.to_dict()))


def trim_partition(lake: Lake, topic_name: str, partition: int, offset: int, now_ms: int | None = None) -> Manifest:
    """Kafka's DeleteRecords: move the log start offset to `offset` (an offset outside
    [log start, next offset] is an error, not clamped). Whole segments below it leave the log at
    the next retention run; reads below it fail with OffsetOutOfRange at once."""
    now = wall_clock_ms() if now_ms is None else now_ms
    log = lake.topic(topic_name).partition(partition)

    def change(manifest: Manifest) -> Manifest | None:
        updated = apply_trim(manifest, offset, now)
        return None if updated is manifest else updated

    return log.commit(change)
