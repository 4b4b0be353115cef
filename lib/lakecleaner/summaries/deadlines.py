"""The lake's erasure overview (issue 50): every partition's deletion deadline, soonest first,
from the topics' facts (`summaries.read`: a summary where it is current, the manifests where it
is not). Pure: facts and "now" in, rows out.

A compacted partition's deadline is the earlier of Kafka's two promises: KIP-354's (its dirty
records compacted by the first dirty batch's timestamp plus max.compaction.lag.ms) and KIP-534's
(its earliest tombstone's delete horizon). Both are facts of the manifest version the entry
names, so they do not move with time; only the time left does. What the manifests do not say
is not here: the time by which gc then deletes the replaced files, the files already awaiting
deletion (counted per partition, their times in `lakecleaner audit topic`) and objects no manifest
references, which only a listing of the topic finds.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from lakecleaner.policy.metrics import DeletionDeadline
from lakecleaner.summaries.read import TopicFacts

#: Which of Kafka's promises a deadline is, by the config that sets it.
RECORDS = "max.compaction.lag.ms"
TOMBSTONES = "delete.retention.ms"


@dataclass(frozen=True)
class PartitionDeadline:
    """One partition's deletion deadline at the view's "now"; `from_summary` is False when its
    entry was planned from its manifest (the summary did not answer for it)."""

    topic: str
    partition: int
    deadline: DeletionDeadline
    pending_deletes: int
    from_summary: bool

    @property
    def rule(self) -> str:
        """The config whose promise falls due first: `RECORDS` (KIP-354) or `TOMBSTONES` (KIP-534)."""
        return RECORDS if self.deadline.record_deadline_ms == self.deadline.deadline_ms else TOMBSTONES

    @property
    def overdue(self) -> bool:
        return self.deadline.seconds_left < 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            **self.deadline.to_dict(),
            "rule": self.rule,
            "overdue": self.overdue,
            "pending_deletes": self.pending_deletes,
            "from": "summary" if self.from_summary else "manifest",
        }


def lake_deadlines(facts: Iterable[TopicFacts], now_ms: int, within_ms: int | None = None) -> list[PartitionDeadline]:
    """Every partition with a deletion deadline, soonest first (then by topic and partition); with
    `within_ms`, only those due by `now_ms + within_ms` (the overdue always)."""
    found = [
        PartitionDeadline(f.topic, p, deadline, entry.pending_deletes, p not in f.from_manifests)
        for f in facts
        for p, entry in f.partitions.items()
        if (deadline := entry.deadline(now_ms)) is not None
        and (within_ms is None or deadline.deadline_ms <= now_ms + within_ms)
    ]
    return sorted(found, key=lambda d: (d.deadline.deadline_ms, d.topic, d.partition))


def pending_deletes(facts: Iterable[TopicFacts]) -> dict[str, int]:
    """Each topic's files awaiting deletion over all its partitions (topics with none left out)."""
    counts = {f.topic: sum(e.pending_deletes for e in f.partitions.values()) for f in facts}
    return {topic: n for topic, n in counts.items() if n}
