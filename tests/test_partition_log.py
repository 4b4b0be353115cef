"""The partition log on both backends: append, roll rules, reads, races, crashes, corruption, repair."""

from __future__ import annotations

import random
from dataclasses import replace
from functools import partial

import numpy as np
import pyarrow as pa
import pytest

from lakecleaner.engine.gate_rows import Expectation, GateGroup, GateRules, GateTask, gate_check
from lakecleaner.engine.recopy import UNCHANGED, RecopyTask, recopy_group
from lakecleaner.engine.storage import StoreSpec
from lakecleaner.engine.writer import OutputTarget
from lakecleaner.errors import (
    CorruptManifest,
    CorruptSegment,
    InvalidRecord,
    InvalidTransition,
    LakeCleanerError,
    OffsetOutOfRange,
    TopicExists,
    TopicNotFound,
)
from lakecleaner.faults import CRASH_EXIT_STATUS, on_crash_point
from lakecleaner.lake import Lake
from lakecleaner.log import segment_files
from lakecleaner.log.manifest import Manifest
from lakecleaner.log.records import Record, encode_version, table_to_records
from lakecleaner.log.repair import repair_partition
from tests.support import lake_process
from tests.support.backends import ALL_BACKENDS

pytestmark = pytest.mark.backends(*ALL_BACKENDS)  # and the real object store, SeaweedFS

NOW = 1_700_000_000_000


def recs(n: int, ts: int = NOW, prefix: str = "k", value_size: int = 10) -> list[Record]:
    return [Record(f"{prefix}{i}".encode(), b"v" * value_size, ts) for i in range(n)]


def test_create_topic_and_append_assigns_contiguous_offsets(lake: Lake) -> None:
    topic = lake.create_topic("orders", partitions=3)
    assert lake.list_topics() == ["orders"]
    log = topic.partition(1)
    first = log.append(recs(5), now_ms=NOW)
    second = log.append(recs(3), now_ms=NOW)
    assert (first.base_offset, first.next_offset, second.base_offset, second.next_offset) == (0, 5, 5, 8)
    table = log.read()
    assert table.column("offset").to_pylist() == list(range(8))
    assert topic.partition(0).read().num_rows == 0
    with pytest.raises(TopicExists):
        lake.create_topic("orders")
    assert lake.create_topic("orders", exist_ok=True).partitions == 3
    with pytest.raises(TopicNotFound, match=r"partitions 0\.\.2"):
        topic.partition(3)


def test_records_round_trip_with_headers_tombstones_and_null_keys(lake: Lake) -> None:
    log = lake.create_topic("events").partition(0)
    sent = [
        Record(b"a", b"1", 10, (("version", encode_version(7)), ("dup", b"x"), ("dup", None))),
        Record(b"a", None, 11),
        Record(None, b"unkeyed", 12),
    ]
    log.append(sent, now_ms=NOW)
    got = table_to_records(log.read())
    assert [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in got] == [
        (i, s.key, s.value, s.timestamp, s.headers) for i, s in enumerate(sent)
    ]


def test_records_without_timestamp_get_append_time(lake: Lake) -> None:
    log = lake.create_topic("events").partition(0)
    log.append([Record(b"a", b"1")], now_ms=NOW)
    assert log.read().column("timestamp").to_pylist() == [NOW]


def test_compacted_topic_rejects_records_without_a_key(lake: Lake) -> None:
    log = lake.create_topic("cdc", config={"cleanup.policy": "compact"}).partition(0)
    with pytest.raises(InvalidRecord, match="cannot accept records without a key"):
        log.append([Record(b"a", b"1"), Record(None, b"2")], now_ms=NOW)
    assert log.manifest().next_offset == 0
    assert lake.store.list(log.prefix + "segments/") == []


