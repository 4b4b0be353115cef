"""The figures the dashboard shows, computed by the planning code at the request's "now".

Each topic is planned exactly as the DAG's `assess` task plans it (`plan_topic` on the current
manifests and the consumer groups' minimum committed offsets), so the dashboard, the DAG and
`lakecleaner plan` agree. Every view is a frozen value with a JSON-serialisable `to_dict()`: the
JSON API returns it, and the HTML pages render the same values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from lakecleaner.cleaner_state import CleanerState
from lakecleaner.errors import LakeCleanerError
from lakecleaner.lake import Lake, Topic, TopicMetadata, failure_runs, partitions_label
from lakecleaner.log.manifest import Manifest, Segment
from lakecleaner.offsets import ConsumedPosition
from lakecleaner.policy import PartitionPlan, TopicPlan, plan_topic
from lakecleaner.policy.cleanable import CleanableRange, holds_dirty_records
from lakecleaner.policy.metrics import topic_metrics
from lakecleaner.policy.retention import CONSUMED
from lakecleaner.policy.roll import apply_roll
from lakecleaner.policy.selection import select_partitions
from lakecleaner.policy.text import format_timestamp_ms
from lakecleaner.runs.digests import RECENT_RUNS, RunDigest
from lakecleaner.runs.naming import dag_id_of
from lakecleaner.summaries.layout import Pending
from lakecleaner.summaries.model import TopicSummary
from lakecleaner.summaries.read import TopicFacts, facts_of_plan, facts_of_summary, stale_partitions, unusable
from lakecleaner.summaries.refresh import summary_store

#: Kinds of the offset ranges a partition's bar is made of.
CLEAN, DIRTY, UNCLEANABLE, ACTIVE, LOG = "clean", "dirty", "uncleanable", "active", "log"


@dataclass(frozen=True)
class TopicState:
    """A topic as the planning code sees it at `now_ms`."""

    manifests: dict[int, Manifest]
    consumed: dict[int, ConsumedPosition]
    plan: TopicPlan
    # Partitions whose manifest could not be read, and why (the plan covers the others).
    unreadable: dict[int, str]
    cleaner: CleanerState
    #: Where the consumer groups' committed offsets were read (`OffsetStore.source_of`).
    offsets_source: str


def load_topic(lake: Lake, name: str, now_ms: int) -> TopicState:
    """Read the topic's manifests and consumer positions and plan it (raises TopicNotFound). A
    partition whose manifest cannot be read is listed in `unreadable`; the others are planned."""
    topic = lake.topic(name)
    read = topic.read_manifests()
    consumed = lake.offsets.consumed_positions(name, sorted(read.manifests))
    cleaner = lake.cleaner_state.read(name)
    plan = plan_topic(name, read.manifests, topic.config, consumed, now_ms, cleaner=cleaner)
    return TopicState(read.manifests, consumed, plan, read.failures, cleaner, lake.offsets.source_of(name))


def load_topics(lake: Lake, names: Sequence[str], now_ms: int) -> dict[str, TopicState | str]:
    """`load_topic` for many topics in a few rounds of concurrent requests, not one round per
    topic: every topic.json at once, then every partition's manifest at once, the consumer
    groups' offsets once for all, and every topic's cleaner state at once. A topic that cannot
    be opened maps to the reason."""
    if not names:
        return {}
    topics, unopened = lake.read_topics(names)
    reads = lake.read_manifests_of(dict.fromkeys(topics.values()))
    groups = lake.offsets.read_all_groups()
    cleaners = lake.cleaner_state.read_many(list(topics), lake.config.storage.max_concurrency)
    out: dict[str, TopicState | str] = dict(unopened)
    for name, topic in topics.items():
        read = reads[name]
        consumed = lake.offsets.consumed_positions(name, sorted(read.manifests), groups)
        plan = plan_topic(name, read.manifests, topic.config, consumed, now_ms, cleaner=cleaners[name])
        source = lake.offsets.source_of(name)
        out[name] = TopicState(read.manifests, consumed, plan, read.failures, cleaners[name], source)
    return out


def facts_of_state(state: TopicState) -> TopicFacts:
    """A topic's facts from its plan at the view's "now"."""
    return facts_of_plan(state.plan, state.manifests, state.unreadable, state.cleaner.last_run)


def load_facts(lake: Lake, names: Sequence[str], now_ms: int) -> dict[str, TopicFacts | str]:
    """The facts of many topics for the overview (issue 50): each topic's summary where it is
    current (`summaries.read`), planned again from the manifests only for the partitions it cannot
    answer for, and the whole topic from its manifests where it has no usable summary. One listing
    of the lake's pending markers, a summary per topic, then the manifests needed, in a few
    concurrent rounds (`load_topics`; a partly stale topic's config and uncleanable marks come from
    its summary, which no config marker contradicts). A topic that cannot be read maps to the reason."""
    summaries = summary_store(lake)
    pending = summaries.pending()
    stored = summaries.read_many(list(names))
    whole: dict[str, str] = {}
    partly: dict[str, tuple[TopicSummary, list[int]]] = {}
    out: dict[str, TopicFacts | str] = {}
    for name in names:
        summary, markers = stored[name], pending.get(name, Pending())
        why = unusable(summary, markers, now_ms)
        if why is not None or not isinstance(summary, TopicSummary):
            whole[name] = why or "no summary"
        elif stale := stale_partitions(summary, markers):
            partly[name] = (summary, stale)
        else:
            out[name] = facts_of_summary(summary)
    for name, state in load_topics(lake, list(whole), now_ms).items():
        out[name] = state if isinstance(state, str) else replace(facts_of_state(state), why=whole[name])
    out |= _replanned(lake, partly, now_ms)
    return out


def _replanned(
    lake: Lake, partly: Mapping[str, tuple[TopicSummary, list[int]]], now_ms: int
) -> dict[str, TopicFacts | str]:
    """The facts of topics whose summaries cannot answer for some partitions: those planned at
    `now_ms` from their manifests, with the topic.json and cleaner state the summary holds."""
    if not partly:
        return {}
    out: dict[str, TopicFacts | str] = {}
    topics: dict[str, tuple[Topic, TopicSummary, list[int]]] = {}
    for name, (summary, stale) in partly.items():
        try:
            metadata = TopicMetadata.from_json(
                summary.metadata.encode(), f"the summary of {name}", name, lake.config.max_partitions_per_topic
            )
            topics[name] = (Topic(lake, metadata), summary, stale)
        except LakeCleanerError as exc:
            out[name] = str(exc)
    reads = lake.read_manifests_of({topic: stale for topic, _, stale in topics.values()})
    groups = lake.offsets.read_all_groups()
    for name, (topic, summary, _) in topics.items():
        read = reads[name]
        consumed = lake.offsets.consumed_positions(name, sorted(read.manifests), groups)
        cleaner = summary.cleaner
        plan = plan_topic(name, read.manifests, topic.config, consumed, now_ms, cleaner=cleaner)
        out[name] = facts_of_summary(summary, plan, read.manifests, read.failures, cleaner.last_run)
    return out


# ----------------------------------------------------------------------------------------------
# The topics overview


@dataclass(frozen=True)
class Due:
    """A partition with work due, and why (compaction reason, retention reason)."""

    partition: int
    compaction: str | None
    retention: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"partition": self.partition, "compaction": self.compaction, "retention": self.retention}


def partitions_due(facts: TopicFacts) -> list[Due]:
    """The partitions due for compaction or with segments retention deletes, each with the reasons."""
    due = []
    for partition, entry in sorted(facts.partitions.items()):
        compaction = entry.compaction_reason if entry.gauges.due else None
        if compaction or entry.retention_reason:
            due.append(Due(partition, compaction, entry.retention_reason))
    return due


def nearest_deadline(facts: TopicFacts, now_ms: int) -> dict[str, Any] | None:
    """The partition whose deletion deadline (KIP-354 / tombstone horizon) comes first."""
    deadlines = [(ms, p) for p, e in facts.partitions.items() if (ms := e.figures.nearest_deadline_ms) is not None]
    if not deadlines:
        return None
    _, partition = min(deadlines)
    deadline = facts.partitions[partition].deadline(now_ms)
    assert deadline is not None
    return {"partition": partition, "at": format_timestamp_ms(deadline.deadline_ms), **deadline.to_dict()}


def topic_overview(facts: TopicFacts, runs: Sequence[RunDigest], now_ms: int) -> dict[str, Any]:
    """One topic's row of the overview: policy, size, what is due and why, the cleaner gauges,
    the nearest deletion deadline, the last run and the bytes reclaimed by the recent runs, and
    where the figures come from (`source`: the summary as of when, and how many partitions were
    planned from their manifests)."""
    entries = facts.partitions
    gauges = {p: e.gauges for p, e in entries.items()}
    metrics = topic_metrics(list(gauges.values()), facts.last_run, now_ms)
    recent = [r.reclaimed for r in runs[:RECENT_RUNS]]
    return {
        "topic": facts.topic,
        "dag_id": dag_id_of(facts.topic),
        "policy": ",".join(facts.cleanup_policy),
        "partitions": len(entries) + len(facts.unreadable),
        "unreadable_partitions": {
            partitions_label(first, last): reason for first, last, reason in failure_runs(facts.unreadable)
        },
        "uncleanable_partitions": {
            str(p): e.compaction_reason for p, e in sorted(entries.items()) if e.gauges.uncleanable
        },
        "records": sum(e.figures.records for e in entries.values()),
        "bytes": sum(e.figures.size_bytes for e in entries.values()),
        "metrics": metrics.to_dict(),
        "max_compaction_delay_secs": metrics.max_compaction_delay_secs,
        "partitions_due": [d.to_dict() for d in partitions_due(facts)],
        "compaction_order": list(select_partitions(gauges).selected),
        "nearest_deadline": nearest_deadline(facts, now_ms),
        "last_run": runs[0].to_dict() if runs else None,
        "mirror_lag": next((r.mirror_lag for r in runs if r.mirror_lag is not None), None),
        "mirror_gaps": [f"{gap} (run {r.run_id})" for r in runs[:RECENT_RUNS] for gap in r.mirror_gaps],
        "reclaimed_recent": {
            "runs": len(recent),
            "bytes": sum(r.bytes for r in recent),
            "records": sum(r.records for r in recent),
        },
        "trend": trend(runs, facts.compacted),
        "source": facts.source(),
    }


def trend(runs: Sequence[RunDigest], compacted: bool) -> dict[str, Any]:
    """The overview's sparkline: the topic's dirty ratio (compacted) or log size at each of the runs
    already read for the row (no further reads), oldest first."""
    metric = "dirty_ratio" if compacted else "size_bytes"
    values = [v for r in reversed(runs) if (v := getattr(r, metric)) is not None]
    return {"metric": metric, "values": values}


# ----------------------------------------------------------------------------------------------
# A partition's log


@dataclass(frozen=True)
class Region:
    """A range [start, end) of the log's offsets of one kind, with the bytes of its segments."""

    kind: str
    start: int
    end: int
    bytes: int

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "start": self.start, "end": self.end, "bytes": self.bytes}


