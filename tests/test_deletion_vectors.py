"""Issue 79: deletion vectors of segment files. The stored vector is Iceberg v3's deletion-vector
blob (pyiceberg's own reader reads it); every reader of the log leaves out the rows a file's
vector removes, the Iceberg log table too; a vector that is missing or is not the one its entry
describes is a clear error naming it and the fix; a manifest with a vector is written as format 2
and one without as 1; repair gives each file back its largest readable vector; gc keeps a file's
vector and deletes a replaced one once due."""

from __future__ import annotations

import dataclasses
import json
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyiceberg.table.deletion_vector import DeletionVector as IcebergVector

from lakecleaner.audit import audit_key, audit_topic
from lakecleaner.cli.audit import kind_words
from lakecleaner.config import LakeConfig, TopicSpec
from lakecleaner.errors import CorruptManifest, CorruptSegment
from lakecleaner.extras import open_lake
from lakecleaner.lake import Lake
from lakecleaner.log.deletion_vectors import MAGIC, decode_vector, encode_vector, write_vector
from lakecleaner.log.manifest import Manifest
from lakecleaner.log.partition import PartitionLog
from lakecleaner.log.repair import repair_partition
from lakecleaner.log.segment_files import read_segment_file
from lakecleaner.policy.erasure import HIDDEN, LIVE
from lakecleaner.retention.executor import trim_partition
from lakecleaner.retention.gc import gc_topic
from tests.engine.helpers import keyed
from tests.support.tables import assert_table_is_the_log, with_tables

pytestmark = pytest.mark.backends("local", "seaweedfs")

T0 = 1_772_323_200_000


# -- the stored blob -------------------------------------------------------------------------
@settings(max_examples=100, deadline=None)
@given(st.sets(st.integers(0, (1 << 31) - 1), max_size=300) | st.sets(st.integers(0, 5000), max_size=4000))
def test_a_vector_is_icebergs_deletion_vector_blob_of_its_positions(positions: set[int]) -> None:
    blob = encode_vector(np.array(sorted(positions), np.int64))
    (length,) = struct.unpack(">I", blob[:4])
    body = blob[4:-4]
    assert length == len(body) and body[:4] == MAGIC and struct.unpack(">I", blob[-4:])[0] == zlib.crc32(body)
    icebergs = IcebergVector._deserialize_bitmap(body[4:])  # pyiceberg's reader of the same payload
    assert sorted(p for i, bitmap in enumerate(icebergs) for p in ((i << 32) + v for v in bitmap)) == sorted(positions)
    assert decode_vector(blob, "v").tolist() == sorted(positions)


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda b: b[:-1], "wrong length or magic"),
        (lambda b: b[:4] + b"\x00" + b[5:], "wrong length or magic"),
        (lambda b: b[:-6] + bytes([b[-6] ^ 1]) + b[-5:], "CRC does not match"),
        (lambda b: b[:5], "5 bytes"),
    ],
)
def test_a_damaged_blob_is_corrupt_naming_it_and_the_fix(damage: object, reason: str) -> None:
    blob = encode_vector(np.array([1, 5, 9], np.int64))
    with pytest.raises(
        CorruptSegment, match=rf"deletion vector s3://b/v.bin is corrupt \(.*{reason}.*lakecleaner repair"
    ):
        decode_vector(damage(blob), "s3://b/v.bin")  # type: ignore[operator]


# -- the log ---------------------------------------------------------------------------------
def with_vector(log: PartitionLog, positions: list[int], now_ms: int = T0, erase_by_ms: int | None = None) -> Manifest:
    """Commit a vector of `positions` on the partition's first file, replacing (pending delete)
    the one it had, as a clean that removes those rows without rewriting the file would."""
    current = log.manifest()
    file = current.segments[0].files[0]
    vector = write_vector(log.store, log.prefix, file.path, current.version + 1, np.array(positions), erase_by_ms)

    def change(m: Manifest) -> Manifest:
        first = m.segments[0]
        old = first.files[0].deletion_vector
        files = (dataclasses.replace(first.files[0], deletion_vector=vector), *first.files[1:])
        pending = m.with_pending_deletes([old.path] if old else [], now_ms + log.config.file_delete_delay_ms, "vector")
        segments = (dataclasses.replace(first, files=files), *m.segments[1:])
        return m.next_version(now_ms, segments=segments, pending_deletes=pending)

    return log.commit(change, wrote=[vector.path])


