"""Where the sink's files still hold a key (issue 49), for the erasure audit: every file of the
source folders a topic was adopted from, whether adopted (gc deletes it once due,
`adopt.originals`) or not (not yet, kept with `--keep-originals`, or written after the last run)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from lakecleaner.adopt.connect import sink_files
from lakecleaner.adopt.connect_names import SinkFile
from lakecleaner.adopt.connect_plan import bundles_of
from lakecleaner.adopt.connect_read import ChangeEvents, read_bundle
from lakecleaner.adopt.originals import Original, adopted_sources
from lakecleaner.errors import LakeCleanerError
from lakecleaner.io import open_store

if TYPE_CHECKING:
    from lakecleaner.lake import Lake


@dataclass(frozen=True)
class SinkCopy:
    """A sink file holding the key: where, its Kafka partition, and its adoption record (None
    when gc is not to delete it: not adopted, kept, or changed since it was adopted)."""

    location: str
    partition: int
    original: Original | None


def sink_copies(lake: Lake, topic: str, key: bytes, unreadable: dict[str, str]) -> Iterator[SinkCopy]:
    """The files of the topic's adopted source folders that hold `key` (as its key): each object
    of a bundle one of whose records has it. Files that cannot be read go to `unreadable`."""
    for adopted in adopted_sources(lake, topic):
        source = adopted.source
        store = open_store(source.uri, lake.config.storage)
        files, _ = sink_files(store, topic, source)
        originals = {o.key: o for o in adopted.originals}
        for bundle in bundles_of(files):
            try:
                records = read_bundle(store, bundle, ChangeEvents(source.key_field))
            except LakeCleanerError as exc:
                unreadable[store.location(bundle.main.key)] = str(exc)
                continue
            if pc.index(records.keys, pa.scalar(key, pa.binary())).as_py() >= 0:
                for f in bundle.objects:
                    yield SinkCopy(store.location(f.key), f.partition, _deleted_by_gc(originals.get(f.key), f))


def _deleted_by_gc(original: Original | None, sink_file: SinkFile) -> Original | None:
    """The ledger's entry of an object gc will delete: adopted, not kept, and still the object
    adopted (gc keeps one that changed, `adopt.originals`); None for any other."""
    if original is None or original.kept or not original.is_object(sink_file.size, sink_file.tag, sink_file.mtime_ms):
        return None
    return original


__all__ = ["SinkCopy", "sink_copies"]
