"""Issue 79: key indexes of the files a compaction writes (`log.key_index`). The quality gate
writes each staged file's index from the file as read back, the commit references it (manifest
format 3); a later clean of the partition decides by the index which cleaned rows lose (the log is
the one a clean without indexes leaves: every strategy, vectors and rewrites); a replaced file's
index leaves with it, an orphan's goes with gc; a missing or damaged index fails its partition
with one line naming it and the fix while the others are cleaned; repair rebuilds a manifest whose
files have no index, and cleaning goes on as before."""

from __future__ import annotations

import dataclasses
import json
import re
import time
from typing import Any

import numpy as np
import pytest
from pyspark.sql import SparkSession

from lakecleaner.audit import audit_key
from lakecleaner.engine.keys import key_hash
from lakecleaner.engine.quality import CHECKS
from lakecleaner.engine.report import COMMITTED, FAILED_QUALITY, UNCLEANABLE
from lakecleaner.lake import Lake, Topic
from lakecleaner.log.key_index import read_key_index
from lakecleaner.log.manifest import SegmentFile
from lakecleaner.log.repair import repair_partition
from lakecleaner.log.segment_files import read_segment_file
from lakecleaner.policy.erasure import HIDDEN, LIVE
from lakecleaner.retention.gc import gc_topic
from tests.engine.helpers import compact, keyed

pytestmark = pytest.mark.backends("local", "seaweedfs")

NOW = 10_000_000


def _topic(lake: Lake, name: str, partitions: int = 1, **config: Any) -> Topic:
    return lake.create_topic(
        name,
        partitions,
        {"cleanup.policy": "compact", "file.delete.delay.ms": 0, "min.cleanable.dirty.ratio": 0.01, **config},
    )


def _append(topic: Topic, values: dict[str, str | None], timestamp: int, partition: int = 0) -> None:
    log = topic.partition(partition)
    log.append(keyed(values, timestamp), now_ms=timestamp)
    log.roll(now_ms=timestamp)


def _files(topic: Topic, partition: int = 0) -> list[SegmentFile]:
    return [f for s in topic.partition(partition).manifest().segments for f in s.files]


def _latest(topic: Topic, partition: int = 0) -> dict[bytes, bytes | None]:
    out: dict[bytes, bytes | None] = {}
    for row in topic.partition(partition).read(columns=["key", "value"]).to_pylist():
        assert row["key"] not in out
        out[row["key"]] = row["value"]
    return out


def _assert_indexes_are_the_files_keys(topic: Topic, partition: int = 0) -> None:
    log = topic.partition(partition)
    for file in _files(topic, partition):
        assert file.key_index is not None, file.path
        stored = read_segment_file(log.store, log.prefix + file.path, columns=["offset", "key"], physical=True)
        index = read_key_index(log.store, log.prefix, file.key_index, (file.base_offset, file.next_offset))
        assert index.column("offset").to_pylist() == stored.column("offset").to_pylist()
        assert index.column("key").to_pylist() == stored.column("key").to_pylist()
        assert np.array_equal(index.column("hash").to_numpy(), key_hash(stored.column("key")))


def test_a_compacted_file_carries_the_index_of_its_keys_and_the_manifest_is_format_3(
    spark: SparkSession, lake: Lake
) -> None:
    topic = _topic(lake, "indexed")
    _append(topic, {f"k{i:03d}": f"v{i}" for i in range(50)}, 1000)
    _append(topic, {f"k{i:03d}": f"w{i}" for i in range(0, 50, 7)}, 2000)
    assert not compact(spark, lake, topic, NOW).failed
    _assert_indexes_are_the_files_keys(topic)
    log = topic.partition(0)
    assert json.loads(log.store.read(log.manifest_key))["format_version"] == 3
    (file,) = _files(topic)
    assert file.key_index is not None and file.key_index.path in log.manifest().live_paths()


@pytest.mark.parametrize("strategy", ["offset", "timestamp"])
@pytest.mark.parametrize("dead_ratio", [0.3, 0.0])
def test_a_clean_of_indexed_files_leaves_the_log_a_clean_without_indexes_leaves(
    spark: SparkSession, lake: Lake, strategy: str, dead_ratio: float
) -> None:
    config = {"compaction.strategy": strategy, "lakecleaner.rewrite.dead.ratio": dead_ratio}
    with_index, without = _topic(lake, f"with-{strategy}", **config), _topic(lake, f"without-{strategy}", **config)
    for topic in (with_index, without):
        _append(topic, {f"k{i:03d}": f"v{i}" for i in range(200)}, 1000)
        assert not compact(spark, lake, topic, NOW).failed
    _drop_indexes(without)
    for round_, timestamp in enumerate((3000, 5000, 7000)):
        updates = {f"k{i:03d}": None if i % 11 == 0 else f"u{round_}-{i}" for i in range(round_, 200, 9)}
        for topic in (with_index, without):
            _append(topic, updates, timestamp)
            report = compact(spark, lake, topic, NOW + timestamp)
            assert [p.status for p in report.partitions] == [COMMITTED], report.partitions[0].message
        _drop_indexes(without)
        assert _latest(with_index) == _latest(without)
        _assert_indexes_are_the_files_keys(with_index)


