"""The ledger of the sink's files a topic adopted (issues 49, 75): recorded at adoption, checked by
every later run, deleted by gc.

Each adoption run records, per topic in `_lakecleaner/adopt/<topic>.json` (a conditional update,
written before the append it describes), the source folder and every object of the bundles it
appends: the offset the partition's log must reach for the object's records to be in it, the time,
the object's identity as the listing showed it (size and tag: an S3 ETag, a local file's inode,
size and modification time), the lake offsets it supplied, and whether gc keeps it
(`keep_originals`). Written before the append, an entry whose offset the log has not reached is
of an append that did not land (a crash): the next run reads the object again, and gc leaves it.

What the ledger decides:
- **Adopted before**: an object whose identity is the recorded one and whose offset the log
  reached is not read again.
- **Changed after adoption**: one whose identity differs (rewritten by a re-delivery, or by a topic
  created again in Kafka) is a conflict: reported, kept, never deleted, and its partition is not
  adopted further until the file is moved aside or preferred (`--prefer`).
- **gc** deletes an original (not kept) once the log reaches its offset, `file.delete.delay.ms`
  has passed since, and a fresh listing shows it is still that object; the DELETE itself carries
  If-Match with the listed ETag where the store honours it (AWS S3, SeaweedFS; probed), so an
  object written again after the listing is kept too (`ObjectStore.delete_unchanged`; a local
  folder compares a fresh stat; a store without conditional deletes leaves a listing's window);
  then it forgets it. An object that changed is kept and reported; one already gone is forgotten.
- **Tracked from**: entries written before identities were kept (no size) hold no identity; per
  partition, the offset from which the ledger tracks objects says below which an object unknown
  to it was adopted the earlier way (by its offset alone).

The erasure audit reads the source folders recorded here (`adopt.search`). A record that does not
parse is reported and nothing is deleted: storage is untrusted, and a deletion is never made on
metadata that looks wrong.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from lakecleaner.config.adopt import ConnectSource
from lakecleaner.errors import LakeCleanerError, ObjectNotFound
from lakecleaner.io import open_store
from lakecleaner.io.strict_json import Fields, Malformed, load_object
from lakecleaner.names import validate_topic_name

if TYPE_CHECKING:
    from lakecleaner.lake import Lake

log = logging.getLogger(__name__)

ORIGINALS_PREFIX = "_lakecleaner/adopt/"
#: Gaps kept per partition, the newest.
GAPS_KEPT = 10_000


class CorruptOriginals(LakeCleanerError):
    """A topic's record of adopted originals that does not parse."""


@dataclass(frozen=True)
class Original:
    """One object of the sink's that a run adopted: its key under the source folder, its
    partition, the offset the log must reach to hold its records, when it was adopted, its
    identity as listed (size, tag; size -1: recorded before identities were kept), the lake
    offsets it supplied (None: none, e.g. a re-delivery of records adopted before), and whether gc
    keeps it."""

    key: str
    partition: int
    through_offset: int
    adopted_ms: int
    size: int = -1
    tag: str = ""
    first_offset: int | None = None
    last_offset: int | None = None
    kept: bool = False

    def to_dict(self) -> dict[str, object]:
        return {
            "key": self.key,
            "partition": self.partition,
            "through_offset": self.through_offset,
            "adopted_ms": self.adopted_ms,
            "size": self.size,
            "tag": self.tag,
            "first_offset": self.first_offset,
            "last_offset": self.last_offset,
            "kept": self.kept,
        }

    def is_object(self, size: int, tag: str, mtime_ms: int) -> bool:
        """Whether an object listed with this size, tag and modification time is the one adopted
        (for an entry without identity: one not written since it was adopted)."""
        if self.size < 0:
            return mtime_ms <= self.adopted_ms
        return size == self.size and tag == self.tag

    def changed(self, size: int, tag: str, mtime_ms: int) -> str:
        """How the object listed differs from the one adopted, in words."""
        if self.size < 0:
            return f"written again after it was adopted (modified {mtime_ms} > adopted {self.adopted_ms})"
        return f"{size} bytes, tag {tag!r} now; {self.size} bytes, tag {self.tag!r} when adopted"


