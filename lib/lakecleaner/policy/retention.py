"""Retention: which segments leave the log (Kafka's `UnifiedLog.deleteOldSegments`, plus ★ KIP-68).

The rules, in Kafka's order (DESIGN section 4, kafka-cleaner-semantics.md section 1.12):

1. `log_start_breach`: the next segment's base ≤ log_start_offset (every topic, compact-only too,
   KAFKA-7400); the last segment is never deleted by this rule;

and only for topics whose cleanup.policy includes delete:

2. `retention.bytes` (≥ 0): delete while (log bytes − retention.bytes) − segment bytes ≥ 0;
3. `retention.ms` (≥ 0): delete while now − the segment's largest timestamp > retention.ms (strict);
4. `consumed` (retention.commitoffset.ms ≥ 0): delete while now − largest timestamp >
   retention.commitoffset.ms AND the segment's next_offset ≤ the minimum committed offset of
   every subscribed group; skipped when that offset is unknown. A mirrored topic that follows a
   later Kafka history keeps the earlier history's segments from this rule (`since_offset`: its
   groups' offsets say nothing of them, DESIGN section 9); time, size and trim still remove them.

Each rule is a prefix scan from the oldest segment that continues where the previous one stopped.
Rules 1 and 2 are monotone (once they stop holding, they never hold again further on), but
rule 4 may pass a segment at which rule 3 stopped, and rule 3 may hold again behind it. So the
scan here asks, at each segment, the rules in order and deletes the segment with the first that
holds, stopping only where none holds: the same result as running the rules one after another
until none deletes anything, which is what successive Kafka retention runs at the same time would
do. It keeps retention idempotent (Kafka's `testRetentionIdempotency`): applying a plan and
planning again at the same time deletes nothing more.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from lakecleaner.config import TopicConfig
from lakecleaner.errors import ConcurrentModification
from lakecleaner.log.manifest import Manifest, Segment
from lakecleaner.offsets import ConsumedPosition
from lakecleaner.policy.segment_times import largest_timestamp

LOG_START_BREACH = "log_start_breach"
RETENTION_BYTES = "retention.bytes"
RETENTION_MS = "retention.ms"
CONSUMED = "consumed"


@dataclass(frozen=True)
class SegmentDeletion:
    """One segment a retention plan deletes, the rule that deletes it (code and words)."""

    segment_id: str
    base_offset: int
    next_offset: int
    size_bytes: int
    record_count: int
    rule: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "segment_id": self.segment_id,
            "base_offset": self.base_offset,
            "next_offset": self.next_offset,
            "size_bytes": self.size_bytes,
            "record_count": self.record_count,
            "rule": self.rule,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class RetentionPlan:
    """The segments retention deletes (always a prefix of the log) and what follows from it.

    `roll_first` is True when the active segment is deleted: it must be rolled first (Kafka rolls
    a new empty active segment; here sealing it is enough, as appends open a new one).
    `kept_because` says why the scan stopped at the first kept segment (None when nothing is
    kept); `consumed_skipped` says why consumed retention was skipped; `held_back_by` names the
    consumer groups whose committed offset kept consumed retention from deleting more.
    """

    deletions: tuple[SegmentDeletion, ...]
    log_start_offset: int
    new_log_start_offset: int
    roll_first: bool
    kept_because: str | None
    consumed_skipped: str | None
    held_back_by: tuple[str, ...]
    file_delete_delay_ms: int

    @property
    def deleted_bytes(self) -> int:
        return sum(d.size_bytes for d in self.deletions)

    @property
    def reason(self) -> str:
        """The plan in one line: what it deletes by which rule, or why it deletes nothing."""
        if not self.deletions:
            return f"nothing to delete: {self.kept_because or 'the log is empty'}"
        counts: dict[str, int] = {}
        for deletion in self.deletions:
            counts[deletion.rule] = counts.get(deletion.rule, 0) + 1
        rules = ", ".join(f"{n} by {rule}" for rule, n in counts.items())
        return f"deletes {len(self.deletions)} segment(s), {self.deleted_bytes} bytes ({rules})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "deletions": [d.to_dict() for d in self.deletions],
            "deleted_bytes": self.deleted_bytes,
            "log_start_offset": self.log_start_offset,
            "new_log_start_offset": self.new_log_start_offset,
            "roll_first": self.roll_first,
            "kept_because": self.kept_because,
            "consumed_skipped": self.consumed_skipped,
            "held_back_by": list(self.held_back_by),
            "file_delete_delay_ms": self.file_delete_delay_ms,
            "reason": self.reason,
        }


class _Verdict(NamedTuple):
    """A rule's answer for one segment: whether it deletes it, in words either way."""

    deletes: bool
    words: str
    held_back_by: tuple[str, ...] = ()


