"""The facts lake-wide views read (issue 50): each topic's summary where it is current, planned
again from the manifests where it is not, exactly as the DAG's `assess` task plans it
(`plan_topic` on the current manifests and the consumer groups' minimum committed offsets), so the
dashboard, the DAG, `lakecleaner status`, `plan --all`, `audit` and the demo agree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from lakecleaner.cleaner_state import CleanerState
from lakecleaner.errors import LakeCleanerError
from lakecleaner.lake import Lake, Topic, TopicMetadata
from lakecleaner.log.manifest import Manifest
from lakecleaner.offsets import ConsumedPosition
from lakecleaner.policy import TopicPlan, plan_topic
from lakecleaner.summaries.layout import Pending
from lakecleaner.summaries.model import TopicSummary
from lakecleaner.summaries.read import TopicFacts, facts_of_plan, facts_of_summary, stale_partitions, unusable
from lakecleaner.summaries.refresh import summary_store


@dataclass(frozen=True)
class TopicState:
    """A topic as the planning code sees it at `now_ms`."""

    manifests: dict[int, Manifest]
    consumed: dict[int, ConsumedPosition]
    plan: TopicPlan
    # Partitions whose manifest could not be read, and why (the plan covers the others).
    unreadable: dict[int, str]
    cleaner: CleanerState
    #: Where the consumer groups' committed offsets were read (`OffsetStore.source_of`).
    offsets_source: str


def load_topic(lake: Lake, name: str, now_ms: int) -> TopicState:
    """Read the topic's manifests and consumer positions and plan it (raises TopicNotFound). A
    partition whose manifest cannot be read is listed in `unreadable`; the others are planned."""
    topic = lake.topic(name)
    read = topic.read_manifests()
    consumed = lake.offsets.consumed_positions(name, sorted(read.manifests))
    cleaner = lake.cleaner_state.read(name)
    plan = plan_topic(name, read.manifests, topic.config, consumed, now_ms, cleaner=cleaner)
    return TopicState(read.manifests, consumed, plan, read.failures, cleaner, lake.offsets.source_of(name))


def load_topics(lake: Lake, names: Sequence[str], now_ms: int) -> dict[str, TopicState | str]:
    """`load_topic` for many topics in a few rounds of concurrent requests, not one round per
    topic: every topic.json at once, then every partition's manifest at once, the consumer
    groups' offsets once for all, and every topic's cleaner state at once. A topic that cannot
    be opened maps to the reason."""
    if not names:
        return {}
    topics, unopened = lake.read_topics(names)
    reads = lake.read_manifests_of(dict.fromkeys(topics.values()))
    groups = lake.offsets.read_all_groups()
    cleaners = lake.cleaner_state.read_many(list(topics), lake.config.storage.max_concurrency)
    out: dict[str, TopicState | str] = dict(unopened)
    for name, topic in topics.items():
        read = reads[name]
        consumed = lake.offsets.consumed_positions(name, sorted(read.manifests), groups)
        plan = plan_topic(name, read.manifests, topic.config, consumed, now_ms, cleaner=cleaners[name])
        source = lake.offsets.source_of(name)
        out[name] = TopicState(read.manifests, consumed, plan, read.failures, cleaners[name], source)
    return out


def facts_of_state(state: TopicState) -> TopicFacts:
    """A topic's facts from its plan at the view's "now"."""
    return facts_of_plan(state.plan, state.manifests, state.unreadable, state.cleaner.last_run)


def load_facts(lake: Lake, names: Sequence[str], now_ms: int) -> dict[str, TopicFacts | str]:
    """The facts of many topics for the overview (issue 50): each topic's summary where it is
    current (`summaries.read`), planned again from the manifests only for the partitions it cannot
    answer for, and the whole topic from its manifests where it has no usable summary. One listing
    of the lake's pending markers, a summary per topic, then the manifests needed, in a few
    concurrent rounds (`load_topics`; a partly stale topic's config and uncleanable marks come from
    its summary, which no config marker contradicts). A topic that cannot be read maps to the reason."""
    summaries = summary_store(lake)
    pending = summaries.pending()
    stored = summaries.read_many(list(names))
    whole: dict[str, str] = {}
    partly: dict[str, tuple[TopicSummary, list[int]]] = {}
    out: dict[str, TopicFacts | str] = {}
    for name in names:
        summary, markers = stored[name], pending.get(name, Pending())
        why = unusable(summary, markers, now_ms)
        if why is not None or not isinstance(summary, TopicSummary):
            whole[name] = why or "no summary"
        elif stale := stale_partitions(summary, markers):
            partly[name] = (summary, stale)
        else:
            out[name] = facts_of_summary(summary)
    for name, state in load_topics(lake, list(whole), now_ms).items():
        out[name] = state if isinstance(state, str) else replace(facts_of_state(state), why=whole[name])
    out |= _replanned(lake, partly, now_ms)
    return out


def _replanned(
    lake: Lake, partly: Mapping[str, tuple[TopicSummary, list[int]]], now_ms: int
) -> dict[str, TopicFacts | str]:
    """The facts of topics whose summaries cannot answer for some partitions: those planned at
    `now_ms` from their manifests, with the topic.json and cleaner state the summary holds."""
    if not partly:
        return {}
    out: dict[str, TopicFacts | str] = {}
    topics: dict[str, tuple[Topic, TopicSummary, list[int]]] = {}
    for name, (summary, stale) in partly.items():
        try:
            metadata = TopicMetadata.from_json(
                summary.metadata.encode(), f"the summary of {name}", name, lake.config.max_partitions_per_topic
            )
            topics[name] = (Topic(lake, metadata), summary, stale)
        except LakeCleanerError as exc:
            out[name] = str(exc)
    reads = lake.read_manifests_of({topic: stale for topic, _, stale in topics.values()})
    groups = lake.offsets.read_all_groups()
    for name, (topic, summary, _) in topics.items():
        read = reads[name]
        consumed = lake.offsets.consumed_positions(name, sorted(read.manifests), groups)
        cleaner = summary.cleaner
        plan = plan_topic(name, read.manifests, topic.config, consumed, now_ms, cleaner=cleaner)
        out[name] = facts_of_summary(summary, plan, read.manifests, read.failures, cleaner.last_run)
    return out


__all__ = ["TopicState", "facts_of_state", "load_facts", "load_topic", "load_topics"]
