"""Consumer groups' committed offsets as values: one group's offset of one partition, and what a
read of a Kafka cluster's groups gave (KIP-68: consumed retention deletes only below the lowest
offset every subscribed group committed). `offsets.OffsetStore` keeps them in the lake
(`_consumer_offsets/`) or reads them from a cluster (`io/kafka/groups.py`); both take these types
from here, below either."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class CommittedOffset:
    """A group's committed offset of a partition (the next record it will read), when it was
    committed (epoch ms; 0: unknown) and the metadata committed with it."""

    offset: int
    commit_ms: int
    metadata: str = ""


@dataclass(frozen=True)
class ClusterRead:
    """Groups' committed offsets read from a Kafka cluster (a partition without one left out), the
    groups whose offsets cannot be used with why, and the delta that makes them lake offsets."""

    offsets: dict[str, Mapping[int, CommittedOffset]]
    failures: dict[str, str]
    offset_delta: int = 0


__all__ = ["ClusterRead", "CommittedOffset"]