#: A rule: (segment index, bytes of that segment and every later one) → verdict.
_Rule = Callable[[int, int], _Verdict]


def breaches_log_start(segments: Sequence[Segment], index: int, log_start_offset: int) -> bool:
    """Kafka's start-offset breach: a segment goes when the NEXT one starts at or below the log start
    offset, so the segment holding the log start offset stays, and the last segment always does.

    The log start is taken as at least the segment's own base, as it is once the segments before it
    are gone: a segment spanning no offsets ([b, b), a sealed empty segment) followed by one at b
    then goes too. Kafka's segments never share a base offset, so this changes nothing there, and
    it keeps retention idempotent where the deletion of the segments before such a segment moves
    the log start offset up to b.
    """
    if index + 1 >= len(segments):
        return False
    return segments[index + 1].base_offset <= max(log_start_offset, segments[index].base_offset)


def new_log_start_offset(manifest: Manifest, deleted: int) -> int:
    """The log start offset once the first `deleted` segments are gone: the base of the first
    remaining segment (next_offset when none remains), never below the current one."""
    remaining = manifest.segments[deleted:]
    return max(manifest.log_start_offset, remaining[0].base_offset if remaining else manifest.next_offset)


def plan_retention(
    manifest: Manifest, config: TopicConfig, consumed: ConsumedPosition | None, now_ms: int
) -> RetentionPlan:
    """The segments retention deletes now, each with its rule (see the module docstring).

    The active segment is deleted only if it is non-empty, by rules 2-4, and the plan then says it
    must be rolled first; an empty active segment is never deleted. Sealed segments with no records
    (left by compaction) are deleted like any other when a rule holds for them.
    """
    rules, consumed_skipped = _rules(manifest, config, consumed, now_ms)
    deletions: list[SegmentDeletion] = []
    kept_because: str | None = None
    held_back_by: tuple[str, ...] = () if consumed_skipped is None or consumed is None else consumed.holding_groups
    remaining_bytes = manifest.size_bytes
    for index, segment in enumerate(manifest.segments):
        if not segment.sealed and segment.is_empty:
            kept_because = f"segment {segment.id} is kept: the active segment is empty"
            break
        verdicts = [(code, rule(index, remaining_bytes)) for code, rule in rules]
        deleting = next(((code, verdict) for code, verdict in verdicts if verdict.deletes), None)
        if deleting is None:
            kept_because = f"segment {segment.id} is kept: " + "; ".join(verdict.words for _, verdict in verdicts)
            held_back_by += tuple(group for _, verdict in verdicts for group in verdict.held_back_by)
            break
        code, verdict = deleting
        deletions.append(
            SegmentDeletion(
                segment_id=segment.id,
                base_offset=segment.base_offset,
                next_offset=segment.next_offset,
                size_bytes=segment.size_bytes,
                record_count=segment.record_count,
                rule=code,
                reason=verdict.words,
            )
        )
        remaining_bytes -= segment.size_bytes
    return RetentionPlan(
        deletions=tuple(deletions),
        log_start_offset=manifest.log_start_offset,
        new_log_start_offset=new_log_start_offset(manifest, len(deletions)),
        roll_first=manifest.active_segment is not None and len(deletions) == len(manifest.segments),
        kept_because=kept_because,
        consumed_skipped=consumed_skipped,
        held_back_by=held_back_by,
        file_delete_delay_ms=config.file_delete_delay_ms,
    )