def originals_key(topic: str) -> str:
    """The topic's record of adopted originals."""
    validate_topic_name(topic)
    return f"{ORIGINALS_PREFIX}{topic}.json"


@dataclass(frozen=True)
class AdoptedSource:
    """A sink folder a topic was adopted from: how it was read, the objects adopted from it (not
    deleted yet), and per partition the offset from which the ledger tracks every object."""

    source: ConnectSource
    originals: tuple[Original, ...]
    tracked_from: Mapping[int, int] = field(default_factory=dict)
    #: Per partition, the offsets no file held when they were adopted past (the newest
    #: `GAPS_KEPT`): a file that fills one later arrived after its offsets were passed.
    gaps: Mapping[int, tuple[tuple[int, int], ...]] = field(default_factory=dict)

    def by_key(self) -> dict[str, Original]:
        return {o.key: o for o in self.originals}


def record_originals(
    lake: Lake,
    topic: str,
    source: ConnectSource,
    originals: Sequence[Original],
    tracked_from: Mapping[int, int],
    gaps: Mapping[int, Sequence[tuple[int, int]]] | None = None,
) -> None:
    """Record the source folder (how it is read, for the erasure audit), `originals` (an entry of
    the same key is replaced: the object adopted again after an append that did not land, or
    preferred after it changed), for partitions the ledger does not track yet the offset it tracks
    them from, and the gaps an adoption left."""

    def change(data: bytes | None) -> bytes | None:
        sources = {} if data is None else read_sources(topic, data)
        before = sources.get(source.uri)
        known = before.by_key() if before else {}
        known.update({o.key: o for o in originals})
        tracked = {**tracked_from, **(before.tracked_from if before else {})}
        merged = dict(before.gaps) if before else {}
        for p, added in (gaps or {}).items():
            merged[p] = (*merged.get(p, ()), *added)[-GAPS_KEPT:]
        updated = AdoptedSource(source, tuple(known.values()), tracked, {p: g for p, g in merged.items() if g})
        if before == updated:
            return None
        sources[source.uri] = updated
        return _encode(sources)

    lake.store.update(originals_key(topic), change, what=f"the adopted originals of {topic}")


def adopted_sources(lake: Lake, topic: str) -> list[AdoptedSource]:
    """The sink folders the topic was adopted from, with their originals not deleted yet."""
    try:
        return list(read_sources(topic, lake.store.read(originals_key(topic))).values())
    except ObjectNotFound:
        return []


@dataclass(frozen=True)
class SweptOriginals:
    """What gc did with the adopted originals: deleted (their locations), and kept because they
    changed after adoption (each with how)."""

    deleted: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)


