"""The partition manifest: the one commit point of a partition (DESIGN section 2).

A manifest is an immutable value. Every change to a partition builds a new Manifest with
`version + 1` and commits it with one conditional write. Every decision of the cleaning and
retention policy is made from a manifest alone, without opening a segment, so each segment
entry carries the statistics those decisions need.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from lakecleaner.config import LONG_MAX
from lakecleaner.errors import CorruptManifest
from lakecleaner.io.strict_json import Fields, Malformed, load_object
from lakecleaner.log.deletion_vectors import VECTOR_PATH, DeletionVector
from lakecleaner.log.key_index import KEY_INDEX_PATH, KeyIndex

#: The format this lakecleaner writes and reads: 2 once a file carries a deletion vector (issue
#: 79), which a lakecleaner that knows only 1 must not read as if its rows were all live; 3 once
#: a file carries a key index (`log.key_index`), a field a lakecleaner that knows 2 would refuse
#: as unknown (so it is told to upgrade instead); a manifest with neither is written as 1, as
#: before, so older readers still read it.
FORMAT_VERSION = 3
VECTORS_FORMAT_VERSION = 2
BASE_FORMAT_VERSION = 1
#: A data file's path relative to its partition: a Parquet file directly inside `segments/`
#: (`segment_files.new_segment_path`). Anything else (absolute, `..`, another folder, the manifest)
#: in a manifest is corruption, and acting on it could read or delete the wrong object.
SEGMENT_PATH = re.compile(r"^segments/[A-Za-z0-9_.=-]+\.parquet$")
#: The `properties` key of the id of the commit that wrote a manifest (PartitionLog.commit).
COMMIT_ID = "commit_id"
#: The `properties` key of the version a `lakecleaner repair` wrote; later commits carry it on, so a
#: writer whose files a repair adopted can tell (PartitionLog.commit).
REPAIRED_VERSION = "repaired_version"


def new_commit_id() -> str:
    """A fresh, unique commit id."""
    return uuid.uuid4().hex


@dataclass(frozen=True)
class SegmentFile:
    """One immutable Parquet file of a segment, covering offsets [base_offset, next_offset).
    `record_count` and `size_bytes` are the file's own; a `deletion_vector` removes some of its
    rows without rewriting it (`log.deletion_vectors`, issue 79), and every reader reads the
    others only (`live_count`); a `key_index` holds its rows' offsets, keys and key hashes
    (`log.key_index`)."""

    path: str
    base_offset: int
    next_offset: int
    record_count: int
    size_bytes: int
    deletion_vector: DeletionVector | None = None
    key_index: KeyIndex | None = None

    @property
    def live_count(self) -> int:
        """The rows readers read: the file's, but those its deletion vector removes."""
        return self.record_count - (self.deletion_vector.cardinality if self.deletion_vector else 0)

    def paths(self) -> tuple[str, ...]:
        """The objects the entry references: the file, its deletion vector and its key index."""
        extra = (self.deletion_vector, self.key_index)
        return (self.path, *(e.path for e in extra if e is not None))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.path,
            "base_offset": self.base_offset,
            "next_offset": self.next_offset,
            "record_count": self.record_count,
            "size_bytes": self.size_bytes,
        }
        if self.deletion_vector is not None:
            out["deletion_vector"] = self.deletion_vector.to_dict()
        if self.key_index is not None:
            out["key_index"] = self.key_index.to_dict()
        return out

    @staticmethod
    def from_fields(f: Fields) -> SegmentFile:
        vector = f.optional_object("deletion_vector")
        index = f.optional_object("key_index")
        return SegmentFile(
            f.text("path", max_chars=1024),
            f.integer("base_offset"),
            f.integer("next_offset"),
            f.integer("record_count"),
            f.integer("size_bytes"),
            None if vector is None else DeletionVector.from_fields(vector),
            None if index is None else KeyIndex.from_fields(index),
        )