def _drop_indexes(topic: Topic) -> None:
    """The partition's files without their key indexes (as a lake written before them)."""
    log = topic.partition(0)

    def change(m: Any) -> Any:
        segments = tuple(
            dataclasses.replace(s, files=tuple(dataclasses.replace(f, key_index=None) for f in s.files))
            for s in m.segments
        )
        return m.next_version(NOW, segments=segments)

    log.commit(change)


def test_a_replaced_files_index_leaves_with_it_and_gc_deletes_an_orphan_index(spark: SparkSession, lake: Lake) -> None:
    topic = _topic(lake, "leaves", **{"lakecleaner.rewrite.dead.ratio": 0.0})
    _append(topic, {f"k{i:03d}": f"v{i}" for i in range(40)}, 1000)
    assert not compact(spark, lake, topic, NOW).failed
    log = topic.partition(0)
    (first,) = _files(topic)
    assert first.key_index is not None
    _append(topic, {"k001": "w1"}, 2000)
    assert not compact(spark, lake, topic, NOW + 2000).failed  # a ratio of 0: the group is rewritten
    assert {p.path for p in log.manifest().pending_deletes} >= {first.path, first.key_index.path}
    orphan = first.path.replace(".parquet", "-orphan.parquet") + ".keys-0123456789ab.arrow"
    log.store.write(log.prefix + orphan, b"an index of no file")
    gc_topic(lake, "leaves", int(time.time() * 1000) + 10**9)  # past the orphan's age, by the wall clock
    assert not log.store.exists(log.prefix + first.key_index.path)
    assert not log.store.exists(log.prefix + orphan)
    (second,) = _files(topic)
    assert second.key_index is not None and log.store.exists(log.prefix + second.key_index.path)


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (lambda store, key: store.delete(key), r"key index .*\.keys-[0-9a-f]+\.arrow is missing.*lakecleaner repair"),
        (lambda store, key: store.write(key, b"LCKI" + bytes(30)), r"not the one its manifest entry describes"),
    ],
)
def test_a_missing_or_damaged_index_fails_its_partition_in_one_line_and_the_others_are_cleaned(
    spark: SparkSession, lake: Lake, damage: Any, said: str
) -> None:
    topic = _topic(lake, "damaged", partitions=2)
    for p in (0, 1):
        _append(topic, {f"k{i:03d}": f"v{i}" for i in range(30)}, 1000, partition=p)
    assert not compact(spark, lake, topic, NOW).failed
    (file,) = _files(topic, 0)
    assert file.key_index is not None
    damage(lake.store, topic.partition(0).prefix + file.key_index.path)
    for p in (0, 1):
        _append(topic, {"k003": "new"}, 2000, partition=p)
    report = compact(spark, lake, topic, NOW + 2000)
    by_partition = {p.partition: p for p in report.partitions}
    assert by_partition[0].status == UNCLEANABLE
    assert by_partition[0].message.count("\n") == 0
    assert re.search(said, by_partition[0].message)
    assert by_partition[1].status == COMMITTED
    assert _latest(topic, 1)[b"k003"] == b"new"


def test_repair_rebuilds_a_manifest_without_indexes_and_cleaning_goes_on(spark: SparkSession, lake: Lake) -> None:
    topic = _topic(lake, "repaired")
    _append(topic, {f"k{i:03d}": f"v{i}" for i in range(60)}, 1000)
    assert not compact(spark, lake, topic, NOW).failed
    log = topic.partition(0)
    lake.store.write(log.manifest_key, b"{ damaged")
    report = repair_partition(lake.store, "repaired", 0, log.config, force=True)
    assert all(f.key_index is None for s in report.manifest.segments for f in s.files)
    _append(topic, {"k002": "w2", "k005": None}, 2000)
    assert [p.status for p in compact(spark, lake, topic, NOW + 2000).partitions] == [COMMITTED]
    latest = _latest(topic)
    assert latest[b"k002"] == b"w2" and latest[b"k005"] is None and len(latest) == 60
    _assert_indexes_are_the_files_keys(topic)


