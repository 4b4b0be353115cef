"""A partition's figures at a run: what the dashboard's history charts draw (issue 51).

Each DAG run's assessment stores one `PartitionFigures` per partition it planned in run.json, so a
topic's history is its run reports read in order: no second store of time series, and nothing the
reports do not already say. Pure: a plan and its manifest in, figures out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from lakecleaner.log.manifest import Manifest
from lakecleaner.policy.plan import PartitionPlan


@dataclass(frozen=True)
class PartitionFigures:
    """One partition as planned at a run's "now".

    `dirty_ratio` is Kafka's cleanableRatio (cleanable bytes over clean plus cleanable, KIP-58's
    bounds), None on a topic that is not compacted; `nearest_deadline_ms` the partition's deletion
    deadline (KIP-354's max.compaction.lag.ms or a tombstone horizon, KIP-534), None when none applies;
    `dead_bytes` the bytes of the cleaned section that deletion vectors remove (issue 79), which
    the dirty ratio counts as dirty.
    """

    partition: int
    manifest_version: int
    log_start_offset: int
    next_offset: int
    segments: int
    records: int
    size_bytes: int
    tombstones: int
    dirty_ratio: float | None
    nearest_deadline_ms: int | None
    dead_bytes: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> PartitionFigures:
        """Figures as a report stored them; ValueError (naming the field) for a shape no writer makes."""
        values: dict[str, Any] = {}
        for name in ("partition", "manifest_version", "log_start_offset", "next_offset", "segments"):
            values[name] = _whole(raw, name)
        for name in ("records", "size_bytes", "tombstones"):
            values[name] = _whole(raw, name)
        ratio = raw.get("dirty_ratio")
        if ratio is not None and (isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0 <= ratio <= 1):
            raise ValueError(f"dirty_ratio={ratio!r}: must be a number from 0 to 1, or null")
        values["dirty_ratio"] = None if ratio is None else float(ratio)
        deadline = raw.get("nearest_deadline_ms")
        values["nearest_deadline_ms"] = None if deadline is None else _whole(raw, "nearest_deadline_ms")
        values["dead_bytes"] = _whole(raw, "dead_bytes") if "dead_bytes" in raw else 0  # reports before issue 79
        return cls(**values)


def _whole(raw: Mapping[str, Any], name: str) -> int:
    value = raw.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name}={value!r}: must be a whole number")
    return value


def partition_figures(plan: PartitionPlan, manifest: Manifest) -> PartitionFigures:
    """The figures of `plan`'s partition, on `manifest` as planned (after its roll, when one was due)."""
    cleanable = plan.compaction.range
    return PartitionFigures(
        partition=plan.partition,
        manifest_version=plan.manifest_version,
        log_start_offset=manifest.log_start_offset,
        next_offset=manifest.next_offset,
        segments=len(manifest.segments),
        records=manifest.record_count,
        size_bytes=manifest.size_bytes,
        tombstones=sum(s.tombstone_count for s in manifest.segments),
        dirty_ratio=None if cleanable is None else cleanable.dirty_ratio,
        nearest_deadline_ms=None if plan.deadline is None else plan.deadline.deadline_ms,
        dead_bytes=0 if cleanable is None else cleanable.dead_bytes,
    )