def test_roll_on_size(lake: Lake) -> None:
    log = lake.create_topic("t", config={"segment.bytes": 4000}).partition(0)
    log.append(recs(10), now_ms=NOW)
    size_one = log.manifest().segments[0].size_bytes
    assert size_one < 4000 < 2 * size_one + 100
    log.append(recs(10), now_ms=NOW)
    segments = log.manifest().segments
    assert [(s.base_offset, s.next_offset, s.sealed) for s in segments] == [(0, 10, True), (10, 20, False)]


def test_no_roll_while_size_plus_incoming_fits(lake: Lake) -> None:
    log = lake.create_topic("t", config={"segment.bytes": 1_000_000}).partition(0)
    for _ in range(3):
        log.append(recs(10), now_ms=NOW)
    (segment,) = log.manifest().segments
    assert (segment.record_count, len(segment.files), segment.sealed) == (30, 3, False)


def test_roll_on_segment_ms_measured_from_the_first_batch_max_timestamp(lake: Lake) -> None:
    log = lake.create_topic("t", config={"segment.ms": 1000}).partition(0)
    log.append(recs(2, ts=NOW), now_ms=NOW)
    log.append(recs(2, ts=NOW + 1000), now_ms=NOW)  # waited exactly segment.ms: no roll
    assert len(log.manifest().segments) == 1
    log.append(recs(2, ts=NOW + 1001), now_ms=NOW)  # one ms more: roll
    segments = log.manifest().segments
    assert [(s.base_offset, s.first_batch_max_timestamp) for s in segments] == [(0, NOW), (4, NOW + 1001)]


def test_kip354_max_compaction_lag_bounds_segment_ms_on_compacted_topics(lake: Lake) -> None:
    log = lake.create_topic(
        "cdc", config={"cleanup.policy": "compact", "segment.ms": 10_000_000, "max.compaction.lag.ms": 500}
    ).partition(0)
    log.append(recs(2, ts=NOW), now_ms=NOW)
    log.append(recs(2, ts=NOW + 501), now_ms=NOW)
    assert len(log.manifest().segments) == 2
    plain = lake.create_topic("plain", config={"segment.ms": 10_000_000, "max.compaction.lag.ms": 500}).partition(0)
    plain.append(recs(2, ts=NOW), now_ms=NOW)
    plain.append(recs(2, ts=NOW + 501), now_ms=NOW)
    assert len(plain.manifest().segments) == 1


def test_explicit_roll_seals_and_next_append_opens_a_new_segment(lake: Lake) -> None:
    log = lake.create_topic("t").partition(0)
    log.roll(now_ms=NOW)  # empty log: nothing to roll
    assert log.manifest().segments == ()
    log.append(recs(3), now_ms=NOW)
    log.roll(now_ms=NOW)
    log.append(recs(2), now_ms=NOW)
    assert [(s.base_offset, s.sealed) for s in log.manifest().segments] == [(0, True), (3, False)]


def test_an_append_larger_than_segment_bytes_is_split_so_segments_stay_within_it(lake: Lake) -> None:
    """Kafka (`UnifiedLog.maybeRoll`, `LogSegment.shouldRoll`): the active segment rolls before a
    batch that would take it past segment.bytes, and producers send small batches, so a segment
    holds at most segment.bytes unless one batch alone is larger. One large append here is split
    into files that fit, each rolling by the same rule."""
    log = lake.create_topic("t", config={"segment.bytes": 20_000}).partition(0)
    incompressible = [Record(f"k{i}".encode(), random.Random(i).randbytes(40), NOW) for i in range(3000)]
    result = log.append(incompressible, now_ms=NOW)
    segments = log.manifest().segments
    assert (result.base_offset, result.next_offset, result.rolled) == (0, 3000, len(segments) - 1)
    assert len(segments) >= 5
    assert all(s.size_bytes <= 20_000 for s in segments)
    assert [s.sealed for s in segments] == [True] * (len(segments) - 1) + [False]
    assert log.read().column("offset").to_pylist() == list(range(3000))


