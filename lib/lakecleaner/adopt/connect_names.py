"""The object keys Kafka Connect's S3 sink writes, read back (issue 49).

From the connector's source (`TopicPartitionWriter.fileKeyToCommit`, `RecordViews`,
`Utils.getAdjustedFilename`, `KeyValueHeaderRecordWriterProvider`):

    <topics.dir>/<topic>/<encoded partition>/<topic>+<kafka partition>+<start offset>[.keys|.headers]<ext>

- the start offset is the offset of the file's first record, zero-padded to
  `filename.offset.zero.pad.width` (10);
- the encoded partition is `partition=<p>` (DefaultPartitioner), `year=…/month=…/…` (time-based
  partitioners), or `tombstone` (`tombstone.encoded.partition`) for the tombstones written with
  `behavior.on.null.values=write`, which have keys (and headers) but no value file;
- `<ext>` is the value format's: `.avro`, `.json` (`.json.gz` with gzip), `.<codec>.parquet`
  (`.snappy.parquet` by default); with `store.kafka.keys` / `store.kafka.headers` each value file
  has sidecars of the same name with `.keys` / `.headers` before the extension.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lakecleaner.config.adopt import TOMBSTONE_PARTITION
from lakecleaner.errors import LakeCleanerError

#: The value formats adoption reads, by the last part of the extension.
FORMATS = ("parquet", "avro", "json")
VALUE, KEYS, HEADERS = "value", "keys", "headers"

_NAME = re.compile(
    r"^(?P<topic>[A-Za-z0-9._-]+)\+(?P<partition>\d+)\+(?P<start>\d+)"
    r"(?:\.(?P<view>keys|headers))?(?P<ext>(?:\.[A-Za-z0-9]+)+)$"
)


class NotASinkFile(LakeCleanerError):
    """An object whose key is not one the S3 sink writes for the topic."""


@dataclass(frozen=True)
class SinkFile:
    """One object the sink wrote: its key and base (the key without view and extension: what a
    file and its sidecars share), the Kafka partition and start offset its name gives,
    which view of the records it holds (value, keys or headers), its format, whether its folder
    is the tombstone partition's, and its size, modification time and tag as listed (what tells
    one object written under a name from another, `adopt.originals`)."""

    key: str
    base: str
    partition: int
    start: int
    view: str
    format: str
    gzip: bool
    folder: str
    tombstones: bool
    size: int
    mtime_ms: int
    tag: str = ""

    @property
    def group(self) -> tuple[int, int, bool]:
        """What a re-delivery rewrites: the partition, the start offset, and whether it is the
        tombstones' file (a time-based partitioner can write one start offset in two folders)."""
        return self.partition, self.start, self.tombstones


def parse_sink_key(
    key: str, topic: str, size: int, mtime_ms: int, tombstone_partition: str = TOMBSTONE_PARTITION, tag: str = ""
) -> SinkFile:
    """The sink file an object key names; NotASinkFile for another topic's, an unknown format's,
    or a key that is not the sink's."""
    folder, _, name = key.rpartition("/")
    match = _NAME.match(name)
    if match is None or match["topic"] != topic:
        raise NotASinkFile(f"{key} is not a file the S3 sink writes for topic {topic}")
    parts = match["ext"].lower().lstrip(".").split(".")
    gzip = parts[-1] == "gz"
    fmt = parts[-2] if gzip and len(parts) > 1 else parts[-1]
    if fmt not in FORMATS:
        raise NotASinkFile(f"{key}: format {match['ext']} is not one adoption reads ({', '.join(FORMATS)})")
    folders = folder.split("/")
    return SinkFile(
        key=key,
        base=f"{folder}/{match['topic']}+{match['partition']}+{match['start']}",
        partition=int(match["partition"]),
        start=int(match["start"]),
        view=match["view"] or VALUE,
        format=fmt,
        gzip=gzip,
        folder=folder,
        tombstones=tombstone_partition in folders,
        size=size,
        mtime_ms=mtime_ms,
        tag=tag,
    )


__all__ = [
    "FORMATS",
    "HEADERS",
    "KEYS",
    "VALUE",
    "NotASinkFile",
    "SinkFile",
    "parse_sink_key",
]
