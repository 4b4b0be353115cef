"""The partition log (Kafka's UnifiedLog): append, roll, read, and conditional commits.

Every change to a partition is one conditional write of its manifest. A writer reads the
manifest and its etag, builds the next version, and writes it with If-Match; when another
writer got there first it re-reads and tries again (data files it wrote for the lost attempt
are deleted, as they were never part of the log). A crash between writing a data file and
committing leaves the old log: the file is an orphan no manifest references, removed later.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeAlias

import pyarrow as pa
import pyarrow.compute as pc

from lakecleaner.clock import wall_clock_ms
from lakecleaner.config import LONG_MAX, TopicConfig
from lakecleaner.errors import (
    AdoptedByRepair,
    CommitStateUnknown,
    ConcurrentModification,
    ConditionFailed,
    CorruptManifest,
    InvalidRecord,
    InvalidTransition,
    ObjectNotFound,
    OffsetOutOfRange,
    StorageError,
    TopicNotFound,
    WriterRefused,
)
from lakecleaner.faults import crash_point
from lakecleaner.io import ObjectStore, UnfinishedWrite
from lakecleaner.log.commits import write_commit_records
from lakecleaner.log.layout import MANIFEST_NAME, by_partition, partition_marker_key, partition_prefix, topic_prefix
from lakecleaner.log.manifest import Manifest, Segment, SegmentFile, new_commit_id
from lakecleaner.log.records import BATCH_SCHEMA, SEGMENT_SCHEMA, Record, conform_batch, records_to_batch
from lakecleaner.log.segment_files import (
    KIND_APPEND,
    FileMeta,
    encode_segment_file,
    new_segment_path,
    read_segment_file,
    table_stats,
    write_segment_file,
)
from lakecleaner.log.source import OwningSource

log = logging.getLogger(__name__)

#: Commit records written at once (a compaction adds a few files to a partition, an append one).
RECORD_WRITERS = 8


def unfinished_by_partition(
    store: ObjectStore, topic: str
) -> tuple[dict[int, list[UnfinishedWrite]], StorageError | None]:
    """The topic's unfinished writes by partition, from one listing (`by_partition`); or none, and
    the error, from a store that cannot list them (an S3-compatible one without
    ListMultipartUploads): nothing then proves them gone, and each caller says so."""
    try:
        return by_partition(topic, store.list_unfinished(topic_prefix(topic))), None
    except StorageError as exc:
        return {}, exc


def adopted_by_repair(manifest: Manifest) -> AdoptedByRepair:
    """The error of a writer whose files `manifest` references although its commit did not land
    (only `lakecleaner repair` puts files it did not commit into a manifest)."""
    return AdoptedByRepair(
        f"partition {manifest.topic}-{manifest.partition}: `lakecleaner repair` (manifest version "
        f"{manifest.repaired_version}) took this writer's files into the log before its commit landed; the log holds "
        "them as the repair rebuilt it, and this commit did not land (nothing it wrote was deleted; do not write the "
        "same records again)"
    )


@dataclass(frozen=True)
class AppendResult:
    """Offsets [base_offset, next_offset) were assigned; `rolled` segments were sealed on the way."""

    base_offset: int
    next_offset: int
    record_count: int
    rolled: int
    manifest_version: int


Batch: TypeAlias = pa.Table | Sequence[Record]


def checked_offsets(offsets: Sequence[int], count: int, topic: str, partition: int) -> pa.Array:
    """Offsets a writer chose for `count` records, as an int64 array; InvalidRecord unless there is
    one per record and they are non-negative and strictly increasing (gaps allowed)."""
    where = f"partition {topic}-{partition}"
    if len(offsets) != count:
        raise InvalidRecord(f"{where}: {len(offsets)} offsets given for {count} records; give one offset per record")
    try:
        array = pa.array(offsets, pa.int64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
        raise InvalidRecord(f"{where}: offsets must be integers ({exc})") from None
    if array.null_count:
        raise InvalidRecord(f"{where}: an offset is missing; give every record an offset, or none")
    if count and pc.min(array).as_py() < 0:
        raise InvalidRecord(f"{where}: offsets must not be negative")
    if count and pc.max(array).as_py() >= LONG_MAX:
        raise InvalidRecord(
            f"{where}: offset {LONG_MAX} is past the last a log can hold (Kafka's offsets are int64 and the log's "
            f"next offset follows the last record's); nothing was written"
        )
    if count > 1:
        steps = pc.subtract(array.slice(1), array.slice(0, count - 1))
        if pc.min(steps).as_py() <= 0:
            index = pc.index(pc.less_equal(steps, 0), True).as_py() + 1
            raise InvalidRecord(
                f"{where}: offsets must be strictly increasing, but offset {array[index].as_py()} (record {index}) "
                f"follows {array[index - 1].as_py()}; nothing was written"
            )
    return array


class PartitionLog:
    """One topic-partition's log in the lake."""

    def __init__(
        self,
        store: ObjectStore,
        topic: str,
        partition: int,
        config: TopicConfig,
        on_committed: Callable[[Manifest, Manifest], None] | None = None,
        owner: OwningSource | None = None,
    ) -> None:
        self.store = store
        self.topic = topic
        self.partition = partition
        self.config = config
        #: Told (manifest before, manifest committed) after each commit that landed: what keeps
        #: followers of the log (its Iceberg table) in step. It must not raise.
        self.on_committed = on_committed
        #: The source that alone appends to this log (`mirror:`, `adopt:`), if it has one.
        self.owner = owner
        self.prefix = partition_prefix(topic, partition)
        self.manifest_key = self.prefix + MANIFEST_NAME

    def __repr__(self) -> str:
        return f"PartitionLog({self.topic}-{self.partition})"

    # -- manifest -----------------------------------------------------------------------------
    def create(self, now_ms: int | None = None) -> Manifest:
        """Create the empty partition if absent (idempotent); returns the current manifest."""
        now = wall_clock_ms() if now_ms is None else now_ms
        empty = Manifest(self.topic, self.partition, version=1, updated_ms=now, next_segment_created_ms=now)
        marker = partition_marker_key(self.topic, self.partition, empty.version)
        self.store.write(marker, b"")
        try:
            self.store.create(self.manifest_key, empty.to_json())
            return empty
        except ConditionFailed:
            # The partition exists: the marker announced nothing (a summary without the partition
            # is stale for it anyway), so it goes rather than wait for a refresh.
            self.store.delete(marker)
            return self.manifest()

    def load(self) -> tuple[Manifest, str]:
        """The committed manifest and its etag; TopicNotFound when the partition does not exist."""
        try:
            data, etag = self.store.read_with_etag(self.manifest_key)
        except ObjectNotFound as exc:
            raise TopicNotFound(
                f"partition {self.topic}-{self.partition} has no manifest at {self.store.location(self.manifest_key)}; "
                "create the topic first (`lakecleaner topics create`), or run `lakecleaner repair` if it was lost"
            ) from exc
        manifest = Manifest.from_json(data, self.store.location(self.manifest_key))
        if (manifest.topic, manifest.partition) != (self.topic, self.partition):
            raise CorruptManifest(
                f"manifest {self.store.location(self.manifest_key)} names partition {manifest.topic}-"
                f"{manifest.partition}; run `lakecleaner repair --topic {self.topic} --partition {self.partition}`"
            )
        return manifest, etag

    def manifest(self) -> Manifest:
        return self.load()[0]

    def commit(
        self,
        change: Callable[[Manifest], Manifest | None],
        *,
        on_conflict: Callable[[], None] | None = None,
        wrote: Collection[str] = (),
        known: tuple[Manifest, str] | None = None,
    ) -> Manifest:
        """Apply `change` to the current manifest and commit the result conditionally.

        `known` is the manifest and etag as the caller last read them (a compaction's plan): the
        first attempt starts from it instead of reading the manifest again, so a commit costs one
        request when nothing changed meanwhile; when something did, the condition fails and the
        commit goes on from the manifest read back, as after a lost race, but without waiting.

        `change` returns the next manifest, or None when there is nothing to do. When another
        writer commits first, `on_conflict` runs (to discard files the attempt wrote) and the
        change is applied again to the new manifest. `change` may raise to abort.

        Every write carries a new commit id (`Manifest.commit_id`). A write whose reply was lost is
        retried by the store and then meets its own landed manifest as a 412: so after a failed
        condition, and after any other storage error, the manifest is read back first, and a
        manifest carrying this commit's id is this commit's success (pyiceberg's commit-state
        check). So is one that references a file the attempt wrote (`wrote`: paths relative to the
        partition, read at each check, so a list the change fills in works), for when another
        writer committed on top of the landed write before the read-back. `on_conflict` runs only
        when the read-back proves another writer won. When the manifest cannot be read back,
        CommitStateUnknown is raised and nothing is discarded. When the manifest references the
        attempt's files because a `lakecleaner repair` adopted them (its version is at least the
        one attempted), AdoptedByRepair is raised: the files are in the log, the commit is not.

        A landed commit that added files leaves a commit record before it returns (`_acknowledged`,
        `log/commits.py`): what lets `repair` tell an acknowledged file from an orphan.
        """
        commit_id = new_commit_id()

        def landed(manifest: Manifest, version: int) -> bool:
            """Whether this commit's write (attempted as `version`) landed; AdoptedByRepair when the
            manifest references its files because a repair took them in instead."""
            if manifest.commit_id == commit_id:
                return True
            if not self._references(manifest, wrote):
                return False
            repaired = manifest.repaired_version
            if repaired is not None and repaired >= version:
                raise adopted_by_repair(manifest)
            return True

        current, etag = known or self.load()
        if self._references(current, wrote):  # before any write of this commit: only a repair puts them there
            raise adopted_by_repair(current)
        stale_start = known is not None
        policy, started, attempt = self.store.commit_policy, time.monotonic(), 0
        while True:
            base = current
            updated = change(current)
            if updated is None:
                return current
            updated = updated.with_commit_id(commit_id)
            self.refuse_invalid(updated)
            self.refuse_transition(current, updated)
            crash_point("commit.before_manifest_write")
            self.store.write(partition_marker_key(self.topic, self.partition, updated.version), b"")
            try:
                self.store.replace(self.manifest_key, updated.to_json(), etag)
            except ConditionFailed:
                current, etag = self._read_back(commit_id)
                if landed(current, updated.version):
                    log.warning("%s: commit %s landed although its reply was lost", self, commit_id)
                    return self._committed(base, self._acknowledged(current, updated.version, commit_id, wrote))
                if on_conflict is not None:
                    on_conflict()
                if stale_start:  # the manifest moved on since the caller read it: no race was lost
                    stale_start = False
                    continue
                pause = policy.next_delay(attempt, started)
                if pause is None:
                    raise ConcurrentModification(
                        f"partition {self.topic}-{self.partition}: lost {attempt + 1} commit races in a row; "
                        "another writer is committing continuously — retry later (lake.storage.commit_attempts, "
                        "retry_timeout_ms)"
                    ) from None
                log.info(
                    "%s: lost a commit race (attempt %d); retrying on version %d", self, attempt + 1, current.version
                )
                time.sleep(pause)
                attempt += 1
                continue
            except StorageError as exc:
                after, _ = self._read_back(commit_id, cause=exc)
                if landed(after, updated.version):
                    log.warning("%s: commit %s landed although the write reported %s", self, commit_id, exc)
                    return self._committed(base, self._acknowledged(after, updated.version, commit_id, wrote))
                raise
            crash_point("commit.after_manifest_write")
            return self._committed(base, self._acknowledged(updated, updated.version, commit_id, wrote))

    def _committed(self, before: Manifest, after: Manifest) -> Manifest:
        """Tell `on_committed` of a landed commit; `after`."""
        if self.on_committed is not None:
            self.on_committed(before, after)
        return after

    @staticmethod
    def _references(manifest: Manifest, paths: Collection[str]) -> bool:
        referenced = manifest.referenced_paths()
        return any(path in referenced for path in paths)

    def _acknowledged(self, manifest: Manifest, version: int, commit_id: str, wrote: Collection[str]) -> Manifest:
        """Record a landed commit that added files (`log/commits.py`), then return `manifest`.
        The commit has landed whatever happens here: a record that cannot be written is logged, not
        raised (a writer told it failed would write its records again); `repair` then treats the
        files as unacknowledged."""
        referenced = manifest.referenced_paths()
        files = [path for path in wrote if path in referenced]
        try:
            write_commit_records(self.store, self.prefix, files, version, commit_id, RECORD_WRITERS)
        except StorageError as exc:
            log.warning("%s: commit %s landed, but its commit records could not be written: %s", self, commit_id, exc)
        return manifest

    def refuse_invalid(self, manifest: Manifest) -> None:
        """Never write a manifest the next read would reject (a bug here must not become corruption)."""
        problems = manifest.problems()
        if manifest.topic != self.topic or manifest.partition != self.partition:
            problems.append(f"it names partition {manifest.topic}-{manifest.partition}")
        if problems:
            raise CorruptManifest(
                f"refusing to write an invalid manifest to {self.store.location(self.manifest_key)}: "
                f"{'; '.join(problems)} (a lakecleaner bug: please report it)"
            )

    def refuse_transition(self, current: Manifest, updated: Manifest) -> None:
        """Never commit a step backwards (pyiceberg's commit requirements, DESIGN section 3): the
        version is the current one + 1, and the next offset, the log start offset and the cleaner
        checkpoint never decrease — the checkpoint may only be reset (None: the next cleaning maps
        the partition from its log start, as Kafka resets a checkpoint it cannot use). `repair`
        alone rewrites a partition otherwise, and it does not commit through here."""
        problems = []
        if updated.version != current.version + 1:
            problems.append(f"version {current.version} -> {updated.version}")
        for name in ("next_offset", "log_start_offset"):
            before, after = getattr(current, name), getattr(updated, name)
            if after < before:
                problems.append(f"{name} {before} -> {after}")
        before_checkpoint, after_checkpoint = current.cleaner_checkpoint, updated.cleaner_checkpoint
        if before_checkpoint is not None and after_checkpoint is not None and after_checkpoint < before_checkpoint:
            problems.append(f"cleaner_checkpoint {before_checkpoint} -> {after_checkpoint}")
        if problems:
            raise InvalidTransition(
                f"refusing to commit {self.topic}-{self.partition} backwards ({'; '.join(problems)}); nothing was "
                "written (a lakecleaner bug: please report it; `lakecleaner repair` is the one way to rewrite a log)"
            )

    def _read_back(self, commit_id: str, cause: BaseException | None = None) -> tuple[Manifest, str]:
        """The manifest after a write whose outcome is in doubt; CommitStateUnknown when it cannot
        be read."""
        try:
            return self.load()
        except StorageError as exc:
            raise CommitStateUnknown(
                f"partition {self.topic}-{self.partition}: commit {commit_id} may or may not have landed "
                f"({cause or 'condition failed'}), and the manifest could not be read back ({exc}); nothing was "
                "deleted: run the command again once the storage answers"
            ) from exc

    # -- append -------------------------------------------------------------------------------
    def append(
        self,
        batch: Batch,
        *,
        offsets: Sequence[int] | None = None,
        now_ms: int | None = None,
        writer: str | None = None,
        properties: Mapping[str, str] | None = None,
    ) -> AppendResult:
        """Append one batch (a table in BATCH_SCHEMA, or Records) as one commit.

        A log whose records come from a source (`owner`: a mirror or an adoption) takes appends
        from that source's writer only (`writer`, `log/source.py`): any other append raises
        WriterRefused and nothing is written (DESIGN section 9). `properties` are set in the
        manifest by the same commit (a mirror's sample of its last record).

        Offsets are assigned from the log's next offset or, with `offsets`, taken as given, as
        Kafka's followers and replication tools append (`UnifiedLog.appendAsFollower`): one per
        record, strictly increasing, the first at least the log's next offset, gaps allowed; the
        next offset becomes the last + 1. Offsets that break this raise InvalidRecord and nothing is
        written. The active segment rolls before a file as Kafka's `UnifiedLog.maybeRoll` decides
        (size, or segment.ms / KIP-354's bound on compacted topics), and a batch whose file would
        pass segment.bytes is written as several files that fit: one append stands for the many
        small batches a Kafka producer sends (batch.size, 16 KB by default), so segments stay
        within segment.bytes as Kafka's do.

        Records without a timestamp get `now_ms`. A compacted topic rejects records without a key.

        Args:
            batch: the records: a pyarrow table in BATCH_SCHEMA, or `Record`s.
            offsets: each record's offset (the rule above); None to assign them from the log's end.
            now_ms: the time of the append and of records without a timestamp; None for the wall clock.
            writer: the source appending (`log/source.py`), for a log that has one.
            properties: manifest properties set by the same commit.

        Returns:
            The offsets assigned, the records, the segments rolled and the manifest version written.

        Raises:
            WriterRefused: the log has a source and `writer` is not it.
            InvalidRecord: a record without a key on a compacted topic, offsets that break the rule,
                or a partition whose next offset would pass 2^63 - 1; nothing is written.
            ConcurrentModification: other writers kept winning the conditional commit past its retries.
            StorageError: the store failed after its retries (what was written is deleted).
        """
        self.refuse_other_writer(writer)
        now = wall_clock_ms() if now_ms is None else now_ms
        table = self._conform(batch, now)
        given = None if offsets is None else checked_offsets(offsets, table.num_rows, self.topic, self.partition)
        written: list[str] = []

        def discard_written() -> None:
            for path in written:
                self.store.delete(self.prefix + path)
            written.clear()

        result: list[AppendResult] = []

        def change(manifest: Manifest) -> Manifest | None:
            start = manifest.next_offset
            if not table.num_rows:
                result.append(AppendResult(start, start, 0, 0, manifest.version))
                return None
            if given is not None and given[0].as_py() < start:
                raise InvalidRecord(
                    f"partition {self.topic}-{self.partition}: offset {given[0].as_py()} is below the log's next "
                    f"offset {start}; appended offsets must be at least {start} (nothing was written)"
                )
            if given is None and start + table.num_rows > LONG_MAX:
                raise InvalidRecord(
                    f"partition {self.topic}-{self.partition} is full: {table.num_rows} more records would take its "
                    f"next offset past {LONG_MAX} (Kafka's offsets are int64); nothing was written"
                )
            column = pa.array(range(start, start + table.num_rows), pa.int64()) if given is None else given
            segments = list(manifest.segments)
            created = now if manifest.next_segment_created_ms is None else manifest.next_segment_created_ms
            rolled = self._append_table(segments, start, table, column, manifest.version + 1, now, created, written)
            crash_point("append.after_data_write")
            next_offset = column[-1].as_py() + 1
            new = manifest.next_version(
                now,
                segments=tuple(segments),
                next_offset=next_offset,
                next_segment_created_ms=None,
                properties={**manifest.properties, **(properties or {})},
            )
            result.append(AppendResult(column[0].as_py(), next_offset, table.num_rows, rolled, new.version))
            return new

        def on_conflict() -> None:
            discard_written()
            result.clear()

        self.commit(change, on_conflict=on_conflict, wrote=written)
        return result[-1]

    def refuse_other_writer(self, writer: str | None) -> None:
        """WriterRefused unless this log has no owning source or `writer` is its writer."""
        if self.owner is None or writer == self.owner.writer:
            return
        raise WriterRefused(
            f"topic {self.topic} takes its records from {self.owner.described}: only its {self.owner.writer} "
            f"appends to it, at the source's offsets; nothing was written ({self.owner.instead})"
        )

    def _conform(self, batch: Batch, now: int) -> pa.Table:
        table = conform_batch(batch, now) if isinstance(batch, pa.Table) else records_to_batch(batch, now)
        if self.config.compact and table.column("key").null_count:
            first = table.column("key").to_pylist().index(None)
            raise InvalidRecord(
                f"topic {self.topic} is compacted (cleanup.policy={','.join(sorted(self.config.cleanup_policy))}) "
                f"and cannot accept records without a key: {table.column('key').null_count} of {table.num_rows} "
                f"records have a null key (first at batch index {first}); give every record a key"
            )
        return table

    def _append_table(
        self,
        segments: list[Segment],
        start: int,
        batch: pa.Table,
        offsets: pa.Array,
        version: int,
        now: int,
        created: int,
        written: list[str],
    ) -> int:
        """Write `batch` at `offsets` as one file covering [start, last offset + 1) into the active
        segment, rolling it first when Kafka's rules say so, or as several files when one would
        pass segment.bytes. A segment this opens without a roll was created at `created`, one
        opened by a roll now. Mutates `segments`; returns how many segments it rolled."""
        n = batch.num_rows
        end = offsets[-1].as_py() + 1
        table = pa.table(
            {
                "offset": offsets,
                "timestamp": batch.column("timestamp"),
                "key": batch.column("key"),
                "value": batch.column("value"),
                "headers": batch.column("headers"),
                "delete_horizon_ms": pa.nulls(n, pa.int64()),
            },
            schema=SEGMENT_SCHEMA,
        )
        stats = table_stats(table, start, end)
        active = segments[-1] if segments and not segments[-1].sealed else None
        meta = FileMeta(
            self.topic,
            self.partition,
            active.base_offset if active else start,
            KIND_APPEND,
            now,
            version,
            stats.max_timestamp,
            stats,
        )
        data = encode_segment_file(table, meta)
        if len(data) > self.config.segment_bytes and n > 1:
            return self._append_in_pieces(segments, start, batch, offsets, len(data), version, now, created, written)
        rolled = 0
        if active is not None and self._should_roll(active, len(data), stats.max_timestamp, now):
            segments[-1] = replace(active, sealed=True)
            active = None
            rolled, created = 1, now
            meta = replace(meta, segment_base_offset=start)
            data = encode_segment_file(table, meta)
        path = new_segment_path(start)
        written.append(path)
        file = write_segment_file(self.store, self.prefix, path, data, meta)
        if active is None:
            segments.append(self._new_segment(file, stats.max_timestamp, stats.tombstone_count, created, now))
        else:
            segments[-1] = self._grow_segment(active, file, stats.max_timestamp, stats.tombstone_count, now)
        return rolled

    def _append_in_pieces(
        self,
        segments: list[Segment],
        start: int,
        batch: pa.Table,
        offsets: pa.Array,
        size: int,
        version: int,
        now: int,
        created: int,
        written: list[str],
    ) -> int:
        """`_append_table` for a batch whose file (`size` bytes) passes segment.bytes: as many
        equal runs of records as the size needs, each appended on its own (and split again if
        still too large). Each run's file covers the offsets from the end of the previous one."""
        n = batch.num_rows
        pieces = min(n, -(-size // self.config.segment_bytes))
        per_piece = -(-n // pieces)
        rolled = 0
        for first in range(0, n, per_piece):
            run = offsets.slice(first, per_piece)
            rolled += self._append_table(
                segments, start, batch.slice(first, per_piece), run, version, now, created, written
            )
            start = run[-1].as_py() + 1
        return rolled

    def _should_roll(self, active: Segment, incoming_bytes: int, batch_max_ts: int, now: int) -> bool:
        """Kafka's LogSegment.shouldRoll for an append: size + incoming > segment.bytes, or the
        batch's max timestamp is more than max segment ms (KIP-354) past the segment's first batch.
        An empty segment never rolls."""
        if active.size_bytes == 0:
            return False
        if active.size_bytes + incoming_bytes > self.config.segment_bytes:
            return True
        if active.first_batch_max_timestamp >= 0:
            waited = batch_max_ts - active.first_batch_max_timestamp
        else:
            waited = now - active.created_ms
        return waited > self.config.max_segment_ms

    def _new_segment(self, file: SegmentFile, max_ts: int, tombstones: int, created: int, now: int) -> Segment:
        return Segment(
            id=uuid.uuid4().hex[:16],
            base_offset=file.base_offset,
            next_offset=file.next_offset,
            files=(file,),
            record_count=file.record_count,
            size_bytes=file.size_bytes,
            first_batch_max_timestamp=max_ts,
            max_timestamp=max_ts,
            created_ms=created,
            sealed=False,
            tombstone_count=tombstones,
            last_modified_ms=now,
        )

    @staticmethod
    def _grow_segment(active: Segment, file: SegmentFile, max_ts: int, tombstones: int, now: int) -> Segment:
        return replace(
            active,
            next_offset=file.next_offset,
            files=(*active.files, file),
            record_count=active.record_count + file.record_count,
            size_bytes=active.size_bytes + file.size_bytes,
            max_timestamp=max(active.max_timestamp, max_ts),
            tombstone_count=active.tombstone_count + tombstones,
            last_modified_ms=now,
        )

    # -- roll -----------------------------------------------------------------------------------
    def roll(self, *, now_ms: int | None = None) -> Manifest:
        """Seal the active segment (a no-op when there is none or it is empty).

        Args:
            now_ms: the time the next segment is taken to begin; None for the wall clock.

        Returns:
            The manifest after the roll (the current one when there was nothing to seal).

        Raises:
            ConcurrentModification: other writers kept winning the conditional commit past its retries.
            StorageError: the store failed after its retries.
        """
        now = wall_clock_ms() if now_ms is None else now_ms

        def change(manifest: Manifest) -> Manifest | None:
            active = manifest.active_segment
            return None if active is None or active.is_empty else manifest.rolled(now)

        return self.commit(change)

    # -- read -----------------------------------------------------------------------------------
    def read(
        self,
        from_offset: int | None = None,
        *,
        max_records: int | None = None,
        columns: list[str] | None = None,
        manifest: Manifest | None = None,
    ) -> pa.Table:
        """Records at offsets ≥ `from_offset` (default: the log start), in offset order.

        `manifest` reads a snapshot a reader already holds. An offset below the log start or
        beyond the log end raises OffsetOutOfRange, like a Kafka fetch.

        Args:
            from_offset: the first offset to read; None for the log start.
            max_records: at most this many records.
            columns: these columns of SEGMENT_SCHEMA only; None for every one.
            manifest: the snapshot to read; None for the current manifest.

        Returns:
            A pyarrow table in SEGMENT_SCHEMA (or of `columns`), in offset order.

        Raises:
            OffsetOutOfRange: `from_offset` lies outside [log start, log end].
            LakeCleanerError: the manifest or a segment file is missing or damaged (named).
            StorageError: the store failed after its retries.
        """
        batches = list(self.iter_batches(from_offset, columns=columns, manifest=manifest, max_records=max_records))
        schema = SEGMENT_SCHEMA if columns is None else pa.schema([SEGMENT_SCHEMA.field(c) for c in columns])
        table = pa.concat_tables(batches) if batches else schema.empty_table()
        return table if max_records is None else table.slice(0, max_records)

    def iter_batches(
        self,
        from_offset: int | None = None,
        *,
        columns: list[str] | None = None,
        manifest: Manifest | None = None,
        max_records: int | None = None,
    ) -> Iterator[pa.Table]:
        """Yield the log file by file from `from_offset` (see `read`)."""
        m = manifest or self.manifest()
        start = m.log_start_offset if from_offset is None else from_offset
        if not m.log_start_offset <= start <= m.next_offset:
            raise OffsetOutOfRange(
                f"offset {start} is out of range for {self.topic}-{self.partition}: the log holds "
                f"[{m.log_start_offset}, {m.next_offset}); read from the log start offset or later"
            )
        read_columns = None if columns is None else sorted(set(columns) | {"offset"}, key=SEGMENT_SCHEMA.names.index)
        remaining = max_records
        for seg in m.segments:
            if seg.next_offset <= start:
                continue
            for file in seg.files:
                if file.next_offset <= start:
                    continue
                table = read_segment_file(self.store, self.prefix + file.path, columns=read_columns, expected=file)
                if file.base_offset < start:
                    table = table.filter(pc.greater_equal(table.column("offset"), start))
                if columns is not None:
                    table = table.select(columns)
                yield table
                if remaining is not None:
                    remaining -= table.num_rows
                    if remaining <= 0:
                        return


__all__ = ["BATCH_SCHEMA", "AppendResult", "PartitionLog", "partition_prefix"]
