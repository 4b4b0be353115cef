"""Every stored object lakecleaner reads is parsed strictly (issue #45): whatever bytes a manifest,
a topic.json, a consumer group's offsets or a cleaner state holds, reading it gives the object or
that object's one Corrupt… error — never another exception. Hypothesis mutates valid objects of each
type (a value swapped for one of another JSON type, numbers out of range, deep nesting, NaN and
1e999, truncation) and feeds random bytes."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from lakecleaner.cleaner_state import CleanerState, LastRun, UncleanablePartition
from lakecleaner.errors import CorruptCleanerState, CorruptManifest, CorruptOffsets
from lakecleaner.io.kafka.committed import CommittedOffset
from lakecleaner.lake import Lake, TopicMetadata
from lakecleaner.log.manifest import Manifest, PendingDelete, Segment, SegmentFile
from lakecleaner.log.source import KafkaSource, RecordSample, SourceBreak
from lakecleaner.offsets import GroupOffsets

MANIFEST = Manifest(
    "t",
    0,
    7,
    2,
    30,
    10,
    (
        Segment(
            "a",
            0,
            10,
            (SegmentFile("segments/00000000000000000000-a.parquet", 0, 10, 10, 900),),
            10,
            900,
            5,
            9,
            1,
            True,
            2,
            77,
        ),
        Segment("b", 10, 30, (SegmentFile("segments/00000000000000000010-b.parquet", 10, 30, 20, 1800),), 20, 1800),
    ),
    (PendingDelete("segments/00000000000000000000-old.parquet", 123, "compacted"),),
    99,
    None,
    properties={"commit_id": "c"},
)
TOPIC = TopicMetadata(
    "t",
    3,
    {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.3, "segment.bytes": 4096},
    5,
    KafkaSource("main", "cid", "src", "tid-2", 7, 100, (SourceBreak("cid", "src", None, 0, 6),)),
)
OFFSETS = GroupOffsets("g", {"t": {0: CommittedOffset(5, 10, "m"), 1: CommittedOffset(0, 0, "")}})
CLEANER = CleanerState(
    "t", {1: UncleanablePartition(1, "boom", 1, 2, 3, 40, "f", "c")}, LastRun("r", 1, 2, 1, 50), 1000
)

#: (name, valid bytes, reader, the one error it may raise)
TYPES: list[tuple[str, bytes, Callable[[bytes], object], type[Exception]]] = [
    ("manifest", MANIFEST.to_json(), lambda b: Manifest.from_json(b, "loc"), CorruptManifest),
    ("topic.json", TOPIC.to_json(), lambda b: TopicMetadata.from_json(b, "loc", "t", 10_000), CorruptManifest),
    ("offsets", OFFSETS.to_json(), lambda b: GroupOffsets.from_json(b, "loc"), CorruptOffsets),
    ("cleaner state", CLEANER.to_json(), lambda b: CleanerState.from_json(b, "t", "loc"), CorruptCleanerState),
]
IDS = [name for name, *_ in TYPES]

BAD_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([-1, 2**63, 2**63 - 1, -(2**63) - 1, 10**400]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["false", "1", "1e999", "", "segments/../manifest.json"]),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)


def _paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside a parsed JSON document."""
    found = [at]
    if isinstance(value, dict):
        for k, v in value.items():
            found += _paths(v, (*at, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += _paths(v, (*at, i))
    return found


def _replaced(doc: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copy = dict(doc) if isinstance(doc, dict) else list(doc)
    copy[path[0]] = _replaced(doc[path[0]], path[1:], new)
    return copy


def _outcome(read: Callable[[bytes], object], error: type[Exception], data: bytes) -> None:
    """Reading `data` gives a value or `error`, nothing else."""
    try:
        read(data)
        event("parsed")
    except error:
        event("refused")


@pytest.mark.parametrize(("name", "valid", "read", "error"), TYPES, ids=IDS)
def test_the_valid_object_reads_back(name: str, valid: bytes, read: Callable[[bytes], object], error: type) -> None:
    assert read(valid) is not None


@pytest.mark.parametrize(("name", "valid", "read", "error"), TYPES, ids=IDS)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_mutated_object_reads_or_is_refused_with_its_one_error(
    name: str, valid: bytes, read: Callable[[bytes], object], error: type[Exception], data: st.DataObject
) -> None:
    doc = json.loads(valid)
    path = data.draw(st.sampled_from(_paths(doc)), label="path")
    mutated = json.dumps(_replaced(doc, path, data.draw(BAD_VALUES, label="value"))).encode()
    _outcome(read, error, mutated)


@pytest.mark.parametrize(("name", "valid", "read", "error"), TYPES, ids=IDS)
@settings(max_examples=200, deadline=None)
@given(cut=st.integers(min_value=0, max_value=10_000), noise=st.binary(max_size=64))
def test_truncated_and_random_bytes_are_refused_with_the_one_error(
    name: str, valid: bytes, read: Callable[[bytes], object], error: type[Exception], cut: int, noise: bytes
) -> None:
    _outcome(read, error, valid[: cut % max(len(valid), 1)])
    _outcome(read, error, noise)
    _outcome(read, error, valid[: cut % max(len(valid), 1)] + noise)


@pytest.mark.parametrize(("name", "valid", "read", "error"), TYPES, ids=IDS)
@pytest.mark.parametrize(
    "damage",
    [b"[" * 200_000, b'{"a": ' * 100_000, b"NaN", b'{"version": Infinity}', b"1e999", b"\xff\xfe\x00"],
    ids=["deep-lists", "deep-objects", "nan", "infinity", "1e999", "not-utf8"],
)
def test_hostile_documents_are_refused_with_the_one_error(
    name: str, valid: bytes, read: Callable[[bytes], object], error: type[Exception], damage: bytes
) -> None:
    with pytest.raises(error):
        read(damage)


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("segments", ["x"], "segments[0] is a JSON string, not an object"),
        ("properties", [1, 2], "properties is a JSON list, not an object"),
        ("log_start_offset", -3, "log_start_offset is -3, outside"),
        ("version", -5, "version is -5, outside"),
        ("next_offset", 2**63, "outside"),
    ],
)
def test_a_damaged_manifest_names_the_field_and_the_fix(field: str, value: object, words: str) -> None:
    doc = json.loads(MANIFEST.to_json())
    doc[field] = value
    with pytest.raises(CorruptManifest, match="lakecleaner repair") as refused:
        Manifest.from_json(json.dumps(doc).encode(), "s3://b/topics/t/partition=0/manifest.json")
    assert words in str(refused.value) and "s3://b/topics/t/partition=0/manifest.json" in str(refused.value)


@pytest.mark.parametrize(
    ("where", "value"),
    [(("segments", 0, "sealed"), "false"), (("segments", 0, "files", 0, "size_bytes"), -5), (("version",), 1e999)],
)
def test_values_python_would_coerce_are_refused(where: tuple[Any, ...], value: object) -> None:
    """`bool("false")` is True, `int(1500.9)` is 1500, `1e999` is infinity: none is a manifest's value."""
    doc = _replaced(json.loads(MANIFEST.to_json()), where, value)
    with pytest.raises(CorruptManifest):
        Manifest.from_json(json.dumps(doc).encode(), "loc")


def test_a_topic_json_naming_more_partitions_than_the_limit_is_refused() -> None:
    huge = json.dumps({"name": "t", "partitions": 1_000_000_000, "config": {}}).encode()
    with pytest.raises(CorruptManifest, match="max_partitions_per_topic"):
        TopicMetadata.from_json(huge, "loc", "t", 10_000)


def test_a_topic_of_more_partitions_than_the_limit_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    """Issue #45: `topics create huge --partitions 1000000000` wrote topic.json, then died of
    MemoryError after two minutes and left it behind."""
    lake = Lake.open(f"file://{tmp_path}")
    with pytest.raises(ValueError, match=r"lake\.max_partitions_per_topic"):
        lake.create_topic("huge", partitions=1_000_000_000)
    assert lake.list_topics() == [] and not (tmp_path / "topics" / "huge").exists()


def test_a_record_sample_reads_back_as_written_and_anything_else_as_none() -> None:
    """A mirrored partition's sample of its last record (issue 74), kept in a manifest property:
    one that is not a sample is as good as none (the mirror then reads the lake's last record)."""
    sample = RecordSample(41, 141, 1_790_000_000_000, 3, "0" * 32)
    assert RecordSample.decode(sample.encode()) == sample
    assert RecordSample.decode(RecordSample(0, 0, 5, None, "a" * 32).encode()) == RecordSample(0, 0, 5, None, "a" * 32)
    for text in ("", "1:2:3", "x:1:2::" + "0" * 32, "1:2:3:4:short", "1:2:3:4:" + "0" * 32 + ":extra"):
        assert RecordSample.decode(text) is None
