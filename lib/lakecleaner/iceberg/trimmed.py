"""Segment files the log start cuts, as the log table holds them (issue 48).

A trim (Kafka's DeleteRecords) moves a partition's log start offset into a segment file: the
file stays in the log, and readers of the log skip its records below the log start. Iceberg has
no such offset, and position delete files (pyiceberg cannot write them) are not read by every
engine, so the log table holds a copy of the file's records from the log start on in its place:
the one file per partition the table copies rather than registers, until retention or compaction
takes the file out of the log (and its copy out of the table). The copy lives under the log
table's own `data/` folder with a name that says what it is a copy of, so every sync wants the
same copy (idempotent), a sync after a crash writes it again, and the tables' expiry deletes it
once no snapshot kept for readers reaches it (`iceberg.expiry`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow.compute as pc

from lakecleaner.log.layout import partition_prefix, topic_prefix
from lakecleaner.log.segment_files import encode_segment_file, read_file_meta, read_segment_file, table_stats

if TYPE_CHECKING:
    from lakecleaner.io import ObjectStore
    from lakecleaner.log.manifest import SegmentFile

#: The log table's folder of trimmed copies, under the topic's prefix.
COPIES_FOLDER = "data/"


@dataclass(frozen=True)
class TrimmedCopy:
    """The log table's copy of one partition's segment file from offset `log_start` on."""

    topic: str
    partition: int
    file: SegmentFile
    log_start: int

    @property
    def source(self) -> str:
        """The cut segment file's key."""
        return partition_prefix(self.topic, self.partition) + self.file.path

    @property
    def key(self) -> str:
        """The copy's key: the log table's `data/` folder, named after its source and the log start."""
        name = self.file.path.rsplit("/", 1)[-1].removesuffix(".parquet")
        folder = f"{topic_prefix(self.topic)}{COPIES_FOLDER}partition={self.partition}/"
        return f"{folder}{name}.from-{self.log_start}.parquet"


def is_cut(file: SegmentFile, log_start: int) -> bool:
    """Whether the log start lies inside the file: it holds offsets on both sides of it."""
    return file.base_offset < log_start < file.next_offset


def is_copy(key: str) -> bool:
    """Whether an object of the log table's folders is a trimmed copy (`TrimmedCopy.key`)."""
    return f"/{COPIES_FOLDER}partition=" in key and ".from-" in key.rsplit("/", 1)[-1]


def write_copy(store: ObjectStore, copy: TrimmedCopy) -> SegmentFile:
    """Write the copy: its source's records from the log start on (none, when compaction left the
    source only lower offsets), with the source's footer metadata restated for them. Returns the
    copy's entry (its path the copy's key)."""
    rows = read_segment_file(store, copy.source, expected=copy.file)
    kept = rows.filter(pc.greater_equal(rows.column("offset"), copy.log_start))
    stats = table_stats(kept, copy.log_start, copy.file.next_offset)
    data = encode_segment_file(kept, dataclasses.replace(read_file_meta(store, copy.source), stats=stats))
    store.write(copy.key, data)
    return dataclasses.replace(
        copy.file, path=copy.key, base_offset=copy.log_start, record_count=kept.num_rows, size_bytes=len(data)
    )


__all__ = ["COPIES_FOLDER", "TrimmedCopy", "is_copy", "is_cut", "write_copy"]