def test_segment_ms_of_records_without_timestamps_counts_from_the_previous_roll(lake: Lake) -> None:
    """Kafka (`LogSegment.timeWaitedForRoll`): without a first-batch timestamp, segment.ms counts
    from the segment's creation (`LogSegment.created`), which is the previous roll, or the log's
    creation for the first segment, not the first append into it."""
    log = lake.create_topic("t", config={"segment.ms": 1000}, now_ms=NOW).partition(0)
    untimestamped = [Record(b"k", b"v", -1)]
    log.append(untimestamped, now_ms=NOW + 900)
    assert log.manifest().segments[0].created_ms == NOW
    log.append(untimestamped, now_ms=NOW + 1001)  # 1001 ms after the log was created: roll
    assert [s.base_offset for s in log.manifest().segments] == [0, 1]
    log.roll(now_ms=NOW + 2000)
    log.append(untimestamped, now_ms=NOW + 2500)
    assert log.manifest().segments[-1].created_ms == NOW + 2000
    log.append(untimestamped, now_ms=NOW + 3000)  # exactly segment.ms after the roll: no roll
    log.append(untimestamped, now_ms=NOW + 3001)
    assert [s.base_offset for s in log.manifest().segments] == [0, 1, 2, 4]


def test_the_last_append_sets_a_segments_last_modified_time(lake: Lake) -> None:
    """Kafka (`LogSegment.largestTimestamp`): without record timestamps a segment's time is its
    lastModified, the time of its last write, which retention.ms reads."""
    log = lake.create_topic("t", now_ms=NOW).partition(0)
    log.append([Record(b"k", b"v", -1)], now_ms=NOW + 10)
    log.append([Record(b"k", b"v", -1)], now_ms=NOW + 20)
    (segment,) = log.manifest().segments
    assert (segment.created_ms, segment.modified_ms, segment.max_timestamp) == (NOW, NOW + 20, -1)


def test_an_append_at_offsets_the_writer_chose_keeps_them_with_gaps(lake: Lake) -> None:
    """Kafka (`UnifiedLog.appendAsFollower`): a follower or a replication tool appends records at
    the offsets they had in the source, with gaps (compacted records, transaction markers); the
    log end offset becomes the last offset + 1."""
    log = lake.create_topic("mirror").partition(0)
    result = log.append(recs(3), offsets=[5, 9, 10], now_ms=NOW)
    assert (result.base_offset, result.next_offset, result.record_count) == (5, 11, 3)
    log.append(recs(2, prefix="j"), now_ms=NOW)  # assigned from the log end
    log.append(recs(1, prefix="x"), offsets=[20], now_ms=NOW)
    assert log.read().column("offset").to_pylist() == [5, 9, 10, 11, 12, 20]
    assert log.read(6).column("offset").to_pylist() == [9, 10, 11, 12, 20]  # a fetch inside a gap
    assert log.manifest().next_offset == 21


@pytest.mark.parametrize(
    ("offsets", "message"),
    [
        ([3, 4], "offset 3 is below the log's next offset 5"),
        ([7, 7], r"strictly increasing, but offset 7 \(record 1\) follows 7"),
        ([9, 8], r"strictly increasing, but offset 8 \(record 1\) follows 9"),
        ([6], "1 offsets given for 2 records"),
        ([-1, 6], "must not be negative"),
        ([6, 2**63 - 1], "offset 9223372036854775807 is past the last a log can hold"),
    ],
)
def test_offsets_that_break_the_log_order_are_refused_and_nothing_is_written(
    lake: Lake, offsets: list[int], message: str
) -> None:
    log = lake.create_topic("mirror").partition(0)
    log.append(recs(5), now_ms=NOW)
    before = log.manifest()
    files = lake.store.list(log.prefix + "segments/")
    with pytest.raises(InvalidRecord, match=message):
        log.append(recs(2, prefix="n"), offsets=offsets, now_ms=NOW)
    assert log.manifest() == before
    assert lake.store.list(log.prefix + "segments/") == files