@dataclass(frozen=True)
class Segment:
    """A log segment: offsets [base_offset, next_offset), held in zero or more files.

    `first_batch_max_timestamp` is the max timestamp of the first batch appended (Kafka's
    rolling-based timestamp, used by segment.ms and KIP-354); `max_timestamp` is the largest
    record timestamp (Kafka's largestTimestamp, used by retention.ms and KIP-58); both are -1
    for a segment with no records. `sealed` is False only for the active segment.

    `created_ms` is Kafka's `LogSegment.created`: when the segment was created, which Kafka does
    when it rolls the previous one (or creates the log); segment.ms counts from it for records
    without timestamps. `last_modified_ms` is Kafka's `lastModified`: when records were last
    written into it (None: at its creation); retention reads it for records without timestamps,
    and a compacted segment keeps that of the last segment of its group (Kafka's
    `Cleaner.cleanSegments`), so cleaning never extends retention.
    """

    id: str
    base_offset: int
    next_offset: int
    files: tuple[SegmentFile, ...] = ()
    record_count: int = 0
    size_bytes: int = 0
    first_batch_max_timestamp: int = -1
    max_timestamp: int = -1
    created_ms: int = 0
    sealed: bool = False
    tombstone_count: int = 0
    earliest_delete_horizon_ms: int | None = None
    last_modified_ms: int | None = None

    @property
    def is_empty(self) -> bool:
        return self.record_count == 0

    @property
    def modified_ms(self) -> int:
        """Kafka's `LogSegment.lastModified`: `last_modified_ms`, else `created_ms`."""
        return self.created_ms if self.last_modified_ms is None else self.last_modified_ms

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "base_offset": self.base_offset,
            "next_offset": self.next_offset,
            "files": [f.to_dict() for f in self.files],
            "record_count": self.record_count,
            "size_bytes": self.size_bytes,
            "first_batch_max_timestamp": self.first_batch_max_timestamp,
            "max_timestamp": self.max_timestamp,
            "created_ms": self.created_ms,
            "sealed": self.sealed,
            "tombstone_count": self.tombstone_count,
            "earliest_delete_horizon_ms": self.earliest_delete_horizon_ms,
            "last_modified_ms": self.last_modified_ms,
        }

    @staticmethod
    def from_fields(f: Fields) -> Segment:
        return Segment(
            id=f.text("id", max_chars=256),
            base_offset=f.integer("base_offset"),
            next_offset=f.integer("next_offset"),
            files=tuple(SegmentFile.from_fields(file) for file in f.objects("files", default=[])),
            record_count=f.integer("record_count"),
            size_bytes=f.integer("size_bytes"),
            first_batch_max_timestamp=f.integer("first_batch_max_timestamp", lo=-1),
            max_timestamp=f.integer("max_timestamp", lo=-1),
            created_ms=f.integer("created_ms"),
            sealed=f.flag("sealed"),
            tombstone_count=f.integer("tombstone_count", default=0),
            earliest_delete_horizon_ms=f.optional_int("earliest_delete_horizon_ms"),
            last_modified_ms=f.optional_int("last_modified_ms"),
        )


@dataclass(frozen=True)
class PendingDelete:
    """A file that left the log; it may be physically deleted once `now >= delete_after_ms`."""

    path: str
    delete_after_ms: int
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "delete_after_ms": self.delete_after_ms, "reason": self.reason}

    @staticmethod
    def from_fields(f: Fields) -> PendingDelete:
        return PendingDelete(f.text("path", max_chars=1024), f.integer("delete_after_ms"), f.text("reason", default=""))


