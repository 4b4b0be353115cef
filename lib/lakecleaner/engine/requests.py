"""What the engine is asked to compact: one request per partition, F and U included.

The policy package decides which partitions are due and computes their cleanable range; the
engine only takes the result. `requests_for` is a small stand-in for that policy (Kafka's
`LogCleanerManager.cleanableOffsets`, DESIGN section 4), used by `spark_jobs/compact_topic.py`
until the job is wired to the policy package.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lakecleaner.config import TopicConfig
from lakecleaner.log.manifest import Manifest


@dataclass(frozen=True)
class CompactionRequest:
    """Compact `topic`-`partition` over [log start, U), as planned from manifest `manifest_version`.

    F (`first_dirty_offset`) and U (`first_uncleanable_offset`) are segment boundaries. The
    engine cleans the whole range [log start, U) — Kafka recopies the clean prefix on every pass
    (kafka-cleaner-semantics.md section 1.9) — so F is informational: it is reported, and a
    request with F == U still expires tombstones in the clean prefix (★ DESIGN section 4).
    """

    topic: str
    partition: int
    first_dirty_offset: int
    first_uncleanable_offset: int
    manifest_version: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "first_dirty_offset": self.first_dirty_offset,
            "first_uncleanable_offset": self.first_uncleanable_offset,
            "manifest_version": self.manifest_version,
        }


def requests_for(manifest: Manifest, config: TopicConfig, now_ms: int) -> CompactionRequest | None:
    """The request for one partition, or None when a pass would have nothing to do.

    F = the cleaner checkpoint, reset to the log start when absent, below the log start or past
    the log end, rounded down to the base of its segment. U = the base of the active segment or
    of the first segment at or after F whose max timestamp > now − min.compaction.lag.ms (KIP-58,
    a prefix rule), else the log end. None when [log start, U) is empty, or when F == U and no
    tombstone horizon in [log start, U) has passed (nothing dirty, nothing to expire).
    """
    start, end = manifest.log_start_offset, manifest.next_offset
    checkpoint = manifest.cleaner_checkpoint
    first_dirty = checkpoint if checkpoint is not None and start <= checkpoint <= end else start
    holding = manifest.segment_index_of(first_dirty)
    if holding is not None:
        first_dirty = manifest.segments[holding].base_offset
    first_uncleanable = end
    for segment in manifest.segments:
        if segment.base_offset < first_dirty:
            continue
        lag = config.min_compaction_lag_ms
        if not segment.sealed or (lag > 0 and segment.max_timestamp > now_ms - lag):
            first_uncleanable = segment.base_offset
            break
    first_dirty = min(first_dirty, first_uncleanable)
    in_range = [s for s in manifest.segments if s.next_offset > start and s.base_offset < first_uncleanable]
    expired = any(s.earliest_delete_horizon_ms is not None and s.earliest_delete_horizon_ms <= now_ms for s in in_range)
    if not in_range or (first_dirty == first_uncleanable and not expired):
        return None
    return CompactionRequest(manifest.topic, manifest.partition, first_dirty, first_uncleanable, manifest.version)