@dataclass(frozen=True)
class SegmentView:
    """A segment on the bar; `retention_rule` is the rule that deletes it at the next run (or None)."""

    id: str
    base_offset: int
    next_offset: int
    records: int
    bytes: int
    sealed: bool
    max_timestamp: int
    retention_rule: str | None
    retention_reason: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "base_offset": self.base_offset,
            "next_offset": self.next_offset,
            "records": self.records,
            "bytes": self.bytes,
            "sealed": self.sealed,
            "max_timestamp": self.max_timestamp,
            "retention_rule": self.retention_rule,
            "retention_reason": self.retention_reason,
        }


@dataclass(frozen=True)
class PartitionView:
    """A partition's log along the offset axis, with the offsets that matter to its cleaning.

    The log is drawn as the plan sees it: an active segment due for its idle roll is drawn sealed
    (`rolls` says so). `consumed_offset` is the minimum committed offset over the subscribed groups
    (None when unknown, with `consumed_reason`).
    """

    plan: PartitionPlan
    manifest: Manifest
    regions: tuple[Region, ...]
    segments: tuple[SegmentView, ...]
    groups: dict[str, int | None]
    consumed_offset: int | None
    consumed_reason: str | None
    offsets_source: str

    @property
    def axis_start(self) -> int:
        return self.segments[0].base_offset if self.segments else self.manifest.log_start_offset

    @property
    def axis_end(self) -> int:
        return self.manifest.next_offset

    @property
    def consumed_deletions(self) -> list[SegmentView]:
        """The segments consumed retention (KIP-68) deletes at the next run."""
        return [s for s in self.segments if s.retention_rule == CONSUMED]

    def to_dict(self) -> dict[str, Any]:
        m, plan = self.manifest, self.plan
        cleanable = plan.compaction.range
        return {
            "topic": plan.topic,
            "partition": plan.partition,
            "now_ms": plan.now_ms,
            "manifest_version": plan.manifest_version,
            "log_start_offset": m.log_start_offset,
            "next_offset": m.next_offset,
            "cleaner_checkpoint": m.cleaner_checkpoint,
            "first_dirty_offset": None if cleanable is None else cleanable.first_dirty_offset,
            "first_uncleanable_offset": None if cleanable is None else cleanable.first_uncleanable_offset,
            "records": m.record_count,
            "bytes": m.size_bytes,
            "rolls": plan.roll.roll,
            "regions": [r.to_dict() for r in self.regions],
            "segments": [s.to_dict() for s in self.segments],
            "consumer_groups": dict(self.groups),
            "offsets_source": self.offsets_source,
            "min_committed_offset": self.consumed_offset,
            "consumed_reason": self.consumed_reason,
            "consumed_deletions": [s.id for s in self.consumed_deletions],
            "plan": plan.to_dict(),
        }


