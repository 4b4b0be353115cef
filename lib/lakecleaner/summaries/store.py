"""Reading and writing topics' summaries and their pending markers (issue 50).

A summary is replaced with a conditional write and never by one that summarises any partition
at an older manifest version (`TopicSummary.covers`): two refreshes racing leave the newer. A
marker is deleted only once a stored summary covers it, or when it is older than any commit can
take (`marker_expiry_ms`): its commit never landed.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from lakecleaner.errors import CorruptSummary, LakeCleanerError, ObjectNotFound
from lakecleaner.io import ObjectStore
from lakecleaner.io.concurrent import map_ordered
from lakecleaner.log.layout import PENDING_PREFIX, pending_prefix, summary_key
from lakecleaner.summaries.layout import Marker, Pending, parse_marker
from lakecleaner.summaries.model import TopicSummary

log = logging.getLogger(__name__)

#: A pending marker older than this whose commit no summary covers belongs to a commit that never
#: landed (at least, as long as `lake.storage.retry_timeout_ms` is shorter: see `marker_expiry_ms`).
MIN_MARKER_EXPIRY_MS = 3_600_000


def marker_expiry_ms(retry_timeout_ms: int) -> int:
    """How old an uncovered marker must be to be deleted: an hour, or twice the time a write may
    be retried for when that is longer (a commit writes its manifest within it after its marker)."""
    return max(MIN_MARKER_EXPIRY_MS, 2 * retry_timeout_ms)


def covered(marker: Marker, summary: TopicSummary) -> bool:
    """Whether `summary` already shows what `marker` announced: the partition at that manifest
    version or later, or the topic.json of that content."""
    if marker.digest is not None:
        return marker.digest == summary.config_digest
    version = summary.version(marker.partition) if marker.partition is not None else None
    return version is not None and marker.version is not None and marker.version <= version


class SummaryStore:
    """The lake's topic summaries and pending markers."""

    def __init__(self, store: ObjectStore, max_workers: int) -> None:
        self.store = store
        self.max_workers = max_workers

    def read(self, topic: str) -> TopicSummary | None:
        """The topic's summary, None when it has none; CorruptSummary when it cannot be parsed."""
        data = self._fetch(topic)
        return None if data is None else self._parse(topic, data)

    def announced_version(self, topic: str, partition: int) -> int:
        """The highest manifest version of the partition that the topic's summary or a pending
        marker names (0: none; a damaged summary names none a view would trust). `repair` gives a
        rebuilt manifest a higher one, so that no view takes a stale entry for a current one."""
        markers = self.pending(topic).get(topic)
        marked = markers.announced().get(partition, 0) if markers else 0
        try:
            summary = self.read(topic)
        except LakeCleanerError:
            summary = None
        return max(marked, (summary and summary.version(partition)) or 0)

    def _fetch(self, topic: str) -> bytes | None:
        try:
            return self.store.read(summary_key(topic))
        except ObjectNotFound:
            return None

    def _parse(self, topic: str, data: bytes) -> TopicSummary:
        return TopicSummary.from_json(data, topic, self.store.location(summary_key(topic)))

    def read_many(self, topics: Sequence[str]) -> dict[str, TopicSummary | str | None]:
        """`read` for many topics: a summary, None (none yet), or why it is unusable. The objects are
        read concurrently and parsed one after another (parsing is CPU: threads would only contend)."""

        def fetch(topic: str) -> bytes | str | None:
            try:
                return self._fetch(topic)
            except LakeCleanerError as exc:
                return str(exc)

        def parse(topic: str, data: bytes | str | None) -> TopicSummary | str | None:
            if not isinstance(data, bytes):
                return data
            try:
                return self._parse(topic, data)
            except LakeCleanerError as exc:
                return str(exc)

        fetched = map_ordered(fetch, topics, self.max_workers)
        return {topic: parse(topic, data) for topic, data in zip(topics, fetched, strict=True)}

    def pending(self, topic: str | None = None) -> dict[str, Pending]:
        """The pending markers by topic: of the whole lake (one listing per 1,000 markers), or of one topic."""
        found: dict[str, Pending] = {}
        for info in self.store.list(PENDING_PREFIX if topic is None else pending_prefix(topic)):
            parsed = parse_marker(info.key, info.mtime_ms)
            if parsed is not None:
                found.setdefault(parsed[0], Pending()).markers.append(parsed[1])
        return found

    def write(self, summary: TopicSummary) -> TopicSummary:
        """Store `summary` unless the stored one covers a partition at a newer manifest version;
        returns the summary stored afterwards. A damaged stored summary is replaced."""
        kept: list[TopicSummary] = []

        def change(data: bytes | None) -> bytes | None:
            kept.clear()
            if data is not None:
                where = self.store.location(summary_key(summary.topic))
                try:
                    current = TopicSummary.from_json(data, summary.topic, where)
                except CorruptSummary as exc:
                    log.warning("%s: replacing it", exc)
                else:
                    if not summary.covers(current):
                        kept.append(current)
                        return None
            return summary.to_json()

        self.store.update(summary_key(summary.topic), change, what=f"the summary of topic {summary.topic}")
        return kept[0] if kept else summary

    def clear_markers(self, summary: TopicSummary, pending: Pending, now_ms: int, expiry_ms: int) -> int:
        """Delete the markers `summary` (as stored) covers, and those older than `expiry_ms`; how many."""
        done = [m.key for m in pending.markers if covered(m, summary) or now_ms - m.mtime_ms > expiry_ms]
        if done:
            self.store.delete_many(done)
        return len(done)
