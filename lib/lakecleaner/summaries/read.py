"""A topic's facts for the lake-wide views: from its summary where the summary is current, from
its manifests where it is not (issue 50). Pure: summaries, markers and plans in, facts out.

A summary is not used at all when there is none, when it cannot be parsed, when it was planned
after the view's "now", or when a marker announces a topic.json it was not planned with (a
changed config or partition count). Otherwise each partition whose entry is missing, unreadable
or older than a marker announces is planned again from its manifest at the view's "now"; the
others keep their entries, planned at the summary's `planned_at_ms`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from lakecleaner.cleaner_state import LastRun
from lakecleaner.log.manifest import Manifest
from lakecleaner.policy.plan import TopicPlan
from lakecleaner.runs.digests import RunDigest
from lakecleaner.summaries.entry import PartitionSummary, entries_of_plan
from lakecleaner.summaries.layout import Pending
from lakecleaner.summaries.model import TopicSummary


@dataclass(frozen=True)
class TopicFacts:
    """What a view shows of a topic: every readable partition's entry, the unreadable ones and why,
    the cleaner's last run, and the recent runs' digests (None: the view reads the run reports).

    `planned_at_ms` is when the summary's entries were planned (None: every entry was planned at
    the view's "now"); `from_manifests` the partitions planned from their manifests instead, and
    `why` the reason the summary was not used for them (None when it was used for all).
    """

    topic: str
    cleanup_policy: tuple[str, ...]
    partitions: Mapping[int, PartitionSummary]
    unreadable: Mapping[int, str]
    last_run: LastRun | None
    runs: Sequence[RunDigest] | None
    planned_at_ms: int | None
    from_manifests: tuple[int, ...]
    why: str | None

    @property
    def compacted(self) -> bool:
        return "compact" in self.cleanup_policy

    def source(self) -> dict[str, Any]:
        """Where the figures come from, for the view to say so."""
        return {
            "summary_planned_at_ms": self.planned_at_ms,
            "partitions_from_manifests": len(self.from_manifests),
            "why": self.why,
        }


def facts_of_plan(
    plan: TopicPlan, manifests: Mapping[int, Manifest], unreadable: Mapping[int, str], last_run: LastRun | None
) -> TopicFacts:
    """A topic's facts from its plan at the view's "now" (every partition from its manifest)."""
    return TopicFacts(
        topic=plan.topic,
        cleanup_policy=tuple(sorted(plan.config.cleanup_policy)),
        partitions=entries_of_plan(plan, manifests),
        unreadable=dict(unreadable),
        last_run=last_run,
        runs=None,
        planned_at_ms=None,
        from_manifests=tuple(sorted(manifests)),
        why=None,
    )


def unusable(summary: TopicSummary | str | None, pending: Pending, now_ms: int) -> str | None:
    """Why the topic's summary cannot be used at all at `now_ms`; None when it can."""
    if summary is None:
        return "the topic has no summary yet"
    if isinstance(summary, str):
        return summary
    if summary.planned_at_ms > now_ms:
        return "its summary was planned after this view's now"
    if any(digest != summary.config_digest for digest in pending.digests):
        return "its topic.json changed after its summary was written"
    return None


def stale_partitions(summary: TopicSummary, pending: Pending) -> list[int]:
    """The partitions the summary cannot answer for: no entry, unreadable when it was written, or a
    marker announcing a newer manifest version than its entry's."""
    announced = pending.announced()
    entries = summary.partitions
    stale = [p for p in range(summary.partition_count) if p not in entries or p in summary.unreadable]
    stale += [p for p, v in announced.items() if p in entries and v > entries[p].figures.manifest_version]
    return sorted(set(stale))


def facts_of_summary(
    summary: TopicSummary,
    replanned: TopicPlan | None = None,
    manifests: Mapping[int, Manifest] | None = None,
    unreadable: Mapping[int, str] | None = None,
    last_run: LastRun | None = None,
) -> TopicFacts:
    """A topic's facts from its summary, with the partitions of `replanned` (planned at the view's
    "now" from `manifests`; `unreadable` those that could not be read) in place of their entries,
    and `last_run` from the cleaner state read with them."""
    facts = TopicFacts(
        topic=summary.topic,
        cleanup_policy=summary.cleanup_policy,
        partitions=dict(summary.partitions),
        unreadable={},
        last_run=summary.last_run,
        runs=summary.runs,
        planned_at_ms=summary.planned_at_ms,
        from_manifests=(),
        why=None,
    )
    if replanned is None:
        return facts
    fresh = facts_of_plan(replanned, manifests or {}, unreadable or {}, last_run)
    again = set(fresh.partitions) | set(fresh.unreadable)
    return replace(
        facts,
        partitions={**{p: e for p, e in facts.partitions.items() if p not in again}, **fresh.partitions},
        unreadable=fresh.unreadable,
        last_run=last_run,
        from_manifests=tuple(sorted(again)),
        why="a newer manifest than the summary's, or none in it",
    )