def _regions(manifest: Manifest, cleanable: CleanableRange | None) -> tuple[Region, ...]:
    """Clean [first base, F), dirty [F, U), uncleanable [U, active base), active [active base, end);
    a topic that is not compacted has one `log` range before the active segment. Empty ranges are
    left out. Each segment's bytes count in one region: a segment holding F is dirty, as in
    `cleanable_range`."""
    active = manifest.active_segment
    sealed_end = manifest.next_offset if active is None else active.base_offset
    start = manifest.segments[0].base_offset if manifest.segments else manifest.log_start_offset
    if cleanable is None:
        bounds = [(LOG, start, sealed_end)]
    else:
        dirty, uncleanable = cleanable.first_dirty_offset, cleanable.first_uncleanable_offset
        bounds = [
            (CLEAN, start, min(dirty, sealed_end)),
            (DIRTY, dirty, uncleanable),
            (UNCLEANABLE, uncleanable, sealed_end),
        ]
    bounds.append((ACTIVE, sealed_end, manifest.next_offset))
    sizes: dict[str, int] = {}
    for segment in manifest.segments:
        kind = _region_of(segment, cleanable)
        sizes[kind] = sizes.get(kind, 0) + segment.size_bytes
    return tuple(
        Region(kind, low, high, sizes.get(kind, 0))
        for kind, low, high in bounds
        if high > low or (kind == ACTIVE and active is not None)
    )


