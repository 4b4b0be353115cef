"""`compact_topic`: one pass of Kafka's log cleaner over selected partitions of a topic, in one
Spark application (DESIGN sections 3-5).

For every requested partition: plan the groups of [log start, U) from the manifest
(`plan`); pass 1 computes each key's winning offset (`offset_map`); pass 2 recopies every
group that changes into one new file (`recopy`); the quality gate checks the staged output
against the input (`quality`; read back by pass 2's task itself where the partition's passes
and output fit one task, `recopy.gate_in_task`); each partition that passes is committed with
one conditional manifest write (`commit`). A partition ends in one status (`report`):
committed, aborted (another writer changed its inputs), failed-quality, uncleanable (a segment
file is missing or corrupt, Kafka's uncleanable partitions), failed, or nothing-to-do. Other
partitions carry on.

Crash points, for crash tests (`faults`): "engine.after_staging" (files written, no verdict
taken: a staged file changed from here on is read back again by the gate),
"engine.after_validation" (gate passed, nothing committed), then PartitionLog's
"commit.before_manifest_write" / "commit.after_manifest_write". A crash anywhere leaves each
partition's log as it was or as committed; staged files nobody references are orphans.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from lakecleaner.cleaner_state import CleaningDone, Failure, LastRun
from lakecleaner.clock import wall_clock_ms
from lakecleaner.config import (
    DEFAULT_DEDUPE_BUFFER_SIZE,
    DEFAULT_IO_BUFFER_LOAD_FACTOR,
    CleanerSettings,
    TopicConfig,
)
from lakecleaner.engine.commit import InputsChanged, apply_compaction
from lakecleaner.engine.gate_rows import GateOutcome, GateTask, gate_buckets
from lakecleaner.engine.inputs import CompactionInput, Group, StalePlan, compaction_input
from lakecleaner.engine.memory import give_back
from lakecleaner.engine.offset_map import (
    MapBudget,
    bucketed,
    build_offset_map,
    map_task,
    more_buckets,
    planned_buckets,
)
from lakecleaner.engine.offset_set import OffsetSet
from lakecleaner.engine.quality import CLEAN_KEYS_ONCE, UncleanableSegment, run_gate
from lakecleaner.engine.recopy import (
    CORRUPT,
    UNCHANGED,
    VECTORED,
    GroupResult,
    PartitionOutcome,
    PartitionTask,
    RecopyTask,
    TaskGate,
    gate_groups,
    offsets_files,
    run_recopy,
    stored_group_tasks,
    vector_ratio,
)
from lakecleaner.engine.report import (
    ABORTED,
    COMMITTED,
    FAILED,
    FAILED_QUALITY,
    MARKED_UNCLEANABLE,
    NOTHING_TO_DO,
    UNCLEANABLE,
    PartitionReport,
    RunReport,
)
from lakecleaner.engine.requests import CompactionRequest
from lakecleaner.engine.sparkio import describe, parallelism, session_kind
from lakecleaner.engine.spill import spill_path
from lakecleaner.engine.storage import StoreSpec
from lakecleaner.engine.writer import OutputTarget
from lakecleaner.errors import AdoptedByRepair, CommitStateUnknown, LakeCleanerError, StorageError
from lakecleaner.faults import crash_point
from lakecleaner.io.base import ObjectInfo
from lakecleaner.io.concurrent import map_ordered
from lakecleaner.lake import Lake, Topic
from lakecleaner.log.key_index import KeyIndex
from lakecleaner.log.layout import partition_prefix
from lakecleaner.log.leases import RunLeases
from lakecleaner.log.manifest import Manifest, Segment, SegmentFile
from lakecleaner.log.segment_files import new_segment_path
from lakecleaner.runs.reports import new_run_id

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EngineOptions:
    """Tuning knobs, with Kafka's names where Kafka has them: `dedupe_buffer_size` is
    log.cleaner.dedupe.buffer.size, the bytes of offset map one pass-1 task may hold, filled to at
    most `io_buffer_load_factor` (log.cleaner.io.buffer.load.factor); `parallelism`: tasks the
    cluster runs at once (None: the session's default parallelism)."""

    dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE
    io_buffer_load_factor: float = DEFAULT_IO_BUFFER_LOAD_FACTOR
    parallelism: int | None = None

    @staticmethod
    def of(settings: CleanerSettings) -> EngineOptions:
        return EngineOptions(settings.dedupe_buffer_size, settings.io_buffer_load_factor)

    @property
    def budget(self) -> MapBudget:
        return MapBudget(self.dedupe_buffer_size, self.io_buffer_load_factor)


@dataclass
class _Partition:
    """A partition still in the run: its plan, staged output and report."""

    plan: CompactionInput
    report: PartitionReport
    tasks: list[RecopyTask] = field(default_factory=list)
    results: list[GroupResult] = field(default_factory=list)
    outputs: list[tuple[Segment, ...]] = field(default_factory=list)
    #: The staged files as the store had them just before the gate read them.
    gated: dict[str, ObjectInfo | None] = field(default_factory=dict)
    #: Pass 1's winners over the partition's range, when found by key-bucket tasks.
    winners: OffsetSet | None = None
    #: Its group tasks, each with its share of `winners` written to the store (`_shares_stored`).
    shares: list[RecopyTask] = field(default_factory=list)
    #: The manifest and its etag as the plan read them: the commit's first attempt starts there.
    read: tuple[Manifest, str] | None = None
    #: The gate's read-back by pass 2's task (`recopy.gate_in_task`), when it did one.
    checked: TaskGate | None = None
    #: The key indexes the gate wrote of the new log's files (`_with_key_indexes`).
    indexes: list[str] = field(default_factory=list)

    @property
    def written(self) -> list[str]:
        return [path for r in self.results for path in r.written]


class _Run:
    def __init__(
        self, spark: SparkSession, lake: Lake, topic: Topic, now_ms: int, run_id: str, options: EngineOptions
    ) -> None:
        self.spark, self.lake, self.topic, self.now_ms = spark, lake, topic, now_ms
        self.config: TopicConfig = topic.config
        self.spec = StoreSpec.of(lake)
        self.options = options
        self.started = time.monotonic()
        self.report = RunReport(run_id, topic.name, now_ms, wall_clock_ms(), spark=session_kind(spark))
        self.active: dict[int, _Partition] = {}
        #: Partitions whose cleaner checkpoint the gate proved wrong and the run reset.
        self.checkpoints_reset: set[int] = set()
        #: The manifest each requested partition was planned on (for the cleaner state).
        self.planned: dict[int, Manifest] = {}
        #: The offsets files of the groups of partitions in key buckets (`_shares_stored`).
        self.offsets_files: list[str] = []

    # -- bookkeeping -----------------------------------------------------------------------------
    def step(self, name: str, action: Callable[[], None]) -> None:
        """Run one step, timed, unless no partition is left in the run (planning always runs)."""
        if self.active or name == "plan":
            with self.phase(name):
                action()

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Add the time spent inside to the run's phase `name`."""
        start = time.monotonic()
        try:
            yield
        finally:
            spent = int((time.monotonic() - start) * 1000)
            self.report.phases_ms[name] = self.report.phases_ms.get(name, 0) + spent

    def finish(self, partition: int, status: str, message: str = "", *, discard: bool = True) -> None:
        """Give a partition its final status; unless it committed, delete the files it staged."""
        state = self.active.pop(partition)
        state.report.status, state.report.message = status, message
        state.report.duration_ms = int((time.monotonic() - self.started) * 1000)
        if discard:
            self.discard(state)

    def discard(self, state: _Partition, *, every_target: bool = False) -> None:
        """Delete the files a partition staged (`every_target`: every path its tasks may have
        written, for when pass 2 did not report back), but never one the partition's manifest
        references now (a `repair` may have taken them in); when the manifest cannot be read,
        nothing is deleted (gc removes true orphans later, by their age and the run's lease)."""
        prefix = partition_prefix(self.topic.name, state.plan.partition)
        paths = {t.target.path for t in state.tasks} if every_target else set(state.written)
        paths |= set(state.indexes) | {i.path for _, i in (state.checked.outcome.indexes if state.checked else ())}
        if not paths:
            return
        try:
            referenced = self.topic.partition(state.plan.partition).manifest().referenced_paths()
        except LakeCleanerError as exc:
            log.warning(
                "%s-%d: staged files kept, the manifest is unreadable: %s", self.topic.name, state.plan.partition, exc
            )
            return
        for path in sorted(paths - referenced):
            self.lake.store.delete(prefix + path)

    # -- the steps -------------------------------------------------------------------------------
    def plan(self, requests: Sequence[CompactionRequest]) -> None:
        """Each requested partition's plan, on its manifest as it is now (read all at once over
        the bounded metadata pool)."""

        def read(request: CompactionRequest) -> tuple[Manifest, str] | LakeCleanerError:
            try:
                return self.topic.partition(request.partition).load()
            except LakeCleanerError as exc:
                return exc

        manifests = map_ordered(read, requests, self.lake.config.storage.max_concurrency)
        for request, found in zip(requests, manifests, strict=True):
            report = PartitionReport(
                request.partition,
                NOTHING_TO_DO,
                first_dirty_offset=request.first_dirty_offset,
                first_uncleanable_offset=request.first_uncleanable_offset,
            )
            self.report.partitions.append(report)
            try:
                if isinstance(found, LakeCleanerError):
                    raise found
                manifest = found[0]
                self.planned[request.partition] = manifest
                report.manifest_version_before = manifest.version
                plan = compaction_input(manifest, request, self.config.segment_bytes, vector_ratio(self.config) > 0)
            except StalePlan as exc:
                report.status, report.message = ABORTED, str(exc)
                continue
            except LakeCleanerError as exc:
                report.status, report.message = FAILED, f"{type(exc).__name__}: {exc}"
                continue
            if not plan.groups:
                report.message = (
                    f"[log start {manifest.log_start_offset}, U {request.first_uncleanable_offset}) is empty"
                )
                continue
            report.stats.records_read, report.stats.bytes_read = plan.record_count, plan.size_bytes
            self.active[request.partition] = _Partition(plan, report, read=found)

    def clean(self) -> None:
        """Passes 1 and 2. A partition whose offset map fits one task is cleaned by one task, pass 1
        then pass 2 (`recopy.PartitionTask`); the others first get their winners from a task per
        key bucket (`offset_map`), then a task per group. A partition whose single map outgrew its
        budget goes round again in key buckets. Partitions with unreadable files become
        uncleanable."""
        plans = [s.plan for s in self.active.values()]
        par = self.options.parallelism or parallelism(self.spark)
        buckets = planned_buckets(plans, self.options.budget, par)
        while buckets:
            keyed = {p: n for p, n in buckets.items() if n > 1}
            with self.phase("pass1_offset_map"):
                self._bucketed_maps(keyed)
            single = [p for p, n in buckets.items() if n == 1 and p in self.active]
            with self.phase("pass2_recopy"):
                buckets = self._recopy(single, [p for p in keyed if p in self.active])

    def _bucketed_maps(self, buckets: dict[int, int]) -> None:
        if not buckets:
            return
        plans = [self.active[p].plan for p in buckets]
        result = build_offset_map(
            self.spark,
            self.spec,
            self.topic.name,
            self.config,
            plans,
            buckets,
            self.options.budget,
            parallelism=self.options.parallelism or parallelism(self.spark),
            run_id=self.report.run_id,
        )
        for partition, winners in result.kept.items():
            state = self.active[partition]
            state.winners = winners
            self._mapped(state, result.buckets[partition], result.malformed[partition], result.map_bytes[partition])
        for partition, failure in result.errors.items():
            self.finish(partition, failure.status, failure.message)

    @staticmethod
    def _mapped(state: _Partition, buckets: int, malformed: int, map_bytes: int) -> None:
        state.report.stats.malformed_version_headers = malformed
        state.report.key_buckets, state.report.max_map_bytes = buckets, map_bytes

    def _recopy(self, single: list[int], keyed: list[int]) -> dict[int, int]:
        """Pass 2 of `keyed` (winners known) and passes 1 and 2 of `single`; returns the
        partitions of `single` whose maps outgrew one task, with the buckets they need."""
        items: list[RecopyTask | PartitionTask] = []
        for partition in [*single, *keyed]:
            state = self.active[partition]
            state.tasks = [self._task(i, state.plan, g) for i, g in enumerate(state.plan.groups)]
        keyed = [p for p in keyed if self._shares_stored(self.active[p])]
        if keyed:
            give_back()  # the winners and their shares, stored: not held through pass 2 (`engine.memory`)
        for partition in [*single, *keyed]:
            state = self.active[partition]
            if state.shares:
                items.extend(state.shares)
            else:
                items.append(
                    PartitionTask(map_task(self.topic.name, state.plan, self.options.budget), tuple(state.tasks))
                )
        try:
            outcomes = run_recopy(
                self.spark, self.spec, self.config, items, self.now_ms, self.config.delete_retention_ms
            )
        except BaseException:
            for partition in [*single, *keyed]:
                self.discard(self.active[partition], every_target=True)
            raise
        again: dict[int, int] = {}
        results: dict[int, list[GroupResult]] = {p: [] for p in [*single, *keyed]}
        for item, outcome in zip(items, outcomes, strict=True):
            if isinstance(outcome, PartitionOutcome):
                assert isinstance(item, PartitionTask)
                found = outcome.map
                if found.error is not None:
                    self.finish(found.partition, found.error.status, found.error.message)
                elif found.needed_bytes:
                    wanted = more_buckets(1, found.needed_bytes, self.options.budget)
                    again[found.partition] = bucketed(self.active[found.partition].plan, self.options.budget, wanted)
                else:
                    self._mapped(self.active[found.partition], 1, found.malformed, found.map_bytes)
                    self.active[found.partition].checked = outcome.gate
                    results[found.partition].extend(outcome.groups)
            else:
                assert isinstance(item, RecopyTask)
                results[item.partition].append(outcome)
        for partition, recopied in results.items():
            if partition in self.active and partition not in again:
                self._recopied(partition, recopied)
        return again

    def _shares_stored(self, state: _Partition) -> bool:
        """Write each group's share of a partition's winners to the store for its pass-2 task
        (`recopy.stored_group_tasks`); False, the partition failed, when the store did. The run
        deletes them, and the expected offsets the tasks write beside them, when it ends."""
        assert state.winners is not None
        run_id, par = self.report.run_id, self.lake.config.storage.max_concurrency
        self.offsets_files += offsets_files(run_id, state.tasks)
        try:
            state.shares = stored_group_tasks(self.lake.store, run_id, state.tasks, state.winners, par)
        except StorageError as exc:
            self.finish(state.plan.partition, FAILED, f"{type(exc).__name__}: {exc}")
            return False
        finally:
            state.winners = None  # the shares hold them now
        return True

    def drop_offsets_files(self) -> None:
        """Delete the groups' offsets files the run wrote (`_shares_stored`); a store that fails
        leaves them to gc, which removes a run's `_staging/` files once its lease is gone."""
        try:
            self.lake.store.delete_many(self.offsets_files)
        except StorageError as exc:
            log.warning("%s: this run's offsets files are left to gc: %s", self.topic.name, exc)

    def _recopied(self, partition: int, results: list[GroupResult]) -> None:
        """Each output segment of a partition whose groups all came back, and its counters."""
        state = self.active[partition]
        state.results = results
        failures = [r for r in state.results if r.error is not None]
        if failures:
            status = UNCLEANABLE if any(r.status == CORRUPT for r in failures) else FAILED
            self.finish(partition, status, failures_text([str(r.error) for r in failures]))
            return
        state.outputs = [self._outputs(g, r) for g, r in zip(state.plan.groups, state.results, strict=True)]
        self._count(state)

    def _task(self, index: int, plan: CompactionInput, group: Group) -> RecopyTask:
        target = OutputTarget(
            topic=self.topic.name,
            partition=plan.partition,
            prefix=partition_prefix(self.topic.name, plan.partition),
            path=new_segment_path(group.base_offset),
            base_offset=group.base_offset,
            next_offset=group.next_offset,
            written_ms=self.now_ms,
            manifest_version=plan.manifest.version + 1,
            first_batch_max_timestamp=group.first_batch_max_timestamp,
            max_timestamp=group.max_timestamp,
            last_modified_ms=group.last_modified_ms,
            run_id=self.report.run_id,
        )
        return RecopyTask(
            index,
            plan.partition,
            plan.log_start_offset,
            group.files,
            group.live_count,
            group.tombstone_count,
            target,
            dead_ratio=vector_ratio(self.config),
            erase_by_ms=plan.erase_by_ms(self.config, self.now_ms),
        )

    def _outputs(self, group: Group, result: GroupResult) -> tuple[Segment, ...]:
        """The segment(s) a group becomes: its own when unchanged, its own with its files' new
        deletion vectors when vectored, else one new sealed segment."""
        if result.status == UNCHANGED:
            return group.segments
        if result.status == VECTORED:
            by_path = {f.path: f for f in result.vectored}
            return tuple(
                dataclasses.replace(s, files=tuple(by_path.get(f.path, f) for f in s.files)) for s in group.segments
            )
        file = result.file
        return (
            Segment(
                id=uuid.uuid4().hex[:16],
                base_offset=group.base_offset,
                next_offset=group.next_offset,
                files=() if file is None else (file,),
                record_count=0 if file is None else file.record_count,
                size_bytes=0 if file is None else file.size_bytes,
                first_batch_max_timestamp=-1 if file is None else group.first_batch_max_timestamp,
                max_timestamp=-1 if file is None else group.max_timestamp,
                created_ms=self.now_ms,
                sealed=True,
                tombstone_count=result.tombstone_count,
                earliest_delete_horizon_ms=result.earliest_delete_horizon_ms,
                last_modified_ms=group.last_modified_ms,
            ),
        )

    @staticmethod
    def _count(state: _Partition) -> None:
        stats = state.report.stats
        for result, outputs in zip(state.results, state.outputs, strict=True):
            stats.records_written += sum(s.record_count for s in outputs)
            stats.bytes_written += sum(s.size_bytes for s in outputs)
            if result.status == UNCHANGED:
                stats.groups_unchanged += 1
                continue
            if result.status == VECTORED:
                stats.groups_vectored += 1
                stats.records_superseded += result.counts.superseded
                written = set(result.vectors_written)
                vectors = [f.deletion_vector for f in result.vectored if f.deletion_vector is not None]
                stats.bytes_rewritten += sum(v.size_bytes for v in vectors if v.path in written)
                continue
            stats.groups_rewritten += 1
            stats.bytes_rewritten += 0 if result.file is None else result.file.size_bytes
            c = result.counts
            stats.records_superseded += c.superseded
            stats.unkeyed_dropped += c.unkeyed
            stats.below_log_start_dropped += c.below_log_start
            stats.tombstones_stamped += c.tombstones_stamped
            stats.tombstones_removed += c.tombstones_removed
        state.report.files_written = state.written

    def candidate(self, state: _Partition, current: Manifest) -> Manifest:
        """The manifest the commit would write on `current` (InputsChanged if it cannot)."""
        return apply_compaction(
            current,
            state.plan,
            [s for group in state.outputs for s in group],
            now_ms=self.now_ms,
            delete_delay_ms=self.config.file_delete_delay_ms,
            run_id=self.report.run_id,
        )

    def gate(self) -> None:
        """The quality gate over every partition still in the run. The manifests and the staged
        files' HEADs of all partitions are read at once, over the bounded metadata pool. A
        partition whose pass-2 task read its output back is judged on what that task found, when
        every staged file is still the one it read (the same HEAD); the others are read back by the
        gate's own tasks."""
        read = self.topic.read_manifests(list(self.active))
        for partition, reason in read.failures.items():
            self.finish(partition, FAILED, f"{reason}; nothing was committed")
        staged = self.staged_files(list(self.active.values()))
        tasks: list[GateTask] = []
        checked: list[GateOutcome] = []
        segments: list[UncleanableSegment] = []
        for partition, state in list(self.active.items()):
            try:
                segments.extend(self._uncleanable_segments(state, read.manifests[partition]))
            except InputsChanged as exc:
                self.finish(partition, ABORTED, str(exc))
                continue
            except AdoptedByRepair as exc:
                self.finish(partition, FAILED, str(exc), discard=False)
                continue
            found = staged[partition]
            if isinstance(found, StorageError):
                self.finish(partition, FAILED, f"{found}; nothing was committed")
                continue
            state.gated = found
            if state.checked is not None and state.checked.staged == found:
                checked.append(state.checked.outcome)
            else:
                tasks.extend(self._gate_tasks(state))
        verdicts, indexes = run_gate(
            self.spark,
            self.spec,
            self.topic.name,
            tasks,
            checked,
            list(self.active),
            segments,
            self.config,
            self.now_ms,
        )
        for partition, verdict in verdicts.items():
            self.active[partition].report.quality = verdict
            self._with_key_indexes(self.active[partition], indexes.get(partition, {}))
            if not verdict.success:
                message = verdict.summary()
                if CLEAN_KEYS_ONCE.rule in {f.rule for f in verdict.failures}:
                    message += "\n" + self._reset_checkpoint(self.active[partition])
                self.finish(partition, FAILED_QUALITY, message)

    @staticmethod
    def _with_key_indexes(state: _Partition, indexes: dict[str, KeyIndex]) -> None:
        """The partition's new log with the key indexes the gate wrote of its files (staged ones,
        and kept ones that had none: `log.key_index`): the commit references them (so a clean
        that changed nothing else commits them too); a discard deletes them."""
        state.indexes = sorted(i.path for i in indexes.values())

        def indexed(file: SegmentFile) -> SegmentFile:
            index = indexes.get(file.path)
            return file if index is None else dataclasses.replace(file, key_index=index)

        state.outputs = [
            tuple(dataclasses.replace(s, files=tuple(indexed(f) for f in s.files)) for s in group)
            for group in state.outputs
        ]

    def _reset_checkpoint(self, state: _Partition) -> str:
        """Reset the cleaner checkpoint of a partition whose cleaned section holds a key twice (the
        gate's `clean_keys_once`): it claims records were cleaned that were not, so the next run
        must map the partition from its log start. Kafka likewise resets a checkpoint it cannot
        use to the log start (`cleanableOffsets`). Only the checkpoint changes, and only if no
        other writer moved it meanwhile; the partition is then not marked uncleanable, so the next
        scheduled run cleans it. Returns what was done, for the partition's message."""
        partition = state.plan.partition
        checkpoint = state.plan.manifest.cleaner_checkpoint

        def change(current: Manifest) -> Manifest | None:
            if current.cleaner_checkpoint != checkpoint:
                return None
            return current.next_version(self.now_ms, cleaner_checkpoint=None)

        try:
            self.topic.partition(partition).commit(change)
        except LakeCleanerError as exc:
            return (
                f"the cleaner checkpoint {checkpoint} could not be reset ({exc}): run `lakecleaner repair "
                f"--topic {self.topic.name} --partition {partition} --force`"
            )
        self.checkpoints_reset.add(partition)
        return f"the cleaner checkpoint {checkpoint} was reset: the next run maps the partition from its log start"

    def _uncleanable_segments(self, state: _Partition, current: Manifest) -> list[UncleanableSegment]:
        after = self.candidate(state, current)
        u = state.plan.first_uncleanable_offset
        planned = {s.id: s for s in after.segments if s.base_offset >= u}
        return [
            UncleanableSegment(state.plan.partition, s.id, s.base_offset, planned.get(s.id) == s)
            for s in current.segments
            if s.base_offset >= u
        ]

    def _gate_tasks(self, state: _Partition) -> list[GateTask]:
        """The partition's groups as the new log would hold them, checked by a task per key bucket:
        as many as the output's keys need within the offset map's budget."""
        groups = gate_groups(state.tasks, state.results)
        prefix = partition_prefix(self.topic.name, state.plan.partition)
        buckets = gate_buckets(groups, self.options.budget.bytes)
        return [
            GateTask(
                state.plan.partition,
                prefix,
                groups,
                state.plan.clean_end,
                b,
                buckets,
                spill_path(self.report.run_id, "gate") if buckets > 1 else "",
            )
            for b in range(buckets)
        ]

    def staged_files(self, states: list[_Partition]) -> dict[int, dict[str, ObjectInfo | None] | StorageError]:
        """Each file the run wrote for `states` that their commits will name (the groups' files and
        deletion vectors, the gate's key indexes), made durable (`ObjectStore.sync`: the tasks
        wrote them unsynced) and as the store has it now (None: missing), by partition, or the
        storage error that kept a partition's files from answering; one sync and HEAD per file,
        all in flight at once over the bounded metadata pool."""
        store = self.lake.store
        wanted = [(s.plan.partition, path) for s in states for path in sorted({*s.written, *s.indexes})]

        def head(item: tuple[int, str]) -> ObjectInfo | StorageError | None:
            partition, path = item
            key = partition_prefix(self.topic.name, partition) + path
            try:
                store.sync(key)
                return store.stat_if_present(key)
            except StorageError as exc:
                return exc

        files: dict[int, dict[str, ObjectInfo | None]] = {s.plan.partition: {} for s in states}
        errors: dict[int, StorageError] = {}
        infos = map_ordered(head, wanted, self.lake.config.storage.max_concurrency)
        for (partition, path), info in zip(wanted, infos, strict=True):
            if isinstance(info, StorageError):
                errors.setdefault(partition, info)
            else:
                files[partition][path] = info
        return {p: errors.get(p, found) for p, found in files.items()}

    def staged_problems(self, state: _Partition, now: dict[str, ObjectInfo | None] | StorageError) -> list[str]:
        """Each staged file that is no longer the one the gate validated: missing, of another size
        than the writer reported, or replaced since the gate (another size or version tag)."""
        if isinstance(now, StorageError):
            return [str(now)]
        location = self.lake.store.location
        prefix = partition_prefix(self.topic.name, state.plan.partition)
        sizes = {f.path: f.size_bytes for group in state.outputs for s in group for f in s.files}
        problems = []
        for path, info in now.items():
            gated = state.gated.get(path)
            if info is None:
                problems.append(f"staged file {location(prefix + path)} is missing")
            elif info.size != sizes.get(path, info.size):
                problems.append(f"staged file {path} has {info.size} bytes, not the {sizes[path]} the gate validated")
            elif gated is not None and (info.size, info.version_tag) != (gated.size, gated.version_tag):
                problems.append(f"staged file {path} was replaced after the gate validated it")
        return problems

    def commit(self) -> None:
        """One conditional manifest write per partition that passed the gate, after checking that
        every file it will reference is still the one the gate read; the partitions' commits run
        at once over the bounded metadata pool (each is its own conditional write)."""
        staged = self.staged_files(list(self.active.values()))
        ready = []
        for partition, state in list(self.active.items()):
            problems = self.staged_problems(state, staged[partition])
            if problems:
                self.finish(partition, FAILED, "; ".join(problems) + "; nothing was committed")
            else:
                ready.append(state)
        outcomes = map_ordered(self._commit_one, ready, self.lake.config.storage.max_concurrency)
        for state, (status, message, version) in zip(ready, outcomes, strict=True):
            state.report.manifest_version_after = version
            self.finish(state.plan.partition, status, message, discard=status == ABORTED)

    def cleaning_done(self) -> CleaningDone:
        """What this run returns to the cleaner's manager (`CleanerStateStore.done_cleaning`, Kafka's
        `LogCleanerManager.doneCleaning` and `markPartitionUncleanable`): the partitions whose data
        failed them (`uncleanable`, a corrupt or missing file or a map too large, and
        `failed-quality`) but those whose cleaner checkpoint was reset, the partitions cleaned or
        with nothing to do, and the run. A partition the store failed (`failed`) or a lost race
        (`aborted`) is in neither: the next run retries it, as Kafka never marks a partition
        uncleanable for an IOException (kafka-cleaner-semantics.md 1.15)."""
        failures = tuple(
            Failure(p.partition, p.message, self.planned.get(p.partition))
            for p in self.report.partitions
            if p.status in MARKED_UNCLEANABLE and p.partition not in self.checkpoints_reset
        )
        cleaned = frozenset(p.partition for p in self.report.partitions if p.status in (COMMITTED, NOTHING_TO_DO))
        map_bytes = max((p.max_map_bytes for p in self.report.partitions), default=0)
        last = LastRun(
            run_id=self.report.run_id,
            started_ms=self.now_ms,
            finished_ms=self.now_ms + self.report.duration_ms,
            clean_time_ms=self.report.duration_ms,
            buffer_utilization_percent=100 * map_bytes // max(self.options.dedupe_buffer_size, 1),
        )
        return CleaningDone(failures, cleaned, last)

    def _commit_one(self, state: _Partition) -> tuple[str, str, int | None]:
        """Commit one partition: (status, message, manifest version written). Its files are kept
        unless the commit proved it lost (aborted): when the outcome is unknown they may be
        referenced now."""
        unchanged = all(r.status == UNCHANGED for r in state.results)
        wrote: list[Manifest] = []

        def change(current: Manifest) -> Manifest | None:
            after = self.candidate(state, current)
            if unchanged and current.cleaner_checkpoint == after.cleaner_checkpoint and not state.indexes:
                return None
            wrote[:] = [current, after]
            return after

        try:
            partition = self.topic.partition(state.plan.partition)
            committed = partition.commit(change, wrote=tuple(state.written), known=state.read)
        except InputsChanged as exc:
            return ABORTED, str(exc), None
        except (CommitStateUnknown, AdoptedByRepair) as exc:
            return FAILED, str(exc), None
        if not wrote:
            return NOTHING_TO_DO, "every group was already clean", None
        before_ids, after_ids = ({s.id for s in m.segments} for m in wrote)
        state.report.segments_replaced = len(before_ids - after_ids)
        state.report.segments_written = len(after_ids - before_ids)
        return COMMITTED, _unchanged_message(wrote[0], wrote[1], state.indexes) if unchanged else "", committed.version


def _unchanged_message(before: Manifest, after: Manifest, indexes: Sequence[str]) -> str:
    """What a commit in which every group stayed as it was changed."""
    moved = before.cleaner_checkpoint != after.cleaner_checkpoint
    changes = [w for w, did in (("the cleaner checkpoint moved", moved), ("its files got key indexes", indexes)) if did]
    return "every group was already clean: " + " and ".join(changes)


def compact_topic(
    spark: SparkSession,
    lake: Lake,
    topic_name: str,
    requests: Sequence[CompactionRequest],
    now_ms: int,
    *,
    run_id: str | None = None,
    options: EngineOptions | None = None,
) -> RunReport:
    """Compact the requested partitions of `topic_name` as of `now_ms`; returns the run report,
    which is also stored under `_lakecleaner/runs/<topic>/<run id>/report.json`.

    Raises ValueError for requests that do not fit the topic (another topic, a partition twice,
    a topic whose cleanup.policy does not include compact).
    """
    topic = lake.topic(topic_name)
    _check_requests(topic, requests)
    run = _Run(spark, lake, topic, now_ms, run_id or new_run_id(), options or EngineOptions())
    retries_before = lake.store.retries
    prefixes = [partition_prefix(topic_name, r.partition) for r in requests]
    try:
        leases = RunLeases(lake.store, run.report.run_id, prefixes, lake.config.storage.max_concurrency)
        with leases:  # gc leaves the run's files alone
            run.step("plan", lambda: run.plan(requests))
            if run.active:
                run.clean()
            crash_point("engine.after_staging")
            run.step("quality_gate", run.gate)
            crash_point("engine.after_validation")
            run.step("commit", run.commit)
    except BaseException:
        for state in run.active.values():
            run.discard(state, every_target=True)
        raise
    finally:
        run.drop_offsets_files()
        describe(spark, None)
    run.report.duration_ms = int((time.monotonic() - run.started) * 1000)
    run.report.storage_retries = lake.store.retries - retries_before
    run.report.save(lake.store)
    lake.cleaner_state.done_cleaning(topic_name, run.cleaning_done(), topic.config, now_ms)
    return run.report


def _check_requests(topic: Topic, requests: Sequence[CompactionRequest]) -> None:
    if not topic.config.compact:
        raise ValueError(
            f"topic {topic.name} has cleanup.policy={','.join(sorted(topic.config.cleanup_policy))}; "
            "only topics whose policy includes compact are compacted"
        )
    seen: set[int] = set()
    for r in requests:
        if r.topic != topic.name:
            raise ValueError(f"a request for topic {r.topic} was passed to the compaction of {topic.name}")
        if r.partition in seen:
            raise ValueError(f"partition {topic.name}-{r.partition} is requested twice")
        seen.add(r.partition)


#: The failed groups a partition's message names one by one; the rest are counted.
NAMED_FAILURES = 3


def failures_text(errors: list[str]) -> str:
    """A partition's failed groups in one message: the first few errors, then how many more groups
    failed (a disk that fills fails every group writing to it: one line, not one per group)."""
    named = "; ".join(errors[:NAMED_FAILURES])
    more = len(errors) - NAMED_FAILURES
    return named if more <= 0 else f"{named}; and {more} more group{'s' if more > 1 else ''} failed"
