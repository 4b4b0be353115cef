"""A partition's log as the dashboard draws it: its offsets as regions (clean, dirty, uncleanable,
active; Kafka's cleanable range), its segments with the retention rule that deletes each at the
next run, and the committed offsets of every subscribed consumer group. Every view is a frozen value
with a JSON-serialisable `to_dict()`: the JSON API returns it, and the HTML pages render the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lakecleaner.log.manifest import Manifest, Segment
from lakecleaner.policy import PartitionPlan
from lakecleaner.policy.cleanable import CleanableRange, holds_dirty_records
from lakecleaner.policy.retention import CONSUMED
from lakecleaner.policy.roll import apply_roll
from lakecleaner.summaries.facts import TopicState

#: Kinds of the offset ranges a partition's bar is made of.
CLEAN, DIRTY, UNCLEANABLE, ACTIVE, LOG = "clean", "dirty", "uncleanable", "active", "log"


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


__all__ = ["ACTIVE", "CLEAN", "DIRTY", "LOG", "UNCLEANABLE", "PartitionView", "Region", "SegmentView", "partition_view"]
