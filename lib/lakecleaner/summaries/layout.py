"""Where the per-topic summaries and their pending markers live (issue 50).

    _lakecleaner/summaries/topics/<topic>.json                   the topic's summary
    _lakecleaner/summaries/pending/<topic>/<partition>.<version> a commit of that manifest version began
    _lakecleaner/summaries/pending/<topic>/config.<digest>       a write of topic.json with that content began

A marker is written before the object it announces, so a reader that finds a marker newer than
the summary knows the summary may be stale for it. The keys are named in `log/layout.py` (the log
writes the markers); here, what a listing of them says. Pure: names in, names out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from lakecleaner.log.layout import PENDING_PREFIX

_PARTITION_MARKER = re.compile(r"(\d{1,9})\.(\d{1,18})")
_CONFIG_MARKER = re.compile(r"config\.([0-9a-f]{16})")


@dataclass(frozen=True)
class Marker:
    """One pending marker: of a partition's manifest `version`, or of a topic.json `digest`."""

    key: str
    mtime_ms: int
    partition: int | None = None
    version: int | None = None
    digest: str | None = None


@dataclass
class Pending:
    """A topic's pending markers."""

    markers: list[Marker] = field(default_factory=list)

    def announced(self) -> dict[int, int]:
        """The highest manifest version announced, by partition (partitions with no marker left out)."""
        found: dict[int, int] = {}
        for m in self.markers:
            if m.partition is not None and m.version is not None:
                found[m.partition] = max(m.version, found.get(m.partition, 0))
        return found

    @property
    def digests(self) -> set[str]:
        """The topic.json contents announced."""
        return {m.digest for m in self.markers if m.digest is not None}


def parse_marker(key: str, mtime_ms: int) -> tuple[str, Marker] | None:
    """A key under PENDING_PREFIX as (topic, marker); None for a key of another shape (nothing of
    ours writes one: a reader then trusts the summary no less than without it)."""
    if not key.startswith(PENDING_PREFIX):
        return None
    topic, _, name = key[len(PENDING_PREFIX) :].partition("/")
    if not topic or "/" in name:
        return None
    if match := _PARTITION_MARKER.fullmatch(name):
        return topic, Marker(key, mtime_ms, partition=int(match[1]), version=int(match[2]))
    if match := _CONFIG_MARKER.fullmatch(name):
        return topic, Marker(key, mtime_ms, digest=match[1])
    return None