@dataclass(frozen=True)
class Manifest:
    """A partition's committed state. `segments` are ordered and their ranges touch.

    Invariants (checked by `validate`): consecutive segments touch (next_offset of one is the
    base_offset of the next); only the last segment may be unsealed (the active segment);
    the last segment ends at `next_offset`; `log_start_offset` lies in
    [base of the first segment, next_offset] (it may pass whole segments after a trim, until
    retention deletes them); an empty log has log_start_offset == next_offset.

    `next_segment_created_ms` is when Kafka would have created the next segment: at the log's
    creation and at each roll that leaves no active segment (Kafka opens the new segment at the
    roll; here it is written at the next append, with this as its `created_ms`). None when
    unknown; the next append then uses its own time.
    """

    topic: str
    partition: int
    version: int = 0
    log_start_offset: int = 0
    next_offset: int = 0
    cleaner_checkpoint: int | None = None
    segments: tuple[Segment, ...] = ()
    pending_deletes: tuple[PendingDelete, ...] = ()
    updated_ms: int = 0
    next_segment_created_ms: int | None = None
    format_version: int = FORMAT_VERSION
    properties: Mapping[str, str] = field(default_factory=dict)

    # -- derived views ------------------------------------------------------------------
    @property
    def active_segment(self) -> Segment | None:
        """The open last segment, or None when the log is empty or its last segment is sealed."""
        if self.segments and not self.segments[-1].sealed:
            return self.segments[-1]
        return None

    @property
    def size_bytes(self) -> int:
        return sum(s.size_bytes for s in self.segments)

    @property
    def record_count(self) -> int:
        return sum(s.record_count for s in self.segments)

    def segment_index_of(self, offset: int) -> int | None:
        """Index of the segment whose range holds `offset`, or None."""
        for i, seg in enumerate(self.segments):
            if seg.base_offset <= offset < seg.next_offset:
                return i
        return None

    @property
    def commit_id(self) -> str | None:
        """The id of the commit that wrote this manifest (None for one written before commit ids)."""
        return self.properties.get(COMMIT_ID)

    @property
    def repaired_version(self) -> int | None:
        """The version the last `lakecleaner repair` of this partition wrote (None: never repaired)."""
        value = self.properties.get(REPAIRED_VERSION)
        return int(value) if value is not None and value.isdigit() else None

    def with_commit_id(self, commit_id: str) -> Manifest:
        return replace(self, properties={**self.properties, COMMIT_ID: commit_id})

    def live_paths(self) -> set[str]:
        """The objects of the log's segments: their files and the files' deletion vectors and key indexes."""
        return {path for s in self.segments for f in s.files for path in f.paths()}

    @property
    def written_format_version(self) -> int:
        """The lowest format that holds this manifest: older readers read what they can."""
        files = [f for s in self.segments for f in s.files]
        if any(f.key_index is not None for f in files):
            return FORMAT_VERSION
        return VECTORS_FORMAT_VERSION if any(f.deletion_vector is not None for f in files) else BASE_FORMAT_VERSION

    def referenced_paths(self) -> set[str]:
        """Every file path the log references (segments and pending deletes)."""
        return self.live_paths() | {p.path for p in self.pending_deletes}

    # -- building new versions -----------------------------------------------------------
    def next_version(self, now_ms: int, **changes: Any) -> Manifest:
        """A copy with `changes` applied, `version + 1` and `updated_ms = now_ms`."""
        return replace(self, version=self.version + 1, updated_ms=now_ms, **changes)

    def rolled(self, now_ms: int) -> Manifest:
        """The manifest with its active segment sealed (version + 1) and `now_ms` kept as the next
        segment's creation time (Kafka's roll creates it then: segment.ms of untimestamped records
        counts from the roll, `LogSegment.created`). Raises ValueError without an active segment."""
        active = self.active_segment
        if active is None:
            raise ValueError(f"{self.topic}-{self.partition} has no active segment to roll")
        sealed = replace(active, sealed=True)
        return self.next_version(now_ms, segments=(*self.segments[:-1], sealed), next_segment_created_ms=now_ms)

    def with_pending_deletes(
        self, paths: Iterable[str], delete_after_ms: int, reason: str
    ) -> tuple[PendingDelete, ...]:
        """`pending_deletes` plus the given paths (each file listed once)."""
        known = {p.path for p in self.pending_deletes}
        added = tuple(PendingDelete(p, delete_after_ms, reason) for p in paths if p not in known)
        return self.pending_deletes + added

    # -- (de)serialisation -------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "format_version": self.written_format_version,
            "topic": self.topic,
            "partition": self.partition,
            "version": self.version,
            "log_start_offset": self.log_start_offset,
            "next_offset": self.next_offset,
            "cleaner_checkpoint": self.cleaner_checkpoint,
            "segments": [s.to_dict() for s in self.segments],
            "pending_deletes": [p.to_dict() for p in self.pending_deletes],
            "updated_ms": self.updated_ms,
            "next_segment_created_ms": self.next_segment_created_ms,
            "properties": dict(self.properties),
        }

    def to_json(self) -> bytes:
        return json.dumps(self.to_dict(), indent=1, sort_keys=False).encode()

    @staticmethod
    def from_fields(f: Fields) -> Manifest:
        return Manifest(
            topic=f.text("topic", max_chars=249),
            partition=f.integer("partition", hi=(1 << 31) - 1),
            version=f.integer("version"),
            log_start_offset=f.integer("log_start_offset"),
            next_offset=f.integer("next_offset"),
            cleaner_checkpoint=f.optional_int("cleaner_checkpoint"),
            segments=tuple(Segment.from_fields(s) for s in f.objects("segments", default=[])),
            pending_deletes=tuple(PendingDelete.from_fields(p) for p in f.objects("pending_deletes", default=[])),
            updated_ms=f.integer("updated_ms", default=0),
            next_segment_created_ms=f.optional_int("next_segment_created_ms"),
            format_version=f.integer("format_version", default=FORMAT_VERSION, lo=1, hi=1 << 16),
            properties=f.strings("properties", default={}),
        )

    @staticmethod
    def from_json(data: bytes, location: str) -> Manifest:
        """Parse strictly (`io/strict_json.py`) and validate; CorruptManifest naming `location` and
        the fix, whatever the bytes hold."""
        try:
            manifest = Manifest.from_fields(load_object(data))
        except Malformed as exc:
            raise CorruptManifest(
                f"manifest {location} is corrupt ({exc}); run `lakecleaner repair` to rebuild it from the segment files"
            ) from None
        if manifest.format_version > FORMAT_VERSION:
            raise CorruptManifest(
                f"manifest {location} has format version {manifest.format_version}, newer than this "
                f"lakecleaner understands ({FORMAT_VERSION}); upgrade lakecleaner"
            )
        problems = manifest.problems()
        if problems:
            raise CorruptManifest(
                f"manifest {location} is inconsistent: {'; '.join(problems[:5])}; "
                "run `lakecleaner repair` to rebuild it from the segment files"
            )
        return manifest

    def problems(self) -> list[str]:
        """Every broken invariant, in words (empty when the manifest is consistent)."""
        out: list[str] = []
        segs = self.segments
        for i, seg in enumerate(segs):
            if seg.base_offset > seg.next_offset:
                out.append(f"segment {seg.id} has base_offset {seg.base_offset} > next_offset {seg.next_offset}")
            if i + 1 < len(segs) and seg.next_offset != segs[i + 1].base_offset:
                out.append(
                    f"segment {seg.id} ends at {seg.next_offset} but the next one starts at {segs[i + 1].base_offset}"
                )
            if i + 1 < len(segs) and not seg.sealed:
                out.append(f"segment {seg.id} is unsealed but is not the last segment")
            if sum(f.record_count for f in seg.files) != seg.record_count:
                out.append(f"segment {seg.id} record_count disagrees with its files")
            for f in seg.files:
                if not SEGMENT_PATH.match(f.path) or ".." in f.path:
                    out.append(f"segment {seg.id} names the file {f.path!r}, which is not a file in segments/")
                if f.deletion_vector is not None:
                    out += [f"segment {seg.id}: {p}" for p in f.deletion_vector.problems(f.path, f.record_count)]
                if f.key_index is not None:
                    out += [f"segment {seg.id}: {p}" for p in f.key_index.problems(f.path, f.record_count)]
                if not seg.base_offset <= f.base_offset <= f.next_offset <= seg.next_offset:
                    out.append(
                        f"segment {seg.id} [{seg.base_offset}, {seg.next_offset}) holds the file {f.path} covering "
                        f"[{f.base_offset}, {f.next_offset})"
                    )
            if seg.record_count < 0 or seg.size_bytes < 0:
                out.append(f"segment {seg.id} has a negative record count or size")
        live = self.live_paths()
        objects = (SEGMENT_PATH, VECTOR_PATH, KEY_INDEX_PATH)
        for pending in self.pending_deletes:
            if not any(p.match(pending.path) for p in objects) or ".." in pending.path:
                out.append(f"pending delete {pending.path!r} is not a file in segments/")
            elif pending.path in live:
                out.append(f"pending delete {pending.path} is a file of a live segment")
        if segs and segs[-1].next_offset != self.next_offset:
            out.append(f"last segment ends at {segs[-1].next_offset}, not at next_offset {self.next_offset}")
        low = segs[0].base_offset if segs else self.next_offset
        if not 0 <= self.next_offset <= LONG_MAX:
            out.append(f"next_offset {self.next_offset} is outside [0, {LONG_MAX}] (Kafka's offsets are int64)")
        if not low <= self.log_start_offset <= self.next_offset:
            out.append(f"log_start_offset {self.log_start_offset} is outside [{low}, {self.next_offset}]")
        return out
