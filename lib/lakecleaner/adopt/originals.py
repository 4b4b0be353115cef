"""The sink's original files once adopted (issue 49): recorded at adoption, deleted by gc.

Each adoption run records, per topic in `_lakecleaner/adopt/<topic>.json` (a conditional
update), the source folder and every object of the bundles it appended, with the offset the
partition's log must reach for the object's records to be in it and the time of the append. gc
deletes an object once the log reaches that offset (the segments that replaced it are committed)
and `file.delete.delay.ms` has passed since, as Kafka deletes a segment file `file.delete.delay.ms`
after it left the log; then it forgets it. An adoption run with `--keep-originals` records
nothing, and nothing of that run's is deleted. A record that does not parse is reported and
nothing is deleted: storage is untrusted, and a deletion is never made on metadata that looks wrong.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakecleaner.errors import LakeCleanerError, ObjectNotFound
from lakecleaner.io import open_store
from lakecleaner.io.strict_json import Malformed, load_object
from lakecleaner.names import validate_topic_name

if TYPE_CHECKING:
    from lakecleaner.lake import Lake

log = logging.getLogger(__name__)

ORIGINALS_PREFIX = "_lakecleaner/adopt/"


class CorruptOriginals(LakeCleanerError):
    """A topic's record of adopted originals that does not parse."""


@dataclass(frozen=True)
class Original:
    """One object of the sink's that a run adopted: its key under the source folder, its
    partition, the offset the log must reach to hold its records, and when it was adopted."""

    key: str
    partition: int
    through_offset: int
    adopted_ms: int

    def to_dict(self) -> dict[str, object]:
        return {
            "key": self.key,
            "partition": self.partition,
            "through_offset": self.through_offset,
            "adopted_ms": self.adopted_ms,
        }


def originals_key(topic: str) -> str:
    """The topic's record of adopted originals."""
    validate_topic_name(topic)
    return f"{ORIGINALS_PREFIX}{topic}.json"


def record_originals(lake: Lake, topic: str, source: str, originals: Sequence[Original]) -> None:
    """Add `originals` (of the source folder `source`) to the topic's record."""
    if not originals:
        return

    def change(data: bytes | None) -> bytes:
        sources = {} if data is None else _parse(topic, data)
        known = {o.key for o in sources.get(source, [])}
        sources[source] = [*sources.get(source, []), *(o for o in originals if o.key not in known)]
        return _encode(sources)

    lake.store.update(originals_key(topic), change, what=f"the adopted originals of {topic}")


def delete_due_originals(lake: Lake, topic: str, now_ms: int, *, dry_run: bool = False) -> list[str]:
    """Delete the adopted originals whose records the log holds and whose delay has passed
    (the rule above), and forget them; returns their locations."""
    delay = lake.topic(topic).config.file_delete_delay_ms
    next_offsets = {log.partition: log.manifest().next_offset for log in lake.topic(topic).partition_logs()}

    def due(original: Original) -> bool:
        reached = next_offsets.get(original.partition, -1) >= original.through_offset
        return reached and original.adopted_ms + delay <= now_ms

    try:
        data = lake.store.read(originals_key(topic))
    except ObjectNotFound:
        return []
    deleted: list[str] = []
    for source, originals in _parse(topic, data).items():
        gone = [o.key for o in originals if due(o)]
        if gone and not dry_run:
            store = open_store(source, lake.config.storage)
            store.delete_many(gone)
        deleted += [f"{source.rstrip('/')}/{key}" for key in gone]
    if deleted and not dry_run:
        gone_keys = set(deleted)

        def forget(current: bytes | None) -> bytes | None:
            if current is None:
                return None
            left = {
                s: [o for o in found if f"{s.rstrip('/')}/{o.key}" not in gone_keys]
                for s, found in _parse(topic, current).items()
            }
            return _encode({s: found for s, found in left.items() if found})

        lake.store.update(originals_key(topic), forget, what=f"the adopted originals of {topic}")
    return deleted


def _encode(sources: dict[str, list[Original]]) -> bytes:
    body = {"sources": [{"uri": s, "originals": [o.to_dict() for o in found]} for s, found in sorted(sources.items())]}
    return json.dumps(body, separators=(",", ":")).encode()


def _parse(topic: str, data: bytes) -> dict[str, list[Original]]:
    try:
        fields = load_object(data)
        out: dict[str, list[Original]] = {}
        for source in fields.objects("sources"):
            out[source.text("uri")] = [
                Original(o.text("key"), o.integer("partition"), o.integer("through_offset"), o.integer("adopted_ms"))
                for o in source.objects("originals")
            ]
        return out
    except Malformed as exc:
        raise CorruptOriginals(
            f"{ORIGINALS_PREFIX}{topic}.json is damaged ({exc}): no original file is deleted until it is "
            "put right or removed (removing it keeps every original)"
        ) from exc


__all__ = ["CorruptOriginals", "Original", "delete_due_originals", "originals_key", "record_originals"]
