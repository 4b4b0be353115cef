"""What the engine is asked to compact: one request per partition, F and U included.

The policy package decides which partitions are due and computes their cleanable range; the
engine only takes the result. `requests_for` turns the policy's range into a request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lakecleaner.config import TopicConfig
from lakecleaner.log.manifest import Manifest
from lakecleaner.policy.cleanable import cleanable_range


@dataclass(frozen=True)
class CompactionRequest:
    """Compact `topic`-`partition` over [log start, U), as planned from manifest `manifest_version`.

    U (`first_uncleanable_offset`) is a segment boundary; F (`first_dirty_offset`) is Kafka's and
    may lie inside a segment. The engine cleans the whole range [log start, U) — Kafka recopies
    the clean prefix on every pass (kafka-cleaner-semantics.md section 1.9) — so F is
    informational: it is reported, and a
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
    """The request for one partition, from the policy's cleanable range (F and U as Kafka's
    `LogCleanerManager.cleanableOffsets` computes them, DESIGN section 4), or None when a pass
    would have nothing to do: [log start, U) is empty, or F == U and no tombstone horizon or
    deletion vector's erasure deadline in [log start, U) has passed and the bytes vectors remove
    do not make the dirty ratio (nothing dirty, nothing to expire, erase or reclaim).
    """
    cleanable = cleanable_range(manifest, config, now_ms)
    first_dirty, first_uncleanable = cleanable.first_dirty_offset, cleanable.first_uncleanable_offset
    start = manifest.log_start_offset
    in_range = [s for s in manifest.segments if s.next_offset > start and s.base_offset < first_uncleanable]
    reclaiming = cleanable.dead_bytes > 0 and cleanable.dirty_ratio > config.min_cleanable_dirty_ratio
    expiring = cleanable.expired_tombstone_horizon_ms is not None or cleanable.erasure_due_ms is not None
    if not in_range or (first_dirty == first_uncleanable and not expiring and not reclaiming):
        return None
    return CompactionRequest(manifest.topic, manifest.partition, first_dirty, first_uncleanable, manifest.version)
