"""Where each partition's mirror resumes, and what it checks first (DESIGN section 9).

A partition resumes at the lake's log end, in the Kafka offsets of the history the topic follows
(`KafkaSource.kafka_offset`), or at Kafka's log start when that is later: the records between were
deleted in Kafka (DeleteRecords, retention) before they were mirrored, and the gap is reported, not
left silent. Before new records are taken, the record the lake appended last (`RecordSample`, kept
in the manifest) is read from Kafka again and compared (`Verdict`): a Kafka log rewritten under the
same topic id, or records another writer appended to the lake, stop that partition only.

A partition whose manifest cannot be read, whose log ends past Kafka's, or whose last record is
not the mirror's is not mirrored this run; the others are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from confluent_kafka import TopicPartition

from lakecleaner.errors import LakeCleanerError
from lakecleaner.io.kafka.clients import ClusterErrors
from lakecleaner.lake import Topic
from lakecleaner.log.manifest import Manifest
from lakecleaner.log.partition import PartitionLog
from lakecleaner.log.source import SAMPLE_PROPERTY, KafkaSource, RecordSample, record_digest


@dataclass(frozen=True)
class Gap:
    """Lake offsets [first, last] Kafka deleted before the mirror read them."""

    partition: int
    first: int
    last: int

    def to_dict(self) -> dict[str, int]:
        return {"partition": self.partition, "from": self.first, "to": self.last}


@dataclass(frozen=True)
class PartitionStart:
    """A partition's resume point: the Kafka offset its new records begin at, Kafka's high
    watermark, the sample to compare first (read from its own offset, at or below `start`), the
    gap Kafka left, or why the partition is not mirrored this run (`failure`)."""

    partition: int
    start: int
    high: int
    sample: RecordSample | None = None
    gap: Gap | None = None
    failure: str | None = None


def starting_points(
    client: Any, errors: ClusterErrors, topic: Topic, source: KafkaSource, give_up_at: float
) -> dict[int, PartitionStart]:
    """Every partition's `PartitionStart`: its manifest and Kafka's watermarks read (the latter
    retried while errors pass, until `give_up_at`)."""
    read = topic.read_manifests()
    out: dict[int, PartitionStart] = {}
    for p in range(topic.partitions):
        low, high = _watermarks(client, errors, source.topic, p, give_up_at)
        if p in read.failures:
            out[p] = PartitionStart(p, low, high, failure=f"its manifest cannot be read: {read.failures[p]}")
            continue
        out[p] = _start(topic.partition(p), read.manifests[p], source, low, high)
    return out


def _watermarks(client: Any, errors: ClusterErrors, topic: str, p: int, give_up_at: float) -> tuple[int, int]:
    """Kafka's log start and high watermark of the partition."""

    def request(timeout: float) -> tuple[int, int]:
        low, high = client.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)
        return int(low), int(high)

    return errors.retrying(f"a watermark request for {topic}-{p}", client, request, give_up_at)


def _start(log: PartitionLog, manifest: Manifest, source: KafkaSource, low: int, high: int) -> PartitionStart:
    p, end = manifest.partition, manifest.next_offset
    resume = source.kafka_offset(end)  # ≤ 0: the lake holds nothing of this history yet
    if resume > high:
        return PartitionStart(
            p,
            resume,
            high,
            failure=(
                f"the lake's log ends at offset {end} (Kafka offset {resume}) but Kafka's {source.topic}-{p} ends at "
                f"{high}: the lake holds records Kafka does not (a Kafka log truncated, or records another writer "
                "appended to the lake); nothing was written to it"
            ),
        )
    try:
        sample = _sample(log, manifest, source) if resume > 0 else None
    except LakeCleanerError as exc:
        return PartitionStart(p, resume, high, failure=f"its last record cannot be read: {exc}")
    if sample is not None and sample.lake_offset + 1 != end:
        return PartitionStart(
            p,
            resume,
            high,
            failure=(
                f"its records at offsets {sample.lake_offset + 1}..{end - 1} did not come from the mirror (its last "
                f"record is at {sample.lake_offset}): another writer appended to it, so its offsets are no longer "
                "Kafka's; nothing was written to it (mirror the Kafka topic into a new lake topic)"
            ),
        )
    start = max(resume, low, 0)
    gap = Gap(p, end, source.lake_offset(low) - 1) if 0 < resume < low else None
    kept = sample if sample is not None and sample.kafka_offset >= low else None  # else Kafka no longer has it
    return PartitionStart(p, start, high, kept, gap)


def _sample(log: PartitionLog, manifest: Manifest, source: KafkaSource) -> RecordSample | None:
    """The current history's last mirrored record: as the mirror kept it in the manifest, else (a
    lake mirrored before samples were kept, or rebuilt by `repair`) read from its last segment file;
    None when the log holds no record of this history."""
    kept = manifest.properties.get(SAMPLE_PROPERTY)
    sample = None if kept is None else RecordSample.decode(kept)
    if sample is not None:
        return sample if sample.lake_offset >= source.offset_delta else None
    files = [f for s in manifest.segments for f in s.files if f.record_count]
    if not files:
        return None
    first = min(max(files[-1].base_offset, manifest.log_start_offset), manifest.next_offset)
    table = log.read(first, manifest=manifest, columns=["offset", "timestamp", "key", "value"])
    if not table.num_rows:
        return None
    row = table.slice(table.num_rows - 1).to_pylist()[0]
    if row["offset"] < source.offset_delta:
        return None
    digest = record_digest(row["key"], row["value"])
    return RecordSample(source.kafka_offset(row["offset"]), row["offset"], row["timestamp"], None, digest)


def verdict(sample: RecordSample, message: Any) -> str | None:
    """How Kafka's record at the sample's offset differs from the one the lake holds, in words;
    None when it is the same record (timestamp, where Kafka has one, and key and value; the leader
    epoch where both are known)."""
    kind, stamp = message.timestamp()
    if kind and stamp != sample.timestamp:
        return f"its timestamp is {stamp}, the lake's {sample.timestamp}"
    epoch = message.leader_epoch()
    if epoch is not None and sample.leader_epoch is not None and epoch != sample.leader_epoch:
        return f"it was written in leader epoch {epoch}, the lake's in {sample.leader_epoch}"
    if record_digest(message.key(), message.value()) != sample.digest:
        return "its key or value differs"
    return None


__all__ = ["Gap", "PartitionStart", "starting_points", "verdict"]
