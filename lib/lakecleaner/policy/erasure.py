"""When a stored copy of a record is physically gone: the deletion deadlines an erasure audit
promises (KIP-354, KIP-534), decided from the manifest, the config and the DAG's schedule.

A copy of a record is gone when the object holding it is deleted from the bucket. The stages, with
S the longest wait between two runs of the topic's DAG and D `file.delete.delay.ms`:

* A **superseded** record (a later record of its key is in the log) is removed by the first
  compaction whose dirty section holds the later record. KIP-354 bounds that: the segment holding
  the later record is cleaned at most `max.compaction.lag.ms` after its first batch's timestamp,
  at the first DAG run after that (the idle roll ★ seals an active segment in that same run). The
  old file then waits D in `pending_deletes`, and the first run after that deletes it:
  gone by first batch + `max.compaction.lag.ms` + S + D + S.
* A record **below the log start offset** (a trim) leaves with its segment: at the next run when
  the whole segment lies below the log start (retention's log-start rule), else with the cleaning
  that rewrites its group, bounded by the earliest dirty segment's KIP-354 deadline.
* A **tombstone** is itself removed by the first compaction after its delete horizon (KIP-534;
  the horizon-passed trigger ★ makes that partition due): a tombstone already stamped is gone by
  horizon + S + D + S; one not yet stamped is stamped by its first cleaning (bounded as above)
  with horizon = that time + `delete.retention.ms`. Kafka removes a tombstone only when some
  dirty record makes its partition due: it promises no such bound.
* A record a **deletion vector** removes (issue 79: logically deleted, physically present) is
  gone when a clean rewrites its file: on a topic with `max.compaction.lag.ms` the vector
  carries the deadline of the records it removes (`erase_by_ms`, the dirty section's KIP-354
  deadline when it was written), and the first run after it rewrites the file (the vector-erasure
  trigger ★): gone by erase_by + S + D + S.
* On a topic with `delete` in its policy, retention.ms removes whole segments: gone by the
  segment's largest timestamp + `retention.ms` + S + D + S, whichever comes first.
* A file that already left the log is gone by its `delete_after_ms` + S; a file no manifest
  references (a crashed run's output, a spill) by its age reaching max(D, 1 hour) + S (gc).

A copy is **overdue** when its time has passed, or when nothing will remove it: its partition is
marked uncleanable (a failed compaction), no deadline applies (no `max.compaction.lag.ms`, no
retention), the DAG has no schedule, or it has not run for more than two intervals (paused, or
failing before its report).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from croniter import croniter

from lakecleaner.config import DAY_MS, HOUR_MS, LONG_MAX, TopicConfig
from lakecleaner.log.manifest import Segment
from lakecleaner.policy.segment_times import largest_timestamp, rolling_timestamp
from lakecleaner.policy.text import format_timestamp_ms

#: gc deletes an unreferenced file only once it is older than this (retention.gc.ORPHAN_MIN_AGE_MS).
ORPHAN_MIN_AGE_MS = HOUR_MS

#: Airflow's presets, as the longest wait between two runs.
PRESET_INTERVALS_MS = {
    "@continuous": 0,
    "@hourly": HOUR_MS,
    "@daily": DAY_MS,
    "@midnight": DAY_MS,
    "@weekly": 7 * DAY_MS,
    "@monthly": 31 * DAY_MS,
    "@quarterly": 92 * DAY_MS,
    "@yearly": 366 * DAY_MS,
    "@annually": 366 * DAY_MS,
}

#: What a stored copy of a record is.
LIVE = "live"  # the key's current value: no deadline
TOMBSTONE = "tombstone"  # the key's current record is a tombstone: gone by its horizon
SUPERSEDED = "superseded"  # a later record of the key is in the log
BELOW_LOG_START = "below-log-start"  # below the log start offset (trim, DeleteRecords)
LEFT_THE_LOG = "left-the-log"  # in a file awaiting physical deletion (pending_deletes)
UNREFERENCED = "unreferenced"  # in a file no manifest references (a crashed run's output, a spill)
HIDDEN = (
    "hidden"  # logically deleted, physically present: a position-delete file (a table) or a deletion vector (the log)
)
UNFINISHED = "unfinished"  # maybe in a write its writer never finished (unreadable: S3 upload parts)


def schedule_interval_ms(schedule: str | None, now_ms: int) -> int | None:
    """The longest wait between two runs of a DAG with this schedule (a cron expression or one
    of Airflow's presets), over the next 60 runs from `now_ms`; None when the DAG never runs by
    itself (no schedule, `@once`)."""
    if schedule is None or schedule == "@once":
        return None
    if schedule in PRESET_INTERVALS_MS:
        return PRESET_INTERVALS_MS[schedule]
    runs = croniter(schedule, now_ms / 1000)
    times = [runs.get_next(float) for _ in range(61)]
    return int(max(b - a for a, b in itertools.pairwise(times)) * 1000)


@dataclass(frozen=True)
class Deadline:
    """When a copy is gone (`gone_by_ms`, None when nothing bounds it), and `overdue`: why it is
    late or unbounded, None while it is on time."""

    gone_by_ms: int | None
    overdue: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "gone_by_ms": self.gone_by_ms,
            "gone_by": None if self.gone_by_ms is None else format_timestamp_ms(self.gone_by_ms),
            "overdue": self.overdue,
        }


@dataclass(frozen=True)
class ErasureContext:
    """What the deadlines of one partition depend on."""

    config: TopicConfig
    schedule_ms: int | None
    now_ms: int
    #: Why the partition is not compacted (its uncleanable mark), None when it is.
    uncleanable: str | None = None
    #: Why the topic's DAG seems not to run (`dag_stalled`), None while it runs.
    stalled: str | None = None


def dag_stalled(last_dag_run_ms: int | None, created_ms: int, schedule_ms: int | None, now_ms: int) -> str | None:
    """Why the topic's DAG seems not to run — paused, or failing before its report — or None: no
    run has reached its report for more than two schedule intervals and an hour, counted from the
    latest run's "now" or, before any, from the topic's creation."""
    if schedule_ms is None:
        return None
    since = max(last_dag_run_ms or 0, created_ms)
    if now_ms - since <= 2 * schedule_ms + HOUR_MS:
        return None
    last = "has never run" if last_dag_run_ms is None else f"last ran at {format_timestamp_ms(last_dag_run_ms)}"
    return f"the topic's DAG {last}, more than two schedule intervals ago (paused or failing): nothing removes it"


def _physical(left_log_ms: int, ctx: ErasureContext) -> int:
    """A file that leaves the log (in a run) at `left_log_ms` is gone by then + D + S: it waits D in
    `pending_deletes`, and the first run after that deletes it."""
    return left_log_ms + ctx.config.file_delete_delay_ms + (ctx.schedule_ms or 0)


def _judged(gone_by: int | None, ctx: ErasureContext) -> Deadline:
    if ctx.schedule_ms is None:
        return Deadline(None, "the topic's DAG has no schedule: nothing removes it unless a run is triggered")
    if gone_by is None:
        if ctx.uncleanable is not None:
            return Deadline(None, f"the partition is not compacted: {ctx.uncleanable}")
        return Deadline(None, "no deadline applies: max.compaction.lag.ms is not set and retention does not remove it")
    if gone_by < ctx.now_ms:
        return Deadline(gone_by, f"deadline passed at {format_timestamp_ms(gone_by)}")
    return Deadline(gone_by, ctx.stalled)


def compaction_deadline_ms(superseder: Segment, ctx: ErasureContext) -> int | None:
    """The run by which a cleaning has held the records of `superseder` at the latest (KIP-354):
    its first batch + max.compaction.lag.ms + S; None without the lag, compaction or a schedule,
    or when the partition is marked uncleanable."""
    lag = ctx.config.max_compaction_lag_ms
    if not ctx.config.compact or lag == LONG_MAX or ctx.schedule_ms is None or ctx.uncleanable is not None:
        return None
    return max(rolling_timestamp(superseder), 0) + lag + ctx.schedule_ms


def retention_deadline_ms(segment: Segment, ctx: ErasureContext) -> int | None:
    """The run by which retention.ms has removed the segment from the log at the latest."""
    if not ctx.config.delete or ctx.config.retention_ms < 0 or ctx.schedule_ms is None:
        return None
    return largest_timestamp(segment) + ctx.config.retention_ms + ctx.schedule_ms


def _earliest(*times: int | None) -> int | None:
    return min((t for t in times if t is not None), default=None)


def superseded_deadline(holding: Segment, superseder: Segment, ctx: ErasureContext) -> Deadline:
    """A record in `holding` superseded by a later record of its key in `superseder`."""
    left = _earliest(compaction_deadline_ms(superseder, ctx), retention_deadline_ms(holding, ctx))
    return _judged(None if left is None else _physical(left, ctx), ctx)


def vectored_deadline(holding: Segment, erase_by_ms: int, ctx: ErasureContext) -> Deadline:
    """A record in `holding` that a deletion vector removes (issue 79), due to be physically gone
    by `erase_by_ms`: the first run after that rewrites its file (the planner's vector-erasure
    trigger ★), then the old file waits D: erase_by + S + D + S, or retention first."""
    rewritten = None
    if ctx.config.compact and ctx.uncleanable is None and ctx.schedule_ms is not None:
        rewritten = erase_by_ms + ctx.schedule_ms
    left = _earliest(rewritten, retention_deadline_ms(holding, ctx))
    return _judged(None if left is None else _physical(left, ctx), ctx)


def tombstone_deadline(holding: Segment, horizon_ms: int | None, ctx: ErasureContext) -> Deadline:
    """The key's latest record, a tombstone in `holding`, stamped with `horizon_ms` (None: not yet
    cleaned): the first run after its horizon removes it (KIP-534, the horizon trigger ★); an
    unstamped one gets horizon = its first cleaning + delete.retention.ms."""
    if horizon_ms is None:
        cleaned = compaction_deadline_ms(holding, ctx)
        horizon_ms = None if cleaned is None else cleaned + ctx.config.delete_retention_ms
    removed = None
    if horizon_ms is not None and ctx.config.compact and ctx.uncleanable is None and ctx.schedule_ms is not None:
        removed = horizon_ms + ctx.schedule_ms
    left = _earliest(removed, retention_deadline_ms(holding, ctx))
    return _judged(None if left is None else _physical(left, ctx), ctx)


def released_deadline(ctx: ErasureContext) -> Deadline:
    """A segment wholly below the log start offset (a trim): retention's log-start rule removes it
    from the log at the next run, then it is deleted like any file: now + S + D + S."""
    return _judged(None if ctx.schedule_ms is None else _physical(ctx.now_ms + ctx.schedule_ms, ctx), ctx)


def left_the_log_deadline(delete_after_ms: int, ctx: ErasureContext, released_ms: int | None = None) -> Deadline:
    """A file in `pending_deletes`: the first run after `delete_after_ms` deletes it, and not before
    the readers of the topic's Iceberg log table are done with it: `released_ms` (when the last
    snapshot that references it stopped being current, None when none does) + file.delete.delay.ms
    (`iceberg.expiry`). Runs at past times (a backfill, the demo) set `delete_after_ms` by their
    own clock, the tables' snapshots by the wall clock."""
    due = (
        delete_after_ms if released_ms is None else max(delete_after_ms, released_ms + ctx.config.file_delete_delay_ms)
    )
    return _judged(None if ctx.schedule_ms is None else due + ctx.schedule_ms, ctx)