def test_a_key_two_indexed_kept_files_hold_fails_the_gate_as_unique_key(spark: SparkSession, lake: Lake) -> None:
    """The gate reads a kept file's keys by its index: a key that two kept files hold (the
    cleaner checkpoint moved over a file that holds a key again) is still found."""
    topic = _topic(lake, "twice")
    _append(topic, {f"k{i:03d}": f"v{i}" for i in range(20)}, 1000)
    assert not compact(spark, lake, topic, NOW).failed
    _append(topic, {f"k{i:03d}": f"w{i}" for i in range(20, 40)}, 2000)
    assert not compact(spark, lake, topic, NOW + 2000).failed
    log = topic.partition(0)
    files = _files(topic)
    assert len(files) == 2 and all(f.key_index is not None for f in files)
    # a copy of the first file's keys appended and cleaned apart (a clean of the new segment only)
    _append(topic, {f"k{i:03d}": f"x{i}" for i in range(5)}, 3000)
    manifest = log.manifest()

    def move_checkpoint(m: Any) -> Any:
        return m.next_version(NOW, cleaner_checkpoint=manifest.next_offset)

    log.commit(move_checkpoint)  # claims the new segment was cleaned: pass 1 trusts it
    _append(topic, {"k030": "y30"}, 4000)
    report = compact(spark, lake, topic, NOW + 4000)
    (partition,) = report.partitions
    assert partition.status != COMMITTED
    assert "keys are unique" in partition.message


def test_a_key_a_vectored_indexed_file_holds_live_twice_fails_the_gate_and_its_dead_rows_do_not(
    spark: SparkSession, lake: Lake
) -> None:
    """A kept file with a deletion vector is checked by its index's live rows: a key it still
    holds that a later kept file holds again is `unique_key` at the later copy, and a key whose
    row its vector removes is not, though the index holds that row too (the gate takes the
    index's rows apart by the vector only where two hashes repeat)."""
    topic = _topic(lake, "vectored-twice", **{"min.cleanable.dirty.ratio": 0.5})
    _append(topic, {f"k{i:03d}": f"v{i}" for i in range(20)}, 1000)  # offsets 0-19
    assert not compact(spark, lake, topic, NOW).failed
    _append(topic, {f"k{i:03d}": f"w{i}" for i in range(20, 50)}, 2000)  # offsets 20-49
    assert not compact(spark, lake, topic, NOW + 2000).failed
    log = topic.partition(0)
    _append(topic, {f"k{i:03d}": f"x{i}" for i in range(5)}, 3000)  # offsets 50-54: keys of the first file
    checkpoint = log.manifest().next_offset

    def move_checkpoint(m: Any) -> Any:
        return m.next_version(NOW, cleaner_checkpoint=checkpoint)

    log.commit(move_checkpoint)  # claims offsets 50-54 were cleaned: pass 1 trusts them
    # offsets 55-155; k001's rows at 1 and 51 lose, to deletion vectors (2 of 55 rows)
    _append(topic, {"k001": "y1"} | {f"k{i:03d}": "z" for i in range(100, 200)}, 4000)
    report = compact(spark, lake, topic, NOW + 4000)
    (partition,) = report.partitions
    assert partition.status == FAILED_QUALITY and partition.quality is not None
    assert partition.stats.groups_vectored >= 1
    unique_rule = next(c.rule for c in CHECKS if c.column == "unique_key")
    (unique,) = [f for f in partition.quality.failures if f.rule == unique_rule]
    assert unique.unexpected_count == 4  # k000, k002, k003, k004; not k001
    assert sorted(int(row["offset"]) for row in unique.sample) == [50, 52, 53, 54]


def test_the_erasure_audit_lists_a_keys_copy_in_a_files_index_as_the_files_copy(
    spark: SparkSession, lake: Lake
) -> None:
    topic = _topic(lake, "audited", **{"min.cleanable.dirty.ratio": 0.2})  # vectors up to 20% dead
    _append(topic, {f"k{i:03d}": f"v{i}" for i in range(40)}, 1000)
    assert not compact(spark, lake, topic, NOW).failed  # nothing to drop: the file is kept, and indexed
    (old,) = _files(topic)
    _append(topic, {"k001": "w1"}, 2000)
    assert not compact(spark, lake, topic, NOW + 2000).failed  # k001's first value: hidden by a vector
    files = {f.path: f for f in _files(topic)}
    assert files[old.path].deletion_vector is not None
    prefix = topic.partition(0).prefix
    copies = audit_key(lake, "audited", b"k001", NOW + 3000).copies
    judged = {c.object: (c.offset, c.kind, c.deadline) for c in copies}
    assert len(copies) == 4 == len(judged)  # each value in its file and in the file's index
    for f in files.values():
        assert f.key_index is not None
        assert judged[prefix + f.key_index.path] == judged[prefix + f.path]
    assert sorted(kind for _, kind, _ in judged.values()) == sorted([HIDDEN, HIDDEN, LIVE, LIVE])
