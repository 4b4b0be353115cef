"""A topic's summary: per partition, the manifest's figures and what its plan added to the
topic's gauges, as of one "now" (issue 50).

The figures (log start and end, segments, records, bytes, tombstones) are the manifest's own, of
the version the entry names; a reader uses an entry only while no marker announces a newer
version. The gauges, due reasons and deletion deadline are the plan's at `planned_at_ms`: the
deadline does not move while the manifest does not, the due flags are as of then (as Kafka's
cleaner gauges are as of its last check). Storage is untrusted: `from_json` validates every field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lakecleaner.cleaner_state import LastRun
from lakecleaner.dashboard.digests import RunDigest
from lakecleaner.dashboard.runs import RunRecord
from lakecleaner.errors import CorruptSummary
from lakecleaner.io.strict_json import Fields, Malformed, load_object
from lakecleaner.log.manifest import Manifest
from lakecleaner.policy.cleanable import PartitionGauges
from lakecleaner.policy.figures import PartitionFigures, partition_figures
from lakecleaner.policy.metrics import DeletionDeadline
from lakecleaner.policy.plan import PartitionPlan, TopicPlan
from lakecleaner.summaries.layout import config_digest

#: The summary's format; a reader falls back to the manifests for any other.
FORMAT = 1

#: The largest summary a reader parses (100,000 partitions of about 600 bytes fit with room).
MAX_SUMMARY_BYTES = 256 << 20


@dataclass(frozen=True)
class PartitionSummary:
    """One partition's entry: its figures, its gauges and due reasons, and its deadline parts."""

    figures: PartitionFigures
    gauges: PartitionGauges
    #: Why compaction is due, or why not (the assessment's reason).
    compaction_reason: str
    #: What retention deletes and by which rule; None when it deletes nothing.
    retention_reason: str | None
    record_deadline_ms: int | None
    tombstone_horizon_ms: int | None

    @property
    def partition(self) -> int:
        return self.figures.partition

    @classmethod
    def of(cls, plan: PartitionPlan, manifest: Manifest) -> PartitionSummary:
        """The entry of `plan`'s partition, on `manifest` as planned."""
        deadline = plan.deadline
        return cls(
            figures=partition_figures(plan, manifest),
            gauges=plan.compaction.gauges,
            compaction_reason=plan.compaction.reason,
            retention_reason=plan.retention.reason if plan.retention.deletions else None,
            record_deadline_ms=None if deadline is None else deadline.record_deadline_ms,
            tombstone_horizon_ms=None if deadline is None else deadline.tombstone_horizon_ms,
        )

    def deadline(self, now_ms: int) -> DeletionDeadline | None:
        """The partition's deletion deadline as seen at `now_ms` (it does not move with time)."""
        parts = [d for d in (self.record_deadline_ms, self.tombstone_horizon_ms) if d is not None]
        if not parts:
            return None
        deadline = min(parts)
        seconds_left = (deadline - now_ms) // 1000
        return DeletionDeadline(self.record_deadline_ms, self.tombstone_horizon_ms, deadline, seconds_left)

    def to_dict(self) -> dict[str, Any]:
        g = self.gauges
        return {
            **self.figures.to_dict(),
            "gauges": [
                g.due,
                g.overdue,
                g.uncleanable,
                g.dirty_ratio,
                g.dirty_percent,
                g.cleanable_bytes,
                g.not_yet_cleanable_bytes,
                g.max_compaction_delay_ms,
            ],
            "compaction_reason": self.compaction_reason,
            "retention_reason": self.retention_reason,
            "record_deadline_ms": self.record_deadline_ms,
            "tombstone_horizon_ms": self.tombstone_horizon_ms,
        }

    @classmethod
    def from_fields(cls, f: Fields) -> PartitionSummary:
        try:
            figures = PartitionFigures.from_dict(f.raw)
        except ValueError as exc:
            raise Malformed(f"{f.where}: {exc}") from None
        return cls(
            figures=figures,
            gauges=_gauges(f),
            compaction_reason=f.text("compaction_reason", max_chars=4096),
            retention_reason=f.optional_text("retention_reason"),
            record_deadline_ms=f.optional_int("record_deadline_ms", lo=-(1 << 62), hi=1 << 62),
            tombstone_horizon_ms=f.optional_int("tombstone_horizon_ms", lo=-(1 << 62), hi=1 << 62),
        )


def _gauges(f: Fields) -> PartitionGauges:
    """The gauges, stored as a list in PartitionGauges' field order (they are most of a summary)."""
    raw = f.raw.get("gauges")
    if not isinstance(raw, list) or len(raw) != 8:
        raise Malformed(f"field {f.where}.gauges is not a list of 8 values")
    due, overdue, uncleanable, ratio, percent, cleanable, not_yet, delay = raw
    flags_ok = all(isinstance(x, bool) for x in (due, overdue, uncleanable))
    ratio_ok = isinstance(ratio, int | float) and not isinstance(ratio, bool) and 0 <= ratio <= 1
    percent_ok = percent is None or (type(percent) is int and 0 <= percent <= 100)
    counts_ok = all(type(x) is int and x >= 0 for x in (cleanable, not_yet, delay))
    if not (flags_ok and ratio_ok and percent_ok and counts_ok):
        raise Malformed(f"field {f.where}.gauges holds a value of the wrong type or range: {raw!r:.200}")
    return PartitionGauges(due, overdue, uncleanable, float(ratio), percent, cleanable, not_yet, delay)