def held_by_current_snapshot() -> Deadline:
    """A file that left the log which the Iceberg log table's current snapshot still references
    (the table has not followed the log's last commit): it goes file.delete.delay.ms after the
    sync that stops referencing it."""
    return Deadline(None, "the Iceberg log table's current snapshot references it: it goes after the table's next sync")


def hidden_deadline(hidden_ms: int, ctx: ErasureContext) -> Deadline:
    """A row of the latest-values table that a position-delete file written at `hidden_ms` hides
    (its key was superseded or deleted; issue 80): table maintenance rewrites the data file at the
    first run after hidden + max.compaction.lag.ms (KIP-354's bound, as for the log's superseded
    records), and the old file goes file.delete.delay.ms after: hidden + lag + S + D + S. Without
    max.compaction.lag.ms no deadline applies (maintenance's thresholds of delete files and dead
    rows rewrite it in time, but promise no time)."""
    lag = ctx.config.max_compaction_lag_ms
    if lag == LONG_MAX or ctx.schedule_ms is None:
        return _judged(None, ctx)
    return _judged(_physical(hidden_ms + lag + ctx.schedule_ms, ctx), ctx)


def unreferenced_deadline(modified_ms: int, ctx: ErasureContext) -> Deadline:
    """A file no manifest references: gc deletes it once older than max(D, 1 hour)."""
    age = max(ctx.config.file_delete_delay_ms, ORPHAN_MIN_AGE_MS)
    return _judged(None if ctx.schedule_ms is None else modified_ms + age + ctx.schedule_ms, ctx)
