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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lakecleaner.config import HOUR_MS
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


@dataclass(frozen=True)
class ErasureOverview:
    """What `lakecleaner audit lake` and the dashboard's /erasure show of the topics they loaded
    (`summaries.facts.load_facts`): the deadlines (`lake_deadlines`), the files awaiting deletion
    (`pending_deletes`), and what could not be read."""

    deadlines: list[PartitionDeadline]
    within_ms: int | None
    pending_deletes: dict[str, int]
    unreadable_topics: dict[str, str]
    unreadable_partitions: dict[str, Mapping[int, str]]

    @classmethod
    def of(cls, loaded: Mapping[str, TopicFacts | str], now_ms: int, within_hours: int | None) -> ErasureOverview:
        """The overview of `loaded` (a topic's facts, or why it cannot be read) at `now_ms`; with
        `within_hours`, of the overdue deadlines and those due within it."""
        facts = [f for f in loaded.values() if isinstance(f, TopicFacts)]
        within_ms = None if within_hours is None else within_hours * HOUR_MS
        return cls(
            deadlines=lake_deadlines(facts, now_ms, within_ms),
            within_ms=within_ms,
            pending_deletes=pending_deletes(facts),
            unreadable_topics={name: why for name, why in loaded.items() if isinstance(why, str)},
            unreadable_partitions={f.topic: f.unreadable for f in facts if f.unreadable},
        )

    @property
    def overdue(self) -> int:
        """How many of the deadlines have passed."""
        return sum(d.overdue for d in self.deadlines)

    def beside_deadlines(self) -> dict[str, Any]:
        """Its JSON besides the deadlines: the files awaiting deletion and what could not be read."""
        return {
            "pending_deletes": self.pending_deletes,
            "unreadable_topics": self.unreadable_topics,
            "unreadable_partitions": {
                topic: {str(p): why for p, why in partitions.items()}
                for topic, partitions in self.unreadable_partitions.items()
            },
        }
