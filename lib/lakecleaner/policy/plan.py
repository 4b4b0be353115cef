"""Plans: what is due in a partition and in a topic, at a given time (DESIGN sections 4 and 6).

A partition is planned in the DAG's order: the idle roll first, then, on the rolled manifest,
the compaction assessment, retention and the deletion deadline. A topic plan adds the selection
of the partitions to compact and the cleaner gauges. Every plan is a frozen value with a
JSON-serialisable `to_dict()`, shared by `lakecleaner plan --json`, the DAG and run reports.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from typing import Any

from lakecleaner.cleaner_state import CleanerState, UncleanablePartition
from lakecleaner.config import TopicConfig
from lakecleaner.errors import TopicNotFound
from lakecleaner.log.manifest import Manifest
from lakecleaner.offsets import ConsumedPosition
from lakecleaner.policy.cleanable import CompactionAssessment, assess_compaction
from lakecleaner.policy.metrics import DeletionDeadline, TopicMetrics, deletion_deadline, topic_metrics
from lakecleaner.policy.retention import RetentionPlan, plan_retention
from lakecleaner.policy.roll import RollDecision, apply_roll, plan_roll
from lakecleaner.policy.selection import Selection, select_partitions
from lakecleaner.policy.uncleanable import still_uncleanable, uncleanable_reason


@dataclass(frozen=True)
class PartitionPlan:
    """Everything due in one partition at `now_ms`, decided on manifest version `manifest_version`.

    `compaction`, `retention` and `deadline` are planned on the manifest as it is after `roll`
    (when the roll is due), so the roll must be committed before they are applied.
    """

    topic: str
    partition: int
    now_ms: int
    manifest_version: int
    roll: RollDecision
    compaction: CompactionAssessment
    retention: RetentionPlan
    deadline: DeletionDeadline | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "now_ms": self.now_ms,
            "manifest_version": self.manifest_version,
            "roll": self.roll.to_dict(),
            "compaction": self.compaction.to_dict(),
            "retention": self.retention.to_dict(),
            "deadline": None if self.deadline is None else self.deadline.to_dict(),
        }


@dataclass(frozen=True)
class TopicPlan:
    """A topic's partition plans (by partition number), the compaction selection and the gauges,
    with the effective config they were planned with."""

    topic: str
    now_ms: int
    config: TopicConfig
    force: bool
    max_partitions: int | None
    partitions: tuple[PartitionPlan, ...]
    selection: Selection
    metrics: TopicMetrics

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "now_ms": self.now_ms,
            "config": self.config.to_kafka_dict(),
            "force": self.force,
            "max_partitions": self.max_partitions,
            "selection": self.selection.to_dict(),
            "metrics": self.metrics.to_dict(),
            "partitions": [p.to_dict() for p in self.partitions],
        }


def plan_partition(
    manifest: Manifest,
    config: TopicConfig,
    consumed: ConsumedPosition | None,
    now_ms: int,
    uncleanable: UncleanablePartition | None = None,
) -> PartitionPlan:
    """Plan one partition: roll, then (on the rolled manifest) compaction, retention, deadline.

    `consumed` is the partition's minimum committed offset over the subscribed groups (None when
    it was not read: consumed retention is then skipped). `uncleanable` is the partition's mark
    from a failed compaction: while its log and config are unchanged it is not compacted (Kafka's
    uncleanable partitions, policy.uncleanable); retention still applies.
    """
    roll = plan_roll(manifest, config, now_ms)
    current = apply_roll(manifest, now_ms) if roll.roll else manifest
    compaction = assess_compaction(current, config, now_ms)
    if uncleanable is not None and config.compact and still_uncleanable(uncleanable, current, config):
        reason = uncleanable_reason(uncleanable, manifest.topic)
        compaction = replace(compaction, due=False, reason=reason, triggers=(), uncleanable=uncleanable)
    cleanable = compaction.range
    deadline = None if cleanable is None else deletion_deadline(current, config, cleanable.first_dirty_offset, now_ms)
    return PartitionPlan(
        topic=manifest.topic,
        partition=manifest.partition,
        now_ms=now_ms,
        manifest_version=manifest.version,
        roll=roll,
        compaction=compaction,
        retention=plan_retention(current, config, consumed, now_ms),
        deadline=deadline,
    )


def plan_topic(
    topic: str,
    manifests: Mapping[int, Manifest],
    config: TopicConfig,
    consumed: Mapping[int, ConsumedPosition],
    now_ms: int,
    *,
    force: bool = False,
    partitions: Collection[int] | None = None,
    max_partitions: int | None = None,
    cleaner: CleanerState | None = None,
) -> TopicPlan:
    """Plan a topic: every partition in `partitions` (all of `manifests` when None), and the
    selection of those to compact (see `select_partitions`: `force` compacts every partition with
    cleanable bytes, `max_partitions` bounds the run). A run with a partition subset acts on those
    partitions only, so the plan, its selection and its gauges cover just them. `cleaner` is the
    topic's cleaner state: its uncleanable partitions are skipped and it feeds the run gauges.

    Raises TopicNotFound when `partitions` names a partition `manifests` does not have, and
    ValueError when a manifest belongs to another topic or partition than its key says.
    """
    wanted = sorted(manifests if partitions is None else set(partitions))
    missing = [p for p in wanted if p not in manifests]
    if missing:
        raise TopicNotFound(
            f"topic {topic} has no partition {', '.join(map(str, missing))}; "
            f"its partitions are {', '.join(map(str, sorted(manifests))) or 'none'}"
        )
    for p in wanted:
        if (manifests[p].topic, manifests[p].partition) != (topic, p):
            raise ValueError(f"the manifest given for {topic}-{p} is {manifests[p].topic}-{manifests[p].partition}")
    state = CleanerState(topic) if cleaner is None else cleaner
    plans = tuple(
        plan_partition(manifests[p], config, consumed.get(p), now_ms, state.uncleanable.get(p)) for p in wanted
    )
    gauges = {plan.partition: plan.compaction.gauges for plan in plans}
    return TopicPlan(
        topic=topic,
        now_ms=now_ms,
        config=config,
        force=force,
        max_partitions=max_partitions,
        partitions=plans,
        selection=select_partitions(gauges, force=force, max_partitions=max_partitions),
        metrics=topic_metrics(list(gauges.values()), state.last_run, now_ms),
    )
