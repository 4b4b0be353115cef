"""The lake's key layout: where each topic's and partition's objects live.

    topics/<topic>/topic.json                       the topic's metadata (partition count, overrides)
    topics/<topic>/partition=<p>/manifest.json      the partition's committed log
    topics/<topic>/partition=<p>/segments/…         segment files
    topics/<topic>/partition=<p>/_staging/…         a run's files and its lease, before they commit
    topics/<topic>/partition=<p>/_commits/…         one record per acknowledged file (log/commits.py)
    _lakecleaner/summaries/topics/<topic>.json      the topic's summary (summaries/)
    _lakecleaner/summaries/pending/<topic>/…        markers a commit or a topic.json write leaves first

Pure: names in, names out; nothing here reads or writes storage.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Protocol, TypeVar

#: The folder that holds every topic's folder.
TOPICS_PREFIX = "topics/"

#: A partition's manifest, relative to the partition's folder.
MANIFEST_NAME = "manifest.json"

_PARTITION_FOLDER = re.compile(r"partition=(\d{1,9})(?:/|$)")


def topic_prefix(topic: str) -> str:
    """The folder of every object of a topic."""
    return f"{TOPICS_PREFIX}{topic}/"


def topic_metadata_key(topic: str) -> str:
    """The topic's metadata object (`topic.json`)."""
    return f"{topic_prefix(topic)}topic.json"


def partition_prefix(topic: str, partition: int) -> str:
    """The folder of every object of one partition."""
    return f"{topic_prefix(topic)}partition={partition}/"


def partition_numbers(folders: Iterable[str]) -> list[int]:
    """The partitions of a topic's folder names (`list_folders(topic_prefix(t))`): every
    `partition=<p>` folder, sorted; any other name (a stray folder) is left out."""
    return sorted(int(m.group(1)) for f in folders if (m := _PARTITION_FOLDER.fullmatch(f.rstrip("/") + "/")))


class _Keyed(Protocol):
    @property
    def key(self) -> str: ...


K = TypeVar("K", bound=_Keyed)


def by_partition(topic: str, listed: Iterable[K]) -> dict[int, list[K]]:
    """Listed things (objects, unfinished writes) under the topic's folder, by the partition whose
    folder holds them; the others (topic.json) are left out."""
    prefix = topic_prefix(topic)
    found: dict[int, list[K]] = {}
    for item in listed:
        m = _PARTITION_FOLDER.match(item.key, len(prefix)) if item.key.startswith(prefix) else None
        if m and item.key[m.end() - 1] == "/":
            found.setdefault(int(m.group(1)), []).append(item)
    return found


#: The folders under a topic's prefix that its Iceberg tables own (`iceberg.schema`: the log
#: table's `metadata/` and `data/`, the latest values' `latest/`).
TABLE_FOLDER_NAMES = ("metadata", "data", "latest")


# The summaries' keys (issue 50; summaries/layout.py reads the markers): a marker is written
# before the object it announces, so a reader finding one newer than the summary knows it may be stale.

SUMMARIES_PREFIX = "_lakecleaner/summaries/"
SUMMARY_PREFIX = f"{SUMMARIES_PREFIX}topics/"
PENDING_PREFIX = f"{SUMMARIES_PREFIX}pending/"


def summary_key(topic: str) -> str:
    """The topic's summary object."""
    return f"{SUMMARY_PREFIX}{topic}.json"


def pending_prefix(topic: str) -> str:
    """The folder of the topic's pending markers."""
    return f"{PENDING_PREFIX}{topic}/"


def partition_marker_key(topic: str, partition: int, version: int) -> str:
    """The marker a commit of `version` of the partition's manifest writes first."""
    return f"{pending_prefix(topic)}{partition}.{version}"


def config_digest(metadata: bytes) -> str:
    """A topic.json's content, in 16 hex digits: what names its marker and what a summary records."""
    return hashlib.sha256(metadata).hexdigest()[:16]


def config_marker_key(topic: str, metadata: bytes) -> str:
    """The marker a write of `metadata` as the topic's topic.json writes first."""
    return f"{pending_prefix(topic)}config.{config_digest(metadata)}"


__all__ = [
    "MANIFEST_NAME",
    "PENDING_PREFIX",
    "SUMMARIES_PREFIX",
    "SUMMARY_PREFIX",
    "TABLE_FOLDER_NAMES",
    "TOPICS_PREFIX",
    "by_partition",
    "config_digest",
    "config_marker_key",
    "partition_marker_key",
    "partition_numbers",
    "partition_prefix",
    "pending_prefix",
    "summary_key",
    "topic_metadata_key",
    "topic_prefix",
]
