"""Rebuilding a topic's summary from its manifests (issue 50): what the DAG's `report` task does
after every run, and `lakecleaner summaries refresh`.

The topic's pending markers are listed first, then topic.json, the manifests, the consumer
groups' offsets and the cleaner state are read and the topic planned at `now_ms`, exactly as the
DAG's assessment plans it; the summary is stored (`SummaryStore.write`) and the markers it now
covers are deleted. A marker written after the listing is left for the next refresh.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from lakecleaner.clock import wall_clock_ms
from lakecleaner.errors import LakeCleanerError
from lakecleaner.lake import Lake, Topic
from lakecleaner.policy import plan_topic
from lakecleaner.runs.digests import RECENT_RUNS
from lakecleaner.runs.records import TopicRuns
from lakecleaner.summaries.layout import Pending
from lakecleaner.summaries.model import TopicSummary, summary_of_plan
from lakecleaner.summaries.store import SummaryStore, marker_expiry_ms

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Refreshed:
    """What a refresh did: the summary stored afterwards (a newer one may have been kept), and how
    many markers it deleted."""

    summary: TopicSummary
    written: bool
    markers_deleted: int


def summary_store(lake: Lake) -> SummaryStore:
    return SummaryStore(lake.store, lake.config.storage.max_concurrency)


def build_summary(lake: Lake, name: str, now_ms: int) -> TopicSummary:
    """The topic's summary from its manifests, planned at `now_ms` (TopicNotFound without topic.json)."""
    metadata, _, metadata_bytes = lake.read_metadata(name)
    topic = Topic(lake, metadata)
    read = topic.read_manifests()
    consumed = lake.offsets.consumed_positions(name, sorted(read.manifests))
    cleaner = lake.cleaner_state.read(name)
    plan = plan_topic(name, read.manifests, topic.config, consumed, now_ms, cleaner=cleaner)
    runs = TopicRuns(lake.store, name, [], lake.config.storage.max_concurrency).newest(RECENT_RUNS)
    return summary_of_plan(plan, read.manifests, read.failures, metadata_bytes, topic.partitions, cleaner, runs)


def refresh_summary(lake: Lake, name: str, now_ms: int) -> Refreshed:
    """Rebuild and store the topic's summary, then delete the pending markers it covers."""
    summaries = summary_store(lake)
    pending = summaries.pending(name).get(name, Pending())
    built = build_summary(lake, name, now_ms)
    stored = summaries.write(built)
    expiry = marker_expiry_ms(lake.config.storage.retry_timeout_ms)
    return Refreshed(stored, stored is built, summaries.clear_markers(stored, pending, wall_clock_ms(), expiry))


def refresh_after_change(lake: Lake, name: str) -> Refreshed | None:
    """Refresh the topic's summary at the wall-clock time after something changed it (a DAG run's
    `report`, after its reports are stored; `compact` and `uncleanable clear` from the command
    line, which change the cleaner state no marker announces). A refresh that fails fails nothing:
    the views read the manifests instead (summaries.read); it is logged, and None returned."""
    try:
        refreshed = refresh_summary(lake, name, wall_clock_ms())
    except LakeCleanerError as exc:
        log.warning("topic %s: its summary was not refreshed (the views read its manifests): %s", name, exc)
        return None
    log.debug(
        "topic %s: summary %s (%d markers cleared)",
        name,
        "written" if refreshed.written else "kept (a newer one was stored meanwhile)",
        refreshed.markers_deleted,
    )
    return refreshed
