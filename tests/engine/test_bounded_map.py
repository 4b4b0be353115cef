"""Bounded memory per task (log.cleaner.dedupe.buffer.size): a partition's keys are split into as
many hash buckets as its offset map needs, and the result is exactly that of one map."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql import SparkSession

from lakecleaner.engine import EngineOptions, RunReport
from lakecleaner.engine.memory import resident_bytes
from lakecleaner.engine.offset_map import PLANNED_ENTRY_BYTES
from lakecleaner.engine.report import COMMITTED
from lakecleaner.engine.sparkio import Overlap, parallelism, run_tasks
from lakecleaner.lake import Lake, Topic
from lakecleaner.log.manifest import SegmentFile
from lakecleaner.workload import WorkloadSpec, generate
from tests.engine.helpers import compact, rows

TINY = 64 * 1024


def _topic(root: Path, spec: WorkloadSpec) -> Topic:
    lake = Lake.open(f"file://{root}")
    topic = lake.create_topic("changes", partitions=spec.partitions, config={"cleanup.policy": "compact"})
    for partition, batch in generate(spec, 50_000):
        topic.partition(partition).append(batch, now_ms=spec.start_ms)
    for log in topic.partition_logs():
        log.roll(now_ms=spec.start_ms)
    return topic


def _both_ways(spark: SparkSession, tmp_path: Path, now: int) -> tuple[Lake, Lake, RunReport, RunReport]:
    """The lake in tmp_path/whole copied to tmp_path/tiny, then each compacted at `now`: with
    Kafka's default buffer and with a tiny one. Both commit every partition."""
    shutil.copytree(tmp_path / "whole", tmp_path / "tiny")
    whole, tiny = Lake.open(f"file://{tmp_path / 'whole'}"), Lake.open(f"file://{tmp_path / 'tiny'}")
    one = compact(spark, whole, whole.topic("changes"), now)
    bounded = compact(spark, tiny, tiny.topic("changes"), now, options=EngineOptions(dedupe_buffer_size=TINY))
    for report in (one, bounded):
        assert {p.status for p in report.partitions} == {COMMITTED}, [p.message for p in report.partitions]
    return whole, tiny, one, bounded


def _compact_both(spark: SparkSession, tmp_path: Path, spec: WorkloadSpec) -> tuple[Lake, Lake, RunReport]:
    """The topic compacted twice, with Kafka's default buffer and with a tiny one; the same
    counters, every bucket's map within the tiny buffer."""
    _topic(tmp_path / "whole", spec)
    whole, tiny, one, bounded = _both_ways(spark, tmp_path, spec.start_ms + spec.timestamp_spread_ms + 1)
    for p in one.partitions:
        assert p.key_buckets == 1
    budget = int(TINY * EngineOptions().io_buffer_load_factor)
    for p in bounded.partitions:
        assert p.key_buckets >= p.stats.records_read * PLANNED_ENTRY_BYTES // budget
        assert 0 < p.max_map_bytes <= budget
        assert p.stats == one.partition(p.partition).stats
    return whole, tiny, bounded


def test_a_tiny_dedupe_buffer_gives_the_same_log(spark: SparkSession, tmp_path: Path) -> None:
    """200k keys, 300k records in two partitions, cleaned with a 64 KB offset map per task: about
    a hundred key buckets per partition, each map within the buffer, and the same log, record for
    record, as one unbounded map."""
    spec = WorkloadSpec(keys=200_000, records=300_000, partitions=2, value_size=8, tombstone_share=0.05, seed=3)
    whole, tiny, _ = _compact_both(spark, tmp_path, spec)
    for p in range(2):
        assert rows(tiny.topic("changes"), p) == rows(whole.topic("changes"), p)
    indexes = {f.key_index.path.split("/")[-1] for p in range(2) for f in _files(tiny, p) if f.key_index}
    left = [f.name for f in (tmp_path / "tiny").rglob("*") if f.suffix in {".arrow", ".bin"}]
    assert sorted(left) == sorted(indexes)  # spills and winners go with their round, the groups' offsets
    # files with the run: what is left is the key index of each file of the log


