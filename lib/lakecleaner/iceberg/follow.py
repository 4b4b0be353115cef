"""A topic's tables follow its commits: the log table (`sync`) and, for a compacted topic, the
latest-values table (`latest`). The manifests are the source of truth; the tables may lag a
commit, never lead it, and a sync catches them up idempotently. `IcebergFollower` is the lake's
commit listener that does it (registered by `extras.open_lake`)."""

from __future__ import annotations

import logging
import threading
import uuid
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakecleaner.errors import TableUnreadable
from lakecleaner.iceberg.latest import sync_latest
from lakecleaner.iceberg.schema import LATEST_TABLE, LOG_TABLE, TableKind, table_folder
from lakecleaner.iceberg.sync import SyncResult, drop_tables, sync_partitions
from lakecleaner.log.layout import topic_prefix
from lakecleaner.log.leases import RunLeases
from lakecleaner.log.manifest import Manifest

if TYPE_CHECKING:
    from lakecleaner.lake import Lake, Topic

log = logging.getLogger(__name__)

#: One sync of a topic's tables at a time in a process (a compaction commits its partitions from
#: several threads); other processes' commits are met as lost races and redone.
_SYNCING: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)


@dataclass(frozen=True)
class TopicSync:
    """One sync of a topic's tables: the log table's, and how many partitions of the latest
    values changed (None: the topic is not compacted, so it has no such table)."""

    log: SyncResult
    latest_partitions: int | None

    def to_dict(self) -> dict[str, object]:
        return {**self.log.__dict__, "latest_partitions": self.latest_partitions}


def sync_tables(topic: Topic, manifests: Mapping[int, Manifest]) -> TopicSync:
    """Bring the topic's tables up to these partitions' committed manifests, with the topic's
    metadata and config as the caller holds them (no topic.json read here). A table whose current
    snapshot cannot be read (a file it reaches is gone) is rebuilt from every readable partition's
    manifest instead (`rebuild_tables`), with a warning."""
    try:
        return _synced(topic, manifests)
    except TableUnreadable as exc:
        log.warning("%s; rebuilding the tables of topic %s from its manifests", exc, topic.name)
        return rebuild_tables(topic)


def rebuild_tables(topic: Topic) -> TopicSync:
    """Drop the topic's tables from the catalog and make them anew from every readable partition's
    committed manifest (`iceberg sync --rebuild`). The log is not touched; the old tables' files
    are unreached, and gc deletes them after `file.delete.delay.ms`."""
    drop_tables(topic.lake, topic.name)
    read = topic.read_manifests()
    for partition, reason in sorted(read.failures.items()):
        log.warning("Iceberg tables of %s: partition %d is left out: %s", topic.name, partition, reason)
    return _synced(topic, read.manifests)


def _synced(topic: Topic, manifests: Mapping[int, Manifest]) -> TopicSync:
    lake = topic.lake
    kinds = [LOG_TABLE, LATEST_TABLE] if topic.config.compact else [LOG_TABLE]
    with _SYNCING[lake.store.location(topic_prefix(topic.name))], sync_leases(lake, topic.name, kinds):
        result = sync_partitions(lake, topic.name, manifests, topic.config.file_delete_delay_ms)
        return TopicSync(result, sync_latest(topic, manifests) if topic.config.compact else None)


def sync_leases(lake: Lake, topic: str, kinds: Sequence[TableKind]) -> RunLeases:
    """A lease on each table's folder while a sync writes files no metadata reaches yet: gc then
    leaves the table's unreached files alone (`iceberg.expiry`), as it leaves a running
    compaction's (`log/leases.py`), however long the sync takes."""
    prefixes = [table_folder(topic, kind) for kind in kinds]
    return RunLeases(lake.store, f"iceberg-sync-{uuid.uuid4().hex[:12]}", prefixes, lake.config.storage.max_concurrency)


def sync_topic(lake: Lake, topic: str) -> TopicSync:
    """Catch the topic's tables up with every readable partition's committed manifest (a
    partition whose manifest cannot be read is logged and left as it is).

    Args:
        lake: the lake, whose config names the catalog (`iceberg.catalog`, else the embedded one).
        topic: the topic; a compacted one has its latest-values table synced too.

    Returns:
        What the log table's sync did, and how many partitions of the latest values changed.

    Raises:
        TopicNotFound: the lake has no such topic.
        LakeCleanerError: pyiceberg is not installed (the `iceberg` extra), or the catalog refused.
    """
    opened = lake.topic(topic)
    read = opened.read_manifests()
    for partition, reason in sorted(read.failures.items()):
        log.warning("Iceberg tables of %s: partition %d is left as it is: %s", topic, partition, reason)
    return sync_tables(opened, read.manifests)


class IcebergFollower:
    """The lake's commit listener (`lake.CommitListener`) that moves a topic's Iceberg tables after
    each commit of a topic kept as tables (`iceberg.enabled`), with the topic's config the
    committing `Topic` already holds (no metadata read per commit)."""

    def committed(self, topic: Topic, partition: int, before: Manifest, after: Manifest) -> None:
        if topic.lake.config.iceberg_enabled(topic.name):
            follow_commit(topic, partition, before, after)


def _rows_read(manifest: Manifest) -> set[tuple[str, str | None]]:
    """The files a reader of the log reads, each with its deletion vector: what the tables hold
    (a file's key index is not read by them)."""
    return {
        (f.path, None if f.deletion_vector is None else f.deletion_vector.path)
        for s in manifest.segments
        for f in s.files
    }


def follow_commit(topic: Topic, partition: int, before: Manifest, after: Manifest) -> None:
    """Move the tables after a partition's manifest commit, when the commit changed its files or
    offsets, to the manifest committed when the sync runs (a sync that runs late never moves the
    tables to the older manifest its commit wrote: gc may have deleted files that one holds). The
    commit has happened whatever happens here: a failure is logged, and the tables lag until the
    next sync."""
    if _rows_read(before) == _rows_read(after) and (before.log_start_offset, before.next_offset) == (
        after.log_start_offset,
        after.next_offset,
    ):
        return
    try:
        sync_tables(topic, {partition: topic.partition(partition).manifest()})
    except Exception as exc:  # the log committed; the tables catch up at the next sync
        log.warning(
            "Iceberg tables of %s-%d lag its manifest (version %d): %s; `lakecleaner iceberg sync --topic %s` "
            "catches them up",
            topic.name,
            partition,
            after.version,
            exc,
            topic.name,
        )


__all__ = [
    "IcebergFollower",
    "TopicSync",
    "follow_commit",
    "rebuild_tables",
    "sync_leases",
    "sync_tables",
    "sync_topic",
]
