"""One partition's entry in its topic's summary (issue 50): the manifest's figures, what its plan
adds to the topic's gauges and compaction order, the due reasons, the deadline's parts, and what
`lakecleaner status` shows. Pure: a plan and its manifest in."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from lakecleaner.log.manifest import Manifest
from lakecleaner.policy.cleanable import PartitionGauges
from lakecleaner.policy.figures import PartitionFigures, partition_figures
from lakecleaner.policy.metrics import DeletionDeadline
from lakecleaner.policy.plan import PartitionPlan, TopicPlan


@dataclass(frozen=True)
class PartitionSummary:
    """One partition's entry: its figures, its gauges and due reasons, and its deadline parts."""

    figures: PartitionFigures
    gauges: PartitionGauges
    #: Why compaction is due, or why the partition is uncleanable; None otherwise (not kept).
    compaction_reason: str | None
    #: What retention deletes and by which rule; None when it deletes nothing.
    retention_reason: str | None
    record_deadline_ms: int | None
    tombstone_horizon_ms: int | None
    #: What `lakecleaner status` shows besides the figures: the manifest's cleaner checkpoint,
    #: its active segment's creation time, its files waiting for deletion, and the partition's
    #: uncleanable mark while it applies (Kafka's uncleanable partitions).
    cleaner_checkpoint: int | None = None
    active_created_ms: int | None = None
    pending_deletes: int = 0
    uncleanable_mark: str | None = None

    @property
    def partition(self) -> int:
        return self.figures.partition

    @classmethod
    def of(cls, plan: PartitionPlan, manifest: Manifest) -> PartitionSummary:
        """The entry of `plan`'s partition, on `manifest` as planned."""
        deadline, gauges = plan.deadline, plan.compaction.gauges
        return cls(
            figures=partition_figures(plan, manifest),
            gauges=gauges,
            compaction_reason=plan.compaction.reason if plan.compaction.due or gauges.uncleanable else None,
            retention_reason=plan.retention.reason if plan.retention.deletions else None,
            record_deadline_ms=None if deadline is None else deadline.record_deadline_ms,
            tombstone_horizon_ms=None if deadline is None else deadline.tombstone_horizon_ms,
            cleaner_checkpoint=manifest.cleaner_checkpoint,
            active_created_ms=None if manifest.active_segment is None else manifest.active_segment.created_ms,
            pending_deletes=len(manifest.pending_deletes),
            uncleanable_mark=None if plan.compaction.uncleanable is None else plan.compaction.uncleanable.reason,
        )

    def deadline(self, now_ms: int) -> DeletionDeadline | None:
        """The partition's deletion deadline as seen at `now_ms` (it does not move with time)."""
        deadline = self.figures.nearest_deadline_ms
        if deadline is None:
            return None
        seconds_left = (deadline - now_ms) // 1000
        return DeletionDeadline(self.record_deadline_ms, self.tombstone_horizon_ms, deadline, seconds_left)


def entries_of_plan(plan: TopicPlan, manifests: Mapping[int, Manifest]) -> dict[int, PartitionSummary]:
    """The entries of every partition `plan` planned, each on its manifest in `manifests`."""
    return {p.partition: PartitionSummary.of(p, manifests[p.partition]) for p in plan.partitions}