def test_maps_that_outgrow_the_plan_run_again_in_more_buckets(spark: SparkSession, tmp_path: Path) -> None:
    """Keys much longer than planned: the first buckets outgrow the buffer, stop, and the partition
    runs again in as many more buckets as the size they reached asks for."""
    spec = WorkloadSpec(
        keys=20_000, records=30_000, partitions=1, value_size=8, key_prefix="customer/" + "x" * 200 + "/", seed=4
    )
    whole, tiny, bounded = _compact_both(spark, tmp_path, spec)
    assert rows(tiny.topic("changes")) == rows(whole.topic("changes"))
    planned = -(-30_000 * PLANNED_ENTRY_BYTES // int(TINY * EngineOptions().io_buffer_load_factor))
    assert bounded.partition(0).key_buckets > 2 * planned


def test_a_mostly_cleaned_partition_is_mapped_by_one_task_holding_its_dirty_keys(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Kafka's map holds the dirty section only: 200k keys compacted once, then 1,000 records over
    the same keys appended. With a 64 KB buffer, far too small for 200k keys but enough for
    1,000, the second run maps the partition in one task, its map within the buffer, and leaves
    the same log as a run with Kafka's default buffer."""
    spec = WorkloadSpec(keys=200_000, records=200_000, partitions=1, value_size=8, tombstone_share=0.05, seed=5)
    topic = _topic(tmp_path / "whole", spec)
    now = spec.start_ms + spec.timestamp_spread_ms + 1
    first = compact(spark, Lake.open(f"file://{tmp_path / 'whole'}"), topic, now)
    assert first.partition(0).status == COMMITTED
    more = WorkloadSpec(keys=200_000, records=1_000, partitions=1, value_size=8, seed=6, start_ms=now + 1)
    for _, batch in generate(more, 1_000):
        topic.partition(0).append(batch, now_ms=now + 2)
    topic.partition(0).roll(now_ms=now + 2)
    whole, tiny, one, bounded = _both_ways(spark, tmp_path, more.start_ms + more.timestamp_spread_ms + 1)
    part = bounded.partition(0)
    assert part.key_buckets == 1
    assert 0 < part.max_map_bytes <= int(TINY * EngineOptions().io_buffer_load_factor)
    assert part.stats.records_read > 100_000  # the cleaned section was read, past the map
    assert part.stats == one.partition(0).stats
    assert rows(tiny.topic("changes")) == rows(whole.topic("changes"))


ITEM_BYTES = 256 * 1024 * 1024


@pytest.mark.parametrize("alone", [False, True], ids=["in-order", "too-heavy-to-overlap"])
def test_a_worker_keeps_what_its_last_item_freed_and_does_not_grow_with_its_items(
    spark: SparkSession, alone: bool
) -> None:
    """A worker keeps what its allocators freed after an item for the next one to reuse
    (`engine.memory`, `Growth`), rather than give it back and fault it in again: with Arrow's
    allocator set to keep what it frees (`workers.WORKER_ENV`), of items in a row that each
    allocate, write and free 256 MB of Arrow memory (as a bucket's map does), each after the first
    grows its worker by less than 64 MB as it allocates (it reuses what the one before freed), and
    begins within 64 MB of the second: the worker holds what one item used, not what its items
    left. The same for items
    heavier than `OVERLAP_BYTES` in a task whose items may overlap: they run alone, in the task's
    thread (`map_bounded`)."""
    if resident_bytes() is None:
        pytest.skip("reads a worker's resident memory from /proc")
    workers = parallelism(spark)
    heavy = {"weight": lambda _: ITEM_BYTES, "overlap": Overlap(4 * workers)} if alone else {}
    done = run_tasks(spark, list(range(4 * workers)), _resident_then_allocate(), "items of 256 MB", **heavy)
    grew: dict[int, list[int]] = {}
    for pid, _, growth in done:
        grew.setdefault(pid, []).append(growth)
    for growths in grew.values():
        assert max(growths[1:]) < 64 * 1024 * 1024, growths
    for resident in _began([(pid, at) for pid, at, _ in done]).values():
        assert max(resident[1:]) - resident[1] < 64 * 1024 * 1024, resident


def _resident_then_allocate() -> Callable[[int], tuple[int, int, int]]:
    """An item that allocates, writes and frees 256 MB of Arrow memory (as a bucket's map does) and
    returns its worker, the worker's resident memory as it began, and how much that grew while
    the item held its 256 MB."""

    def resident_then_allocate(item: int) -> tuple[int, int, int]:  # local: sent to the workers by value
        resident = resident_bytes() or 0
        values = pa.repeat(pa.scalar(item, pa.int64()), ITEM_BYTES // 8)  # from Arrow's pool, written
        holding = resident_bytes() or 0
        del values
        return os.getpid(), resident, holding - resident

    return resident_then_allocate


def _began(done: list[tuple[int, int]]) -> dict[int, list[int]]:
    """Each worker's resident memory as each of its items began, in order; some worker ran several."""
    began: dict[int, list[int]] = {}
    for pid, resident in done:
        began.setdefault(pid, []).append(resident)
    assert any(len(r) > 1 for r in began.values()), began
    return began


def test_a_worker_begins_the_next_steps_items_without_what_overlapping_items_freed(spark: SparkSession) -> None:
    """Items that overlap (a step that reads files, `Overlap`) are not followed one by one by a
    give-back, which would cost each of them (16-34% measured), but their task is: the worker
    then begins the next step's items (pass 1's key buckets after its scatter step) from what one
    item uses, not from what the overlapping items left. Each worker's first item of the second
    step begins within 64 MB of its later ones, though the first step's items each freed 256 MB."""
    if resident_bytes() is None:
        pytest.skip("reads a worker's resident memory from /proc")

    def allocate(item: int) -> int:  # local: sent to the workers by value
        values = pc.add(pa.array(np.zeros(ITEM_BYTES // 8, np.int64)), item)
        del values
        return os.getpid()

    def resident(item: int) -> tuple[int, int]:
        return os.getpid(), resident_bytes()

    workers = parallelism(spark)
    items = list(range(2 * workers))
    overlapped = run_tasks(spark, items, allocate, "overlapping items of 256 MB", overlap=Overlap(2 * workers))
    began: dict[int, list[int]] = {}
    for pid, at in run_tasks(spark, list(range(3 * workers)), resident, "the next step's items"):
        began.setdefault(pid, []).append(at)
    assert set(overlapped) & {pid for pid, r in began.items() if len(r) > 1}, (overlapped, began)
    for at in began.values():
        assert at[0] - min(at[1:], default=at[0]) < 64 * 1024 * 1024, at


#: Run in a new process, whose malloc no other test has touched: write a partition's winners over
#: 64M offsets as 16 key buckets' files of about 2.6 MB, then join them as the driver does (on 8
#: threads), and print the resident memory before and after, and the joined set's bytes.
_JOIN_IN_A_NEW_PROCESS = """
import sys
import numpy as np
from lakecleaner.config import StorageSettings
from lakecleaner.engine.memory import give_back, resident_bytes
from lakecleaner.engine.offset_map import MapResult, OffsetMap, _united_winners
from lakecleaner.engine.offset_set import OffsetSet
from lakecleaner.engine.offsets_file import store_offsets
from lakecleaner.engine.storage import StoreSpec
from lakecleaner.log.layout import partition_prefix

span, buckets, root = 64_000_000, 16, sys.argv[1]
spec = StoreSpec("file://" + root, StorageSettings(max_concurrency=8))
rng = np.random.default_rng(7)

def stored(b):
    members = b + buckets * np.flatnonzero(rng.integers(0, 2, span // buckets, dtype=np.uint8)).astype(np.int64)
    winners = OffsetSet.of(members, 0, span)
    return MapResult(0, b, stored=store_offsets(spec.open(), partition_prefix("t", 0), f"w{b}.bin", winners))

outcomes = [stored(b) for b in range(buckets)]
give_back()
before = resident_bytes()
united = _united_winners(spec, "t", outcomes, {0: (0, span)}, OffsetMap())
print(before, resident_bytes(), len(united[0].packed))
"""


def test_the_driver_keeps_a_partitions_joined_winners_not_the_files_its_threads_read(tmp_path: Path) -> None:
    """The driver joins a partition's key buckets' winners files read on its I/O threads: once
    joined it holds the union (a bit per offset) and gives back the files' buffers, which glibc
    otherwise keeps at the top of each reading thread's heap, out of `malloc_trim`'s reach: 19-26
    MB above the 8 MB set here, 45-60 MB above 12.5 MB at 100M offsets in 34 buckets."""
    if resident_bytes() is None:
        pytest.skip("reads the process's resident memory from /proc")
    done = subprocess.run(
        [sys.executable, "-c", _JOIN_IN_A_NEW_PROCESS, str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    before, after, joined = map(int, done.stdout.split())
    assert joined == 8_000_000
    assert after - before < joined + 6 * 1024 * 1024, (before, after)


def _files(lake: Lake, partition: int) -> list[SegmentFile]:
    return [f for s in lake.topic("changes").partition(partition).manifest().segments for f in s.files]
