"""The roll of an idle active segment (★ DESIGN section 4, "Rolling").

Kafka rolls only on append (`UnifiedLog.maybeRoll`): a partition that stops receiving writes keeps
its active segment forever, and since the active segment is never cleaned, KIP-354's promise
(a record is compacted at most max.compaction.lag.ms after it was written) breaks for it. The DAG
therefore also rolls an idle active segment once its first batch is older than the time bound an
append would have used.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lakecleaner.config import TopicConfig
from lakecleaner.log.manifest import Manifest
from lakecleaner.policy.segment_times import rolling_timestamp


@dataclass(frozen=True)
class RollDecision:
    """Whether the active segment is rolled now, and why (or why not)."""

    roll: bool
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"roll": self.roll, "reason": self.reason}


def plan_roll(manifest: Manifest, config: TopicConfig, now_ms: int) -> RollDecision:
    """Roll iff the active segment is non-empty and now − its first batch's max timestamp > max
    segment ms (strict, as `LogSegment.shouldRoll`), where max segment ms = min(segment.ms,
    max.compaction.lag.ms) for compacted topics, else segment.ms (KIP-354's forced roll).
    An empty segment never rolls by time.
    """
    active = manifest.active_segment
    if active is None:
        return RollDecision(False, "no active segment: the last segment is sealed")
    if active.is_empty:
        return RollDecision(False, "the active segment is empty")
    bound = config.max_segment_ms
    name = "max.compaction.lag.ms" if bound < config.segment_ms else "segment.ms"
    age = now_ms - rolling_timestamp(active)
    if age > bound:
        return RollDecision(True, f"the active segment's first batch is {age} ms old > {name} {bound}")
    return RollDecision(False, f"the active segment's first batch is {age} ms old, not older than {name} {bound}")


def apply_roll(manifest: Manifest, now_ms: int) -> Manifest:
    """The manifest after the roll `plan_roll` decided (`Manifest.rolled`)."""
    return manifest.rolled(now_ms)