@dataclass(frozen=True)
class TopicSummary:
    """A topic's summary as of `planned_at_ms`: its partitions' entries, those whose manifest could
    not be read (and why), the topic.json it was planned with (`config_digest`, and the cleanup
    policy), the cleaner's last run and the digests of the topic's recent runs."""

    topic: str
    planned_at_ms: int
    config_digest: str
    cleanup_policy: tuple[str, ...]
    partition_count: int
    partitions: Mapping[int, PartitionSummary]
    unreadable: Mapping[int, str] = field(default_factory=dict)
    last_run: LastRun | None = None
    runs: Sequence[RunDigest] = ()

    def version(self, partition: int) -> int | None:
        """The manifest version the partition's entry summarises (None: it has none)."""
        entry = self.partitions.get(partition)
        return None if entry is None else entry.figures.manifest_version

    def covers(self, other: TopicSummary) -> bool:
        """Whether this summary is at least as new as `other` for every partition `other` has."""
        return all((self.version(p) or 0) >= entry.figures.manifest_version for p, entry in other.partitions.items())

    def to_json(self) -> bytes:
        data = {
            "format": FORMAT,
            "topic": self.topic,
            "planned_at_ms": self.planned_at_ms,
            "config_digest": self.config_digest,
            "cleanup_policy": list(self.cleanup_policy),
            "partition_count": self.partition_count,
            "partitions": [e.to_dict() for _, e in sorted(self.partitions.items())],
            "unreadable": {str(p): reason for p, reason in sorted(self.unreadable.items())},
            "last_run": None if self.last_run is None else self.last_run.to_dict(),
            "runs": [r.to_stored() for r in self.runs],
        }
        return json.dumps(data, separators=(",", ":")).encode()

    @staticmethod
    def from_json(data: bytes, topic: str, location: str) -> TopicSummary:
        """Parse and validate; CorruptSummary naming `location` and the fix."""
        try:
            f = load_object(data, max_bytes=MAX_SUMMARY_BYTES, fractions=True)
            if f.integer("format", hi=1 << 31) != FORMAT:
                raise Malformed(f"format {f.raw['format']}, which this version does not read (it reads {FORMAT})")
            entries = [PartitionSummary.from_fields(e) for e in f.objects("partitions")]
            last = f.optional_object("last_run")
            summary = TopicSummary(
                topic=f.text("topic", max_chars=249),
                planned_at_ms=f.integer("planned_at_ms"),
                config_digest=f.text("config_digest", max_chars=64),
                cleanup_policy=tuple(_strings(f, "cleanup_policy")),
                partition_count=f.integer("partition_count", hi=1 << 31),
                partitions={e.partition: e for e in entries},
                unreadable={_partition(k): v for k, v in f.strings("unreadable").items()},
                last_run=None if last is None else LastRun.from_fields(last),
                runs=tuple(RunDigest.from_fields(r) for r in f.objects("runs")),
            )
        except Malformed as exc:
            raise CorruptSummary(f"summary {location} is corrupt ({exc}); {_FIX.format(topic=topic)}") from None
        if summary.topic != topic or len(summary.partitions) != len(entries):
            raise CorruptSummary(
                f"summary {location} names topic {summary.topic!r} or lists a partition twice; "
                + _FIX.format(topic=topic)
            )
        return summary


def summary_of_plan(
    plan: TopicPlan,
    manifests: Mapping[int, Manifest],
    unreadable: Mapping[int, str],
    metadata: bytes,
    partition_count: int,
    last_run: LastRun | None,
    runs: Sequence[RunRecord],
) -> TopicSummary:
    """The summary of a topic planned as `plan` on `manifests` (those of `unreadable` could not be
    read), with topic.json `metadata`, the cleaner's last run and the topic's recent runs."""
    return TopicSummary(
        topic=plan.topic,
        planned_at_ms=plan.now_ms,
        config_digest=config_digest(metadata),
        cleanup_policy=tuple(sorted(plan.config.cleanup_policy)),
        partition_count=partition_count,
        partitions={p.partition: PartitionSummary.of(p, manifests[p.partition]) for p in plan.partitions},
        unreadable=dict(unreadable),
        last_run=last_run,
        runs=tuple(RunDigest.of(r) for r in runs),
    )


_FIX = "the views read the topic's manifests instead until `lakecleaner summaries refresh --topic {topic}` rewrites it"


def _strings(f: Fields, key: str) -> list[str]:
    value = f.raw.get(key)
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise Malformed(f"field {key} is not a list of strings")
    return value


def _partition(key: str) -> int:
    if not key.isdigit() or len(key) > 9:
        raise Malformed(f"field unreadable has the key {key!r:.40}, not a partition number")
    return int(key)