def eight_records(lake: Lake, topic: str = "accounts") -> PartitionLog:
    log = lake.create_topic(topic, 1, {"cleanup.policy": "compact", "file.delete.delay.ms": 0}).partition(0)
    log.append(keyed({f"k{i}": f"v{i}" for i in range(8)}, 1000), now_ms=T0)
    return log


def written_format(log: PartitionLog) -> int:
    return int(json.loads(log.store.read(log.manifest_key))["format_version"])


def test_every_reader_of_the_log_leaves_out_the_rows_a_files_vector_removes(lake: Lake) -> None:
    log = eight_records(lake)
    assert written_format(log) == 1  # no vector: the format older lakecleaners read
    with_vector(log, [1, 3, 4])
    assert written_format(log) == 2
    assert log.read().column("offset").to_pylist() == [0, 2, 5, 6, 7]
    assert [b.num_rows for b in log.iter_batches(2)] == [4]
    assert log.read(5, columns=["key"]).column("key").to_pylist() == [b"k5", b"k6", b"k7"]
    (file,) = log.manifest().segments[0].files
    stored = read_segment_file(log.store, log.prefix + file.path, expected=file, physical=True)
    assert stored.num_rows == file.record_count == 8 and file.live_count == 5

    with_vector(log, [1, 3, 4, 7])  # a later clean: a new vector, the old one pending delete
    assert log.read().column("offset").to_pylist() == [0, 2, 5, 6]


def test_a_missing_or_swapped_vector_stops_reads_of_its_partition_with_a_clear_error(lake: Lake) -> None:
    log = eight_records(lake)
    with_vector(log, [1, 3])
    vector = log.manifest().segments[0].files[0].deletion_vector
    assert vector is not None
    key = log.prefix + vector.path
    good = lake.store.read(key)
    lake.store.write(key, encode_vector(np.array([1, 4])))  # a valid vector, not this one
    with pytest.raises(CorruptSegment, match=r"not the one its manifest entry describes.*lakecleaner repair"):
        log.read()
    lake.store.delete(key)
    missing = r"deletion vector .*\.dv-\d+-[0-9a-f]+\.bin is missing.*lakecleaner repair"
    with pytest.raises(CorruptSegment, match=missing):
        log.read()
    lake.store.write(key, good)
    assert log.read().column("offset").to_pylist() == [0, 2, 4, 5, 6, 7]


def test_a_vector_of_another_file_or_removing_more_rows_than_the_file_holds_is_a_corrupt_manifest(lake: Lake) -> None:
    log = eight_records(lake)
    with_vector(log, [1])
    raw = json.loads(lake.store.read(log.manifest_key))
    entry = raw["segments"][0]["files"][0]["deletion_vector"]
    for lie in ({"path": "segments/other.parquet.dv-3-0123456789ab.bin"}, {"cardinality": 9}):
        lake.store.write(log.manifest_key, json.dumps({**raw, "segments": [_with(raw, {**entry, **lie})]}).encode())
        with pytest.raises(CorruptManifest, match="deletion vector"):
            log.manifest()


def _with(raw: dict[str, object], entry: dict[str, object]) -> dict[str, object]:
    segment = raw["segments"][0]  # type: ignore[index]
    return {**segment, "files": [{**segment["files"][0], "deletion_vector": entry}]}


def test_repair_gives_each_file_its_largest_readable_vector(lake: Lake) -> None:
    log = eight_records(lake)
    with_vector(log, [1])
    with_vector(log, [1, 6])
    lake.store.write(log.manifest_key, b"{ damaged")
    report = repair_partition(lake.store, "accounts", 0, log.config, force=True)
    assert log.read().column("offset").to_pylist() == [0, 2, 3, 4, 5, 7]
    vector = report.manifest.segments[0].files[0].deletion_vector
    assert vector is not None and vector.cardinality == 2

    lake.store.write(log.prefix + vector.path, b"not a vector")
    report = repair_partition(lake.store, "accounts", 0, log.config, force=True)
    assert log.read().column("offset").to_pylist() == [0, 2, 3, 4, 5, 6, 7]  # the earlier clean's vector
    assert "unreadable" in report.left_out[vector.path]