def delete_due_originals(lake: Lake, topic: str, now_ms: int, *, dry_run: bool = False) -> SweptOriginals:
    """Delete the adopted originals whose records the log holds, whose delay has passed and that a
    fresh listing shows unchanged (the rules above), and forget them and those already gone."""
    sources = adopted_sources(lake, topic)
    if not any(not o.kept for adopted in sources for o in adopted.originals):
        return SweptOriginals()  # a topic never adopted, or keeping its originals: no manifest is read
    log_topic = lake.topic(topic)
    delay = log_topic.config.file_delete_delay_ms
    next_offsets = {log.partition: log.manifest().next_offset for log in log_topic.partition_logs()}

    def due(original: Original) -> bool:
        reached = next_offsets.get(original.partition, -1) >= original.through_offset
        return not original.kept and reached and original.adopted_ms + delay <= now_ms

    swept = SweptOriginals()
    gone: dict[str, set[str]] = {}
    for adopted in sources:
        store = open_store(adopted.source.uri, lake.config.storage)
        candidates = [o for o in adopted.originals if due(o)]
        if not candidates:
            continue
        listed = {info.key: info for info in store.list("")}
        same, absent = [], []
        for original in candidates:
            info = listed.get(original.key)
            if info is None:
                absent.append(original.key)
            elif original.is_object(info.size, info.version_tag, info.mtime_ms):
                same.append(original.key)
            else:
                where = store.location(original.key)
                swept.changed.append(f"{where}: {original.changed(info.size, info.version_tag, info.mtime_ms)}")
        if same and not dry_run:
            rewritten: set[str] = set(store.delete_unchanged({key: listed[key].version_tag for key in same}))
            swept.changed.extend(
                f"{store.location(key)}: written again since it was listed" for key in sorted(rewritten)
            )
            same = [key for key in same if key not in rewritten]
        swept.deleted.extend(store.location(key) for key in sorted(same))
        gone[adopted.source.uri] = set(same) | set(absent)
    for changed in swept.changed:
        log.warning("adopted original of %s kept: it changed after it was adopted: %s", topic, changed)
    if any(gone.values()) and not dry_run:

        def forget(current: bytes | None) -> bytes | None:
            if current is None:
                return None
            sources = read_sources(topic, current)
            for uri, keys in gone.items():
                if uri in sources:
                    left = tuple(o for o in sources[uri].originals if o.key not in keys)
                    sources[uri] = replace(sources[uri], originals=left)
            return _encode(sources)

        lake.store.update(originals_key(topic), forget, what=f"the adopted originals of {topic}")
    return swept


def _encode(sources: dict[str, AdoptedSource]) -> bytes:
    body = {"sources": [_source_dict(a) for _, a in sorted(sources.items())]}
    return json.dumps(body, separators=(",", ":")).encode()


def _source_dict(adopted: AdoptedSource) -> dict[str, object]:
    s = adopted.source
    return {
        "tracked_from": {str(p): o for p, o in sorted(adopted.tracked_from.items())},
        "gaps": {str(p): [list(g) for g in gaps] for p, gaps in sorted(adopted.gaps.items())},
        "uri": s.uri,
        "format": s.format,
        "key_field": s.key_field,
        "tombstone_partition": s.tombstone_partition,
        "keep_originals": s.keep_originals,
        "deletes": s.deletes,
        "originals": [o.to_dict() for o in adopted.originals],
    }


def _original(f: Fields) -> Original:
    return Original(
        f.text("key"),
        f.integer("partition"),
        f.integer("through_offset"),
        f.integer("adopted_ms"),
        f.integer("size", lo=-1, default=-1),
        f.text("tag", default="", max_chars=1024),
        f.optional_int("first_offset"),
        f.optional_int("last_offset"),
        f.flag("kept", default=False),
    )


def _gaps(fields: Fields, name: str) -> tuple[tuple[int, int], ...]:
    found = fields.raw[name]
    if not isinstance(found, list) or not all(
        isinstance(g, list) and len(g) == 2 and all(type(x) is int and x >= 0 for x in g) for g in found
    ):
        raise Malformed(f"field {fields.where}.{name[:40]} is not a list of [first, last] offsets")
    return tuple((g[0], g[1]) for g in found)


def _partition_number(fields: Fields, name: str) -> int:
    if not name.isdigit() or len(name) > 9:
        raise Malformed(f"field {fields.where}.{name[:40]} is not a partition number")
    return int(name)


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
                deletes=entry.text("deletes", default="tombstone"),
            )
            originals = tuple(_original(o) for o in entry.objects("originals"))
            tracked = entry.object("tracked_from", default={})
            tracked_from = {_partition_number(tracked, name): tracked.integer(name) for name in tracked.names()}
            gaps_field = entry.object("gaps", default={})
            gaps = {_partition_number(gaps_field, name): _gaps(gaps_field, name) for name in gaps_field.names()}
            out[source.uri] = AdoptedSource(source, originals, tracked_from, gaps)
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
    "SweptOriginals",
    "adopted_sources",
    "delete_due_originals",
    "originals_key",
    "read_sources",
    "record_originals",
]
