"""Whether a partition marked uncleanable is skipped (Kafka's uncleanable partitions).

Kafka's LogCleanerManager skips a partition whose cleaning threw until the broker restarts
(kafka-cleaner-semantics.md section 1.15). Here the mark is kept between runs (cleaner_state),
and a partition is retried as soon as retrying can give another outcome: its sealed segments
changed (new segments rolled, retention or repair), or the topic config changed; or when an
operator clears the mark (`lakecleaner uncleanable clear`).
"""

from __future__ import annotations

from lakecleaner.cleaner_state import UncleanablePartition, config_fingerprint, sealed_segments_fingerprint
from lakecleaner.config import TopicConfig
from lakecleaner.log.manifest import Manifest
from lakecleaner.policy.text import format_timestamp_ms


def still_uncleanable(entry: UncleanablePartition | None, manifest: Manifest, config: TopicConfig) -> bool:
    """True when the partition is marked uncleanable and nothing has changed since the failure:
    the same sealed segments and the same topic config."""
    return (
        entry is not None
        and entry.segments_fingerprint == sealed_segments_fingerprint(manifest)
        and entry.config_fingerprint == config_fingerprint(config)
    )


def uncleanable_reason(entry: UncleanablePartition, topic: str) -> str:
    """Why the partition is skipped, in words, with how it will be retried."""
    attempts = "1 failed attempt" if entry.attempts == 1 else f"{entry.attempts} failed attempts"
    return (
        f"uncleanable since {format_timestamp_ms(entry.first_failed_ms)} ({attempts}, the last at "
        f"{format_timestamp_ms(entry.last_failed_ms)}): {entry.reason}; retried once new segments are sealed or "
        f"the topic config changes, or after `lakecleaner uncleanable clear --topic {topic} --partition "
        f"{entry.partition}`"
    )