def apply_retention(manifest: Manifest, plan: RetentionPlan, now_ms: int) -> Manifest:
    """The manifest after `plan`: its segments leave the log (the active one, if deleted, is rolled
    first, which here only means it leaves sealed and `now_ms` becomes the next segment's creation
    time, as in `Manifest.rolled`), the log start offset moves to the first
    remaining segment, their files go to pending_deletes until now + file.delete.delay.ms, and the
    version goes up by one. The cleaner checkpoint is kept (planning resets it when it falls below
    the log start). A plan that deletes nothing returns `manifest` itself: there is nothing to commit.

    Raises ConcurrentModification when the segments the plan deletes no longer start the log.
    """
    count = len(plan.deletions)
    if count == 0:
        return manifest
    planned = tuple(d.segment_id for d in plan.deletions)
    present = tuple(s.id for s in manifest.segments[:count])
    if planned != present:
        raise ConcurrentModification(
            f"{manifest.topic}-{manifest.partition}: the retention plan deletes segments {', '.join(planned)} "
            f"but the log now starts with {', '.join(present) or 'nothing'}; plan again on the current manifest"
        )
    delete_after_ms = now_ms + plan.file_delete_delay_ms
    pending = manifest
    for deletion, segment in zip(plan.deletions, manifest.segments, strict=False):
        paths = (path for f in segment.files for path in f.paths())
        pending = replace(
            pending, pending_deletes=pending.with_pending_deletes(paths, delete_after_ms, f"retention: {deletion.rule}")
        )
    return manifest.next_version(
        now_ms,
        segments=manifest.segments[count:],
        log_start_offset=new_log_start_offset(manifest, count),
        pending_deletes=pending.pending_deletes,
        next_segment_created_ms=now_ms if plan.roll_first else manifest.next_segment_created_ms,
    )


def _rules(
    manifest: Manifest, config: TopicConfig, consumed: ConsumedPosition | None, now_ms: int
) -> tuple[list[tuple[str, _Rule]], str | None]:
    """The rules that apply to this partition, in order, and why consumed retention is skipped."""
    segments = manifest.segments
    start = manifest.log_start_offset

    def log_start_breach(index: int, _: int) -> _Verdict:
        if breaches_log_start(segments, index, start):
            return _Verdict(True, f"it lies wholly below the log start offset {new_log_start_offset(manifest, index)}")
        if index + 1 == len(segments):
            return _Verdict(False, "the log start rule never deletes the last segment")
        return _Verdict(False, f"it is not wholly below the log start offset {start}")

    def retention_bytes(index: int, remaining_bytes: int) -> _Verdict:
        limit, size = config.retention_bytes, segments[index].size_bytes
        held = f"the log holds {remaining_bytes} bytes"
        if remaining_bytes - limit - size >= 0:
            return _Verdict(True, f"{held}, still ≥ retention.bytes {limit} without its {size}")
        return _Verdict(False, f"{held}, < retention.bytes {limit} without its {size}")

    def retention_ms(index: int, _: int) -> _Verdict:
        return _older_than(segments[index], "retention.ms", config.retention_ms, now_ms)

    rules: list[tuple[str, _Rule]] = [(LOG_START_BREACH, log_start_breach)]
    if not config.delete:
        return rules, None
    if config.retention_bytes >= 0:
        rules.append((RETENTION_BYTES, retention_bytes))
    if config.retention_ms >= 0:
        rules.append((RETENTION_MS, retention_ms))
    if not config.consumed_retention_enabled:
        return rules, None
    if consumed is None or consumed.offset is None:
        why = consumed.reason if consumed is not None and consumed.reason else "no committed offset is known"
        return rules, f"consumed retention skipped: {why}"
    committed, groups, since = consumed.offset, consumed.holding_groups, consumed.since_offset

    def consumed_retention(index: int, _: int) -> _Verdict:
        segment = segments[index]
        old_enough = _older_than(segment, "retention.commitoffset.ms", config.retention_commitoffset_ms, now_ms)
        if not old_enough.deletes:
            return old_enough
        if since is not None and segment.base_offset < since:
            return _Verdict(
                False,
                f"it holds records of an earlier Kafka history (below offset {since}, before `mirror "
                "--restart-from-kafka`), of which the groups' offsets of the topic followed now say nothing",
            )
        if segment.next_offset > committed:
            return _Verdict(
                False,
                f"it is not consumed: its next offset {segment.next_offset} is above the committed offset "
                f"{committed} of {', '.join(groups)}",
                groups,
            )
        return _Verdict(
            True,
            f"every subscribed group committed past it (offset {committed} ≥ {segment.next_offset}) "
            f"and {old_enough.words}",
        )

    rules.append((CONSUMED, consumed_retention))
    return rules, None


def _older_than(segment: Segment, name: str, limit_ms: int, now_ms: int) -> _Verdict:
    """Whether now − the segment's largest timestamp > `limit_ms` (strict: an age equal to the limit
    is kept), with the age and the limit in words."""
    age = now_ms - largest_timestamp(segment)
    if age > limit_ms:
        return _Verdict(True, f"its newest record is {age} ms old > {name} {limit_ms}")
    return _Verdict(False, f"its newest record is {age} ms old, not older than {name} {limit_ms}")
