"""`trim`: Kafka's DeleteRecords (KIP-107), which moves the log start offset forward explicitly.

Nothing is deleted by the trim itself: the segments wholly below the new log start offset leave
the log at the next retention run, by the log start breach rule (on every topic, compact-only
too), and the cleaner checkpoint, if it falls below, is reset by the next plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import takewhile
from typing import Any

from lakecleaner.errors import OffsetOutOfRange
from lakecleaner.log.manifest import Manifest
from lakecleaner.policy.retention import breaches_log_start


@dataclass(frozen=True)
class TrimPlan:
    """A validated trim: the new log start offset and the segments retention will then delete."""

    offset: int
    log_start_offset: int
    released_segments: tuple[str, ...]

    @property
    def no_op(self) -> bool:
        return self.offset == self.log_start_offset

    def to_dict(self) -> dict[str, Any]:
        return {
            "offset": self.offset,
            "log_start_offset": self.log_start_offset,
            "no_op": self.no_op,
            "released_segments": list(self.released_segments),
        }


def plan_trim(manifest: Manifest, offset: int) -> TrimPlan:
    """Validate a trim to `offset` (records below it are deleted).

    Raises OffsetOutOfRange for an offset beyond the log end offset (Kafka: beyond the high
    watermark) or below the current log start offset; nothing is clamped. An offset equal to the
    current log start offset is a no-op.
    """
    name = f"{manifest.topic}-{manifest.partition}"
    if offset > manifest.next_offset:
        raise OffsetOutOfRange(
            f"cannot trim {name} to offset {offset}: it is beyond the log end offset {manifest.next_offset}; "
            f"trim to at most {manifest.next_offset} (which deletes every record)"
        )
    if offset < manifest.log_start_offset:
        raise OffsetOutOfRange(
            f"cannot trim {name} to offset {offset}: it is below the log start offset {manifest.log_start_offset}, "
            "and the log start offset never moves back"
        )
    segments = manifest.segments
    released = takewhile(lambda i: breaches_log_start(segments, i, offset), range(len(segments)))
    return TrimPlan(
        offset=offset,
        log_start_offset=manifest.log_start_offset,
        released_segments=tuple(segments[i].id for i in released),
    )


def apply_trim(manifest: Manifest, offset: int, now_ms: int) -> Manifest:
    """The manifest with log_start_offset moved to `offset` (version + 1); `manifest` itself when the
    trim is a no-op. Raises OffsetOutOfRange as `plan_trim` does."""
    if plan_trim(manifest, offset).no_op:
        return manifest
    return manifest.next_version(now_ms, log_start_offset=offset)
