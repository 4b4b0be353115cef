"""The sink's original files once adopted (issue 49): recorded at adoption, deleted by gc.

Each adoption run records, per topic in `_lakecleaner/adopt/<topic>.json` (a conditional
update), the source folder and every object of the bundles it appended, with the offset the
partition's log must reach for the object's records to be in it and the time of the append. gc
deletes an object once the log reaches that offset (the segments that replaced it are committed)
and `file.delete.delay.ms` has passed since, as Kafka deletes a segment file `file.delete.delay.ms`
after it left the log; then it forgets it. An adoption run with `--keep-originals` records the
source folder but no original, so nothing of that run's is deleted. The erasure audit reads the
source folders recorded here (`adopt.search`). A record that does not parse is reported and
nothing is deleted: storage is untrusted, and a deletion is never made on metadata that looks wrong.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakecleaner.config.adopt import ConnectSource
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


@dataclass(frozen=True)
class AdoptedSource:
    """A sink folder a topic was adopted from: how it was read, and its originals gc is to delete."""

    source: ConnectSource
    originals: tuple[Original, ...]


def record_originals(lake: Lake, topic: str, source: ConnectSource, originals: Sequence[Original]) -> None:
    """Record the source folder (how it is read, for the erasure audit) and add `originals` (none
    with `keep_originals`) to the topic's record."""

    def change(data: bytes | None) -> bytes | None:
        sources = {} if data is None else read_sources(topic, data)
        before = sources.get(source.uri)
        known = {o.key for o in before.originals} if before else set()
        added = tuple(o for o in originals if o.key not in known and not source.keep_originals)
        if before is not None and before.source == source and not added:
            return None
        sources[source.uri] = AdoptedSource(source, (before.originals if before else ()) + added)
        return _encode(sources)

    lake.store.update(originals_key(topic), change, what=f"the adopted originals of {topic}")


def adopted_sources(lake: Lake, topic: str) -> list[AdoptedSource]:
    """The sink folders the topic was adopted from, with their originals not deleted yet."""
    try:
        return list(read_sources(topic, lake.store.read(originals_key(topic))).values())
    except ObjectNotFound:
        return []


def delete_due_originals(lake: Lake, topic: str, now_ms: int, *, dry_run: bool = False) -> list[str]:
    """Delete the adopted originals whose records the log holds and whose delay has passed
    (the rule above), and forget them; returns their locations."""
    sources = adopted_sources(lake, topic)
    if not any(adopted.originals for adopted in sources):
        return []  # a topic never adopted (every gc run asks): no manifest is read
    log_topic = lake.topic(topic)
    delay = log_topic.config.file_delete_delay_ms
    next_offsets = {log.partition: log.manifest().next_offset for log in log_topic.partition_logs()}

    def due(original: Original) -> bool:
        reached = next_offsets.get(original.partition, -1) >= original.through_offset
        return reached and original.adopted_ms + delay <= now_ms

    gone: dict[str, set[str]] = {}
    for adopted in sources:
        keys = [o.key for o in adopted.originals if due(o)]
        if keys and not dry_run:
            open_store(adopted.source.uri, lake.config.storage).delete_many(keys)
        if keys:
            gone[adopted.source.uri] = set(keys)
    if gone and not dry_run:

        def forget(current: bytes | None) -> bytes | None:
            if current is None:
                return None
            sources = read_sources(topic, current)
            for uri, keys in gone.items():
                if uri in sources:
                    left = tuple(o for o in sources[uri].originals if o.key not in keys)
                    sources[uri] = AdoptedSource(sources[uri].source, left)
            return _encode(sources)

        lake.store.update(originals_key(topic), forget, what=f"the adopted originals of {topic}")
    return [f"{uri.rstrip('/')}/{key}" for uri, keys in gone.items() for key in sorted(keys)]


def _encode(sources: dict[str, AdoptedSource]) -> bytes:
    body = {"sources": [_source_dict(a) for _, a in sorted(sources.items())]}
    return json.dumps(body, separators=(",", ":")).encode()


def _source_dict(adopted: AdoptedSource) -> dict[str, object]:
    s = adopted.source
    return {
        "uri": s.uri,
        "format": s.format,
        "key_field": s.key_field,
        "tombstone_partition": s.tombstone_partition,
        "keep_originals": s.keep_originals,
        "originals": [o.to_dict() for o in adopted.originals],
    }


def read_sources(topic: str, data: bytes) -> dict[str, AdoptedSource]:
    """The topic's record, by source folder; CorruptOriginals when it does not parse."""
    try:
        fields = load_object(data)
        out: dict[str, AdoptedSource] = {}
        for entry in fields.objects("sources"):
            source = ConnectSource(
                uri=entry.text("uri"),
                format=entry.optional_text("format"),
                key_field=entry.optional_text("key_field"),
                tombstone_partition=entry.text("tombstone_partition"),
                keep_originals=entry.flag("keep_originals"),
            )
            originals = tuple(
                Original(o.text("key"), o.integer("partition"), o.integer("through_offset"), o.integer("adopted_ms"))
                for o in entry.objects("originals")
            )
            out[source.uri] = AdoptedSource(source, originals)
        return out
    except Malformed as exc:
        raise CorruptOriginals(
            f"{ORIGINALS_PREFIX}{topic}.json is damaged ({exc}): no original file is deleted until it is "
            "put right or removed (removing it keeps every original)"
        ) from exc


__all__ = [
    "AdoptedSource",
    "CorruptOriginals",
    "Original",
    "adopted_sources",
    "delete_due_originals",
    "originals_key",
    "read_sources",
    "record_originals",
]
