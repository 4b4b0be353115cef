"""Which of a topic's partitions a run compacts, and in which order (Kafka's `grabFilthiestCompactedLog`).

Kafka's cleaner thread takes one log at a time: the eligible one with the highest dirty ratio; a
log past its max compaction lag is only made eligible, with no priority. ★ Here a run compacts
several partitions of a topic together, overdue ones (KIP-354 delay > 0) first, then the highest
dirty ratio, ties by partition number, up to a per-run limit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lakecleaner.policy.cleanable import PartitionGauges


@dataclass(frozen=True)
class Selection:
    """The partitions a run compacts, in order; the eligible ones left for a later run; the
    selected ones that are there only because of `force`."""

    selected: tuple[int, ...] = ()
    deferred: tuple[int, ...] = ()
    forced: tuple[int, ...] = ()

    def status(self, partition: int) -> str:
        """The partition's place in the selection, in a few words."""
        if partition in self.selected:
            rank = self.selected.index(partition) + 1
            return f"forced #{rank}" if partition in self.forced else f"yes #{rank}"
        if partition in self.deferred:
            return "deferred (per-run limit)"
        return "no"

    def to_dict(self) -> dict[str, Any]:
        return {"selected": list(self.selected), "deferred": list(self.deferred), "forced": list(self.forced)}


def select_partitions(
    gauges: Mapping[int, PartitionGauges], *, force: bool = False, max_partitions: int | None = None
) -> Selection:
    """Order the eligible partitions (by their assessments' `PartitionGauges`) and keep the first
    `max_partitions` (all when None).

    Eligible: due, or, with `force`, any partition of a compacted topic with cleanable bytes
    (the dirty ratio is then ignored; the cleanable range still bounds what is cleaned) that is
    not marked uncleanable (only `lakecleaner uncleanable clear` or a changed log lifts that).
    """
    if max_partitions is not None and max_partitions < 1:
        raise ValueError(f"max_partitions must be at least 1, got {max_partitions}")
    forced = {p for p, g in gauges.items() if force and not g.due and not g.uncleanable and g.cleanable_bytes > 0}
    eligible = [p for p, g in gauges.items() if g.due or p in forced]
    ordered = sorted(eligible, key=lambda p: _priority(p, gauges))
    selected = tuple(ordered[:max_partitions])
    return Selection(
        selected=selected, deferred=tuple(ordered[len(selected) :]), forced=tuple(p for p in selected if p in forced)
    )


def _priority(partition: int, gauges: Mapping[int, PartitionGauges]) -> tuple[bool, float, int]:
    """Overdue first, then the highest dirty ratio, then the lowest partition number."""
    partition_gauges = gauges[partition]
    return (not partition_gauges.overdue, -partition_gauges.dirty_ratio, partition)