def test_a_log_at_the_last_int64_offset_refuses_more_records_and_stays_readable(lake: Lake) -> None:
    """Kafka's offsets are int64: the last record a log can hold is at 2^63 - 2, so that its next
    offset (2^63 - 1) is still an offset. An append past it is refused and nothing is written;
    the log keeps serving its records."""
    log = lake.create_topic("mirror").partition(0)
    log.append(recs(2), offsets=[2**63 - 3, 2**63 - 2], now_ms=NOW)
    before = log.manifest()
    assert before.next_offset == 2**63 - 1
    with pytest.raises(InvalidRecord, match="is full: 1 more records would take its next offset past"):
        log.append(recs(1, prefix="n"), now_ms=NOW)
    assert log.manifest() == before
    assert log.read(2**63 - 2).column("offset").to_pylist() == [2**63 - 2]


def test_read_from_offset_and_out_of_range(lake: Lake) -> None:
    log = lake.create_topic("t", config={"segment.bytes": 3000}).partition(0)
    for _ in range(4):
        log.append(recs(10), now_ms=NOW)
    assert log.read(25).column("offset").to_pylist() == list(range(25, 40))
    assert log.read(40).num_rows == 0
    assert log.read(5, max_records=3).column("offset").to_pylist() == [5, 6, 7]
    assert log.read(0, columns=["offset", "key"]).column_names == ["offset", "key"]
    with pytest.raises(OffsetOutOfRange, match=r"offset 41 is out of range.*\[0, 40\)"):
        log.read(41)


def test_table_append_with_missing_optional_columns(lake: Lake) -> None:
    log = lake.create_topic("t").partition(0)
    log.append(pa.table({"key": [b"a", b"b"], "value": [b"1", None]}), now_ms=NOW)
    got = log.read()
    assert got.column("timestamp").to_pylist() == [NOW, NOW]
    assert got.column("value").to_pylist() == [b"1", None]
    with pytest.raises(ValueError, match="unknown columns"):
        log.append(pa.table({"key": [b"a"], "colour": ["red"]}))


