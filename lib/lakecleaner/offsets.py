"""Consumer groups' committed offsets (Kafka's __consumer_offsets), stored in the lake.

One JSON object per group at `_consumer_offsets/<group>.json`. As in Kafka, a committed
offset is the next offset the group will consume: every record below it has been consumed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ConsumedPosition:
    """The minimum committed offset of one partition over every subscribed group (KIP-68).

    `offset` is None when it is unknown: a group's offsets could not be read, or a subscribed
    group has no committed offset for this partition. Unknown is never treated as zero or as
    "everything consumed": consumed retention is skipped for the partition. `groups` maps each
    subscribed group to its committed offset (None when missing or unreadable); `reason` says
    in words why the offset is unknown. With no subscribed group at all, `offset` is None and
    `reason` says so: nothing is consumed by nobody.
    """

    offset: int | None
    groups: Mapping[str, int | None] = field(default_factory=dict)
    reason: str | None = None

    @property
    def known(self) -> bool:
        return self.offset is not None

    @property
    def holding_groups(self) -> tuple[str, ...]:
        """Groups whose committed offset equals the minimum (they hold consumed retention back)."""
        if self.offset is None:
            return tuple(g for g, o in self.groups.items() if o is None)
        return tuple(g for g, o in self.groups.items() if o == self.offset)
