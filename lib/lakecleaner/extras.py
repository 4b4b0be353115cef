"""A lake opened for work, with the installed extras wired in: where a process is assembled (the
CLI, the DAG's tasks, the Spark job) it opens its lake with `open_lake`, which registers the commit
listeners of the extras this environment has (`Lake(listeners=…)`), so that `lake.py` imports none
of them — as pyiceberg's catalogs are chosen at one seam, not imported by the tables.

- **Iceberg** (`lakecleaner[iceberg]`): when the lake keeps any topic as Iceberg tables
  (`iceberg.enabled`, the lake's or a topic's), `iceberg.follow.IcebergFollower` moves them after
  every commit. Without pyiceberg the commits stand, each logs that its tables were not moved, and
  `lakecleaner iceberg sync` says what is missing.
"""

from __future__ import annotations

import logging

from lakecleaner.config import LakeConfig
from lakecleaner.lake import CommitListener, Lake, Topic
from lakecleaner.log.manifest import Manifest

log = logging.getLogger(__name__)


def open_lake(target: str | LakeConfig | None = None) -> Lake:
    """`Lake.open(target)` with the installed extras' commit listeners (the rules above).

    Args:
        target: as `Lake.open` takes it: a URI, a `LakeConfig`, or None for the config file.

    Returns:
        The lake, its commits followed by the installed extras.

    Raises:
        ConfigError: the config file is missing, unreadable or invalid.
        StorageError: the URI's scheme is neither s3:// nor file://.
    """
    lake = Lake.open(target)
    return Lake(lake.store, lake.config, installed_listeners(lake.config))


def installed_listeners(config: LakeConfig) -> tuple[CommitListener, ...]:
    """The commit listeners a lake of `config` gets in this environment."""
    if not (config.iceberg.enabled or any(spec.iceberg for spec in config.topics.values())):
        return ()
    try:
        from lakecleaner.iceberg.follow import IcebergFollower
    except ImportError as exc:
        return (_ExtraMissing(str(exc)),)
    return (IcebergFollower(),)


class _ExtraMissing:
    """In place of the Iceberg follower when pyiceberg is not installed: each commit of a topic kept
    as tables says its tables were not moved."""

    def __init__(self, why: str) -> None:
        self.why = why

    def committed(self, topic: Topic, partition: int, before: Manifest, after: Manifest) -> None:
        if topic.lake.config.iceberg_enabled(topic.name):
            log.warning("Iceberg table of %s-%d not moved: %s (the `iceberg` extra)", topic.name, partition, self.why)


__all__ = ["installed_listeners", "open_lake"]