def test_two_processes_appending_at_once_get_unique_contiguous_offsets(lake: Lake) -> None:
    lake.create_topic("race")
    batches, size = 15, 7
    procs = [
        lake_process.start(
            lake.config,
            {"action": "append", "topic": "race", "partition": 0, "tag": tag, "batches": batches, "batch_size": size},
        )
        for tag in ("A", "B")
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err.decode()
    log = lake.topic("race").partition(0)
    table = log.read()
    assert table.column("offset").to_pylist() == list(range(2 * batches * size))
    values = {v.decode() for v in table.column("value").to_pylist()}
    expected = {f"{tag}:{i}:{j}" for tag in ("A", "B") for i in range(batches) for j in range(size)}
    assert values == expected
    # every batch stayed whole and in order within its producer
    for tag in ("A", "B"):
        mine = [v.decode() for v in table.column("value").to_pylist() if v.decode().startswith(tag)]
        assert mine == sorted(mine, key=lambda s: (int(s.split(":")[1]), int(s.split(":")[2])))
    # files of lost races were removed: every data file is referenced
    referenced = log.manifest().referenced_paths()
    on_disk = {o.key[len(log.prefix) :] for o in lake.store.list(log.prefix + "segments/")}
    assert on_disk == referenced


def test_a_commit_from_a_known_manifest_that_moved_on_applies_its_change_to_the_newest(lake: Lake) -> None:
    """`commit(known=...)` starts from the manifest the caller read (a compaction's plan); when
    another writer committed since, the change is applied again to the manifest read back, and
    nothing the other writer committed is lost."""
    log = lake.create_topic("orders").partition(0)
    log.append(recs(3), now_ms=NOW)
    known = log.load()
    log.append(recs(2, prefix="late"), now_ms=NOW)  # another writer, after the caller's read
    seen: list[int] = []

    def move_checkpoint(manifest: Manifest) -> Manifest:
        seen.append(manifest.version)
        return manifest.next_version(NOW, cleaner_checkpoint=3)

    committed = log.commit(move_checkpoint, known=known)
    assert seen == [known[0].version, known[0].version + 1]  # the stale start, then the newest
    assert committed.cleaner_checkpoint == 3 and committed.next_offset == 5
    assert log.manifest() == committed
    assert log.read().column("offset").to_pylist() == list(range(5))
    fresh = log.load()
    seen.clear()
    assert log.commit(move_checkpoint, known=fresh).version == fresh[0].version + 1
    assert seen == [fresh[0].version]  # unchanged since the read: one attempt


def test_crash_between_data_write_and_manifest_commit_leaves_the_old_log(lake: Lake) -> None:
    log = lake.create_topic("crash").partition(0)
    log.append(recs(4), now_ms=NOW)
    before = log.read()
    proc = lake_process.start(
        lake.config,
        {"action": "append", "topic": "crash", "partition": 0, "tag": "X", "batches": 1, "batch_size": 5},
        env={"LAKECLEANER_CRASH_AT": "append.after_data_write"},
    )
    proc.communicate(timeout=120)
    assert proc.returncode == CRASH_EXIT_STATUS
    assert log.read().equals(before)
    orphans = {o.key[len(log.prefix) :] for o in lake.store.list(log.prefix + "segments/")}
    assert len(orphans - log.manifest().referenced_paths()) == 1  # the orphan, left for gc
    assert log.append(recs(1), now_ms=NOW).base_offset == 4


def test_failure_before_manifest_write_keeps_old_log_in_process(lake: Lake) -> None:
    log = lake.create_topic("t").partition(0)
    log.append(recs(2), now_ms=NOW)

    def boom() -> None:
        raise RuntimeError("simulated crash")

    with on_crash_point("commit.before_manifest_write", boom), pytest.raises(RuntimeError):
        log.append(recs(3), now_ms=NOW)
    assert log.manifest().next_offset == 2


def test_corrupt_segment_file_gives_a_clear_error_naming_the_file(lake: Lake) -> None:
    log = lake.create_topic("t").partition(0)
    log.append(recs(3), now_ms=NOW)
    path = log.manifest().segments[0].files[0].path
    lake.store.write(log.prefix + path, b"PAR1 this is not parquet")
    with pytest.raises(CorruptSegment) as exc:
        log.read()
    assert path in str(exc.value) and "unreadable" in str(exc.value)


def test_missing_segment_file_gives_a_clear_error(lake: Lake) -> None:
    log = lake.create_topic("t").partition(0)
    log.append(recs(3), now_ms=NOW)
    path = log.manifest().segments[0].files[0].path
    lake.store.delete(log.prefix + path)
    with pytest.raises(CorruptSegment, match="missing"):
        log.read()


def test_corrupt_manifest_gives_a_clear_error_and_repair_restores_the_log(lake: Lake) -> None:
    topic = lake.create_topic("t", config={"segment.bytes": 3000})
    log = topic.partition(0)
    for i in range(5):
        log.append(recs(10, prefix=f"b{i}-"), now_ms=NOW)
    before = log.read()
    segments_before = [(s.base_offset, s.next_offset, s.record_count) for s in log.manifest().segments]
    lake.store.write(log.manifest_key, b'{"topic": "t", "trunc')
    with pytest.raises(CorruptManifest, match="lakecleaner repair"):
        log.read()
    report = repair_partition(lake.store, "t", 0, topic.config, now_ms=NOW)
    assert report.previous_state.startswith("corrupt")
    assert log.read().equals(before)
    assert [(s.base_offset, s.next_offset, s.record_count) for s in log.manifest().segments] == segments_before
    assert log.append(recs(1), now_ms=NOW).base_offset == 50


def test_repair_of_a_missing_manifest_prefers_the_committed_file_over_a_crash_orphan(lake: Lake) -> None:
    topic = lake.create_topic("t")
    log = topic.partition(0)
    log.append(recs(4), now_ms=NOW)
    crashed = lake_process.start(
        lake.config,
        {"action": "append", "topic": "t", "partition": 0, "tag": "X", "batches": 1, "batch_size": 5},
        env={"LAKECLEANER_CRASH_AT": "append.after_data_write"},
    )
    crashed.communicate(timeout=120)
    log.append(recs(2, prefix="late"), now_ms=NOW + 5)
    expected = log.read()
    lake.store.delete(log.manifest_key)
    with pytest.raises(TopicNotFound, match="repair"):
        log.read()
    report = repair_partition(lake.store, "t", 0, topic.config, now_ms=NOW)
    assert report.previous_state == "missing"
    assert log.read().equals(expected)
    assert len(report.left_out) == 1 and "superseded" in next(iter(report.left_out.values()))
    assert [p.path for p in log.manifest().pending_deletes] == list(report.left_out)


def test_repair_refuses_a_readable_manifest_without_force(lake: Lake) -> None:
    topic = lake.create_topic("t")
    topic.partition(0).append(recs(2), now_ms=NOW)
    with pytest.raises(LakeCleanerError, match="--force"):
        repair_partition(lake.store, "t", 0, topic.config)
    assert repair_partition(lake.store, "t", 0, topic.config, force=True).manifest.next_offset == 2


@pytest.mark.parametrize("whole_object_bytes", [segment_files.WHOLE_OBJECT_BYTES, 0], ids=["whole", "ranged"])
def test_segment_files_read_the_same_whole_or_by_ranges(
    lake: Lake, monkeypatch: pytest.MonkeyPatch, whole_object_bytes: int
) -> None:
    """A small file is fetched with one GET, a large one read by column ranges: the same records,
    the same checks of the file against its manifest entry, the same error for a missing file."""
    monkeypatch.setattr(segment_files, "WHOLE_OBJECT_BYTES", whole_object_bytes)
    log = lake.create_topic("t").partition(0)
    log.append(recs(5), now_ms=NOW)
    log.append(recs(3, prefix="other"), now_ms=NOW)
    first, second = log.manifest().segments[0].files
    whole = segment_files.read_segment_file(lake.store, log.prefix + first.path, expected=first)
    assert whole.column("key").to_pylist() == [r.key for r in recs(5)]
    keys = segment_files.read_segment_file(lake.store, log.prefix + first.path, columns=["key"], expected=first)
    assert keys.column_names == ["key"] and keys.column("key").equals(whole.column("key"))
    with pytest.raises(CorruptSegment, match="not the file its manifest entry describes"):
        segment_files.read_segment_file(lake.store, log.prefix + second.path, expected=first)
    lake.store.delete(log.prefix + first.path)
    with pytest.raises(CorruptSegment, match="is missing; the manifest references it"):
        segment_files.read_segment_file(lake.store, log.prefix + first.path, expected=first)


@pytest.mark.parametrize("whole_object_bytes", [segment_files.WHOLE_OBJECT_BYTES, 0], ids=["whole", "ranged"])
def test_a_tasks_second_read_of_a_file_parses_only_the_columns_its_first_did_not(
    lake: Lake, monkeypatch: pytest.MonkeyPatch, whole_object_bytes: int
) -> None:
    """Pass 1 parses a file's keys and offsets; pass 2, in the same task, reads the file a row
    group at a time and takes the keys and offsets pass 1 parsed (`FetchedFiles.keep_columns`)
    rather than parsing them again: the same records, row group by row group, and the kept
    columns' own buffers. Columns past the task's limit are not kept: parsed again, same records."""
    monkeypatch.setattr(segment_files, "WHOLE_OBJECT_BYTES", whole_object_bytes)
    log = lake.create_topic("t").partition(0)
    log.append(recs(5), now_ms=NOW)
    (entry,) = log.manifest().segments[0].files
    key = log.prefix + entry.path
    table = segment_files.read_segment_file(lake.store, key)
    meta = segment_files.read_file_meta(lake.store, key)
    lake.store.write(key, segment_files.encode_segment_file(table, meta, row_group_size=2))
    fresh = list(segment_files.read_segment_row_groups(lake.store, key, expected=entry))
    assert [t.num_rows for t in fresh] == [2, 2, 1]

    fetched = segment_files.FetchedFiles(1 << 20, 1 << 20)
    first = segment_files.read_segment_file(lake.store, key, columns=["offset", "key"], expected=entry, fetched=fetched)
    second = list(segment_files.read_segment_row_groups(lake.store, key, expected=entry, fetched=fetched))
    assert [t.equals(f, check_metadata=True) for t, f in zip(second, fresh, strict=True)] == [True] * 3
    parsed_first = {chunk.buffers()[2].address for chunk in first.column("key").chunks}
    assert {chunk.buffers()[2].address for t in second for chunk in t.column("key").chunks} <= parsed_first
    assert fetched.take_columns(key) is None  # the second read was the last: nothing is held for a third

    small = segment_files.FetchedFiles(1 << 20, first.nbytes - 1)
    segment_files.read_segment_file(lake.store, key, columns=["offset", "key"], expected=entry, fetched=small)
    assert small.take_columns(key) is None
    parsed = list(segment_files.read_segment_row_groups(lake.store, key, expected=entry, fetched=small))
    assert [t.equals(f) for t, f in zip(parsed, fresh, strict=True)] == [True] * 3


def test_columns_parsed_later_join_those_kept_of_the_file_and_are_not_parsed_again(lake: Lake) -> None:
    """A task that parsed a file's offsets, then its horizons, keeps both (pass 2 and the gate
    read a kept file's horizons again), and reads them back as parsed; columns of other rows, or
    past the limit, are not joined."""
    log = lake.create_topic("t").partition(0)
    log.append([Record(b"k%d" % i, b"v", 10) for i in range(5)], now_ms=10)
    log.roll(now_ms=10)
    (entry,) = log.manifest().segments[0].files
    key = log.prefix + entry.path
    fetched = segment_files.FetchedFiles(1 << 20, 1 << 20)
    read = partial(segment_files.read_segment_file, lake.store, key, expected=entry, fetched=fetched, physical=True)
    offsets = read(columns=["offset"])
    horizons = read(columns=["delete_horizon_ms"])
    both = fetched.columns(key, ["offset", "delete_horizon_ms"])
    assert both is not None and both.column("offset").equals(offsets.column("offset"))
    assert both.column("delete_horizon_ms").equals(horizons.column("delete_horizon_ms"))
    assert read(columns=["delete_horizon_ms"]).column(0).chunks[0].buffers() == horizons.column(0).chunks[0].buffers()
    fetched.keep_columns(key, pa.table({"timestamp": pa.array([1, 2], pa.int64())}))  # not the file's rows
    assert fetched.columns(key, ["timestamp"]) is None
    tight = segment_files.FetchedFiles(1 << 20, offsets.nbytes)
    tight.keep_columns(key, offsets)
    tight.keep_columns(key, horizons)
    assert tight.columns(key, ["offset"]) is not None and tight.columns(key, ["delete_horizon_ms"]) is None


def test_prefetch_keeps_whole_files_in_order_up_to_its_limit_and_leaves_a_missing_one_to_the_reader(
    lake: Lake,
) -> None:
    """`FetchedFiles.prefetch` fetches a partition's files whole, in order, while they fit its
    limit, whatever their size; the reads that follow are served from them. A missing file is
    not fetched: its read fails as it would have, naming the file."""
    log = lake.create_topic("t").partition(0)
    for n in (5, 3, 4):
        log.append(recs(n), now_ms=NOW)
        log.roll(now_ms=NOW)
    first, second, third = (f for s in log.manifest().segments for f in s.files)
    keys = [log.prefix + f.path for f in (first, second, third)]
    fetched = segment_files.FetchedFiles(first.size_bytes + second.size_bytes, 1 << 20)
    lake.store.delete(keys[1])
    fetched.prefetch(lake.store, [(k, f.size_bytes) for k, f in zip(keys, (first, second, third), strict=True)], 4)
    assert [fetched.holds(k) for k in keys] == [True, False, False]  # the second is missing, the third past the limit
    lake.store.delete(keys[0])  # served from what was fetched
    assert segment_files.read_segment_file(lake.store, keys[0], expected=first, fetched=fetched).num_rows == 5
    with pytest.raises(CorruptSegment, match="is missing; the manifest references it"):
        segment_files.read_segment_file(lake.store, keys[1], expected=second, fetched=fetched)


def test_a_group_that_keeps_its_files_is_read_back_from_what_pass_1_parsed_of_them(lake: Lake) -> None:
    """Pass 2 of a group whose every record won (and holds no tombstone) keeps its files and never
    reads them again; the task's gate checks them from the keys and offsets pass 1 parsed of the
    same objects (served even once the object is gone from the store), and lets them go."""
    log = lake.create_topic("t").partition(0)
    log.append(recs(5), now_ms=NOW)
    (segment,) = log.manifest().segments
    (entry,) = segment.files
    key = log.prefix + entry.path
    fetched = segment_files.FetchedFiles(1 << 20, 1 << 20)
    segment_files.read_segment_file(lake.store, key, columns=["offset", "key"], expected=entry, fetched=fetched)
    target = OutputTarget("t", 0, log.prefix, "unused.parquet", 0, 5, NOW, 1, NOW, NOW, NOW)
    group = RecopyTask(0, 0, 0, (entry,), 5, 0, target)
    result = recopy_group(lake.store, group, np.arange(5, dtype=np.int64), NOW, 0, fetched, 4)
    assert result.status == UNCHANGED
    lake.store.delete(key)
    kept = GateGroup(0, 5, (entry,), True, 0, Expectation())
    outcome = gate_check(StoreSpec.of(lake), GateRules(NOW, NOW), GateTask(0, log.prefix, (kept,), 5), fetched)
    assert outcome.unreadable is None and outcome.violations.num_rows == 0
    assert fetched.take_columns(key) is None


@pytest.mark.parametrize(
    "change",
    [
        {"version": 99},
        {"next_offset": 3, "segments": ()},
        {"log_start_offset": 0},
        {"cleaner_checkpoint": 2},
    ],
    ids=["version-skipped", "next-offset-back", "log-start-back", "checkpoint-back"],
)
def test_a_commit_that_moves_the_log_backwards_is_refused_and_writes_nothing(
    lake: Lake, change: dict[str, object]
) -> None:
    """Issue #46: commits check the transition, not only the manifest they write."""
    log = lake.create_topic("t").partition(0)
    log.append(recs(5), now_ms=NOW)
    log.roll(now_ms=NOW)
    log.commit(lambda m: m.next_version(NOW, log_start_offset=2, cleaner_checkpoint=5))
    before = lake.store.read(log.manifest_key)

    def backwards(m: Manifest) -> Manifest:
        version = change.get("version", m.version + 1)
        rest = {k: v for k, v in change.items() if k != "version"}
        if "segments" in rest:  # an empty log ending earlier: valid on its own, a step back from this one
            rest = {"segments": (), "log_start_offset": 3, "next_offset": 3}
        return replace(m, version=version, **rest)

    with pytest.raises(InvalidTransition, match="backwards"):
        log.commit(backwards)
    assert lake.store.read(log.manifest_key) == before
    assert log.commit(lambda m: m.next_version(NOW, cleaner_checkpoint=None)).cleaner_checkpoint is None  # a reset