def test_gc_keeps_a_files_vector_and_deletes_the_one_it_replaced_once_due(lake: Lake) -> None:
    log = eight_records(lake)
    with_vector(log, [1])
    first = log.manifest().segments[0].files[0].deletion_vector
    with_vector(log, [1, 2])
    second = log.manifest().segments[0].files[0].deletion_vector
    assert first is not None and second is not None
    gc_topic(lake, "accounts", T0 + 1)
    assert not lake.store.exists(log.prefix + first.path) and lake.store.exists(log.prefix + second.path)
    assert log.read().column("offset").to_pylist() == [0, 3, 4, 5, 6, 7]


def test_the_log_table_reads_what_consume_reads_after_a_vector_and_a_trim(
    lake_config: LakeConfig, tmp_path: Path
) -> None:
    lake = open_lake(with_tables(lake_config, tmp_path))
    log = eight_records(lake, "orders")
    log.append(keyed({"k1": "v1b", "k3": None}, 2000), now_ms=T0)
    with_vector(log, [1, 3])  # the superseded rows, as a clean removes them (the follower syncs)
    assert_table_is_the_log(lake, "orders")  # pyiceberg and DuckDB: the vector's rows are position deletes
    trim_partition(lake, "orders", 0, 3, now_ms=T0)  # a trim inside the file, on top of its vector
    assert_table_is_the_log(lake, "orders")


def test_the_erasure_audit_reports_a_row_a_vector_removed_as_hidden_not_gone(lake: Lake) -> None:
    log = eight_records(lake)
    log.append(keyed({"k1": "v1b"}, 2000), now_ms=T0)
    with_vector(log, [1])  # k1's first value: logically deleted, still in the file
    audit = audit_key(lake, "accounts", b"k1", T0)
    assert sorted((c.offset, c.kind) for c in audit.copies) == [(1, HIDDEN), (8, LIVE)]


def test_a_vectors_erasure_deadline_is_when_the_audit_says_its_rows_are_physically_gone(lake: Lake) -> None:
    """KIP-354 with vectors: the rows a vector hides are physically present until the first run
    after its erase_by_ms rewrites the file, then file.delete.delay.ms, then the next run's delete;
    `audit key` says so in words, and `audit topic` names the vector."""
    hour = 3_600_000
    topics = {**lake.config.topics, "accounts": TopicSpec("accounts", 1, "@hourly")}
    lake = Lake(lake.store, dataclasses.replace(lake.config, topics=topics))
    config = {"cleanup.policy": "compact", "max.compaction.lag.ms": 2 * hour, "file.delete.delay.ms": 60_000}
    log = lake.create_topic("accounts", 1, config).partition(0)
    log.append(keyed({f"k{i}": f"v{i}" for i in range(8)}, T0), now_ms=T0)
    log.append(keyed({"k1": "v1b"}, T0), now_ms=T0)
    with_vector(log, [1], erase_by_ms=T0 + hour)  # ahead of the dirty records' own T0 + 2 hours
    audit = audit_key(lake, "accounts", b"k1", T0)
    hidden = next(c for c in audit.copies if c.kind == HIDDEN)
    assert hidden.deadline is not None and hidden.deadline.gone_by_ms == T0 + hour + hour + 60_000 + hour
    assert not audit.unreadable  # the commit record of the vector is metadata, not an unreadable segment
    assert not audit.overdue and audit_key(lake, "accounts", b"k1", T0 + 5 * hour).overdue
    words = kind_words(hidden)
    assert words.startswith("hidden: logically deleted, physically present until ") and "T" in words
    (partition,) = audit_topic(lake, "accounts", T0)
    assert partition.what is not None and "1 records a deletion vector hides" in partition.what