def _region_of(segment: Segment, cleanable: CleanableRange | None) -> str:
    """The region whose bytes a segment counts in (see `_regions`)."""
    if not segment.sealed:
        return ACTIVE
    if cleanable is None:
        return LOG
    if not holds_dirty_records(segment, cleanable.first_dirty_offset):
        return CLEAN
    return DIRTY if segment.base_offset < cleanable.first_uncleanable_offset else UNCLEANABLE


def partition_view(state: TopicState, partition: int) -> PartitionView:
    """The partition's bar: regions, segments with the retention rule deleting them, and the
    committed offsets of every subscribed consumer group (raises KeyError for an unknown partition)."""
    plan = next(p for p in state.plan.partitions if p.partition == partition)
    stored = state.manifests[partition]
    manifest = apply_roll(stored, plan.now_ms) if plan.roll.roll else stored
    deleting = {d.segment_id: d for d in plan.retention.deletions}
    segments = tuple(
        SegmentView(
            s.id,
            s.base_offset,
            s.next_offset,
            s.record_count,
            s.size_bytes,
            s.sealed,
            s.max_timestamp,
            deleting[s.id].rule if s.id in deleting else None,
            deleting[s.id].reason if s.id in deleting else None,
        )
        for s in manifest.segments
    )
    consumed = state.consumed.get(partition)
    return PartitionView(
        plan=plan,
        manifest=manifest,
        regions=_regions(manifest, plan.compaction.range),
        segments=segments,
        groups=dict(consumed.groups) if consumed else {},
        consumed_offset=None if consumed is None else consumed.offset,
        consumed_reason=None if consumed is None else consumed.reason,
        offsets_source=state.offsets_source,
    )
