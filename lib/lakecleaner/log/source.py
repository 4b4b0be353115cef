"""Where a mirrored topic's records come from, by identity and not only by name (DESIGN section 9).

Kafka gives every topic a topic id (KIP-516) so that a topic deleted and created again under the
same name is never taken for the old one. The first `lakecleaner mirror` of a lake topic records
the Kafka cluster's id and the topic's id in the lake topic's metadata (topic.json); every later
run compares them with what the cluster says, and a different id is refused before anything is
written (`io/kafka/identity.py`).

A lake topic may follow a new Kafka history only when told to (`mirror --restart-from-kafka`): the
history it followed becomes a `SourceBreak`, and the new one is appended after every record the lake
holds. Its Kafka offsets cannot be the lake's (offsets never go back), so every record of the new
history lands at its Kafka offset + `offset_delta`, one number for the whole topic (the highest log
end of its partitions at the break): a partition that ended lower has a gap, as compacted logs do.
Consumer groups' committed offsets of the new history are translated by the same delta, and say
nothing of the records below it (`ConsumedPosition.since_offset`).

Each mirrored partition also keeps a sample of the last record it appended (`RecordSample`, in its
manifest's properties, written in the same commit as the records): the next run reads that offset
from Kafka again and compares, so a Kafka log rewritten under an unchanged topic id, or records
appended to the lake by another writer, stop that partition instead of mixing two logs.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Any

from lakecleaner.io.strict_json import Fields, Malformed

#: The manifest property holding a mirrored partition's `RecordSample`.
SAMPLE_PROPERTY = "mirror.last_record"
#: The kind of a source recorded in topic.json.
KAFKA = "kafka"
#: The writers of topics whose records come from a source (`PartitionLog.append(writer=)`).
MIRROR_WRITER = "mirror"
ADOPTION_WRITER = "adopt"


@dataclass(frozen=True)
class OwningSource:
    """The source that alone appends to a topic (DESIGN section 9: one writer per topic with a
    source): the writer it appends as, the source in words, and what another writer should do."""

    writer: str
    described: str
    instead: str


@dataclass(frozen=True)
class SourceBreak:
    """A Kafka history the lake topic followed before a `--restart-from-kafka`: its cluster and
    topic ids, the delta its records were appended with, and when it ended. The records it brought
    stay in the log, below the next history's `offset_delta`."""

    cluster_id: str
    topic: str
    topic_id: str | None
    offset_delta: int
    ended_ms: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster_id": self.cluster_id,
            "topic": self.topic,
            "topic_id": self.topic_id,
            "offset_delta": self.offset_delta,
            "ended_ms": self.ended_ms,
        }

    @staticmethod
    def from_fields(f: Fields) -> SourceBreak:
        return SourceBreak(
            f.text("cluster_id", max_chars=256),
            f.text("topic", max_chars=249),
            f.optional_text("topic_id"),
            f.integer("offset_delta"),
            f.integer("ended_ms"),
        )


@dataclass(frozen=True)
class KafkaSource:
    """The Kafka topic a lake topic mirrors, as recorded at its first mirror: the cluster's name in
    the config file and its id, the topic's name and id (None: the cluster gives no topic ids, as
    before Kafka 2.8), the delta from Kafka offsets to lake offsets of the history it follows now,
    since when, and the histories it followed before (`breaks`, oldest first)."""

    cluster: str
    cluster_id: str
    topic: str
    topic_id: str | None
    since_ms: int
    offset_delta: int = 0
    breaks: tuple[SourceBreak, ...] = ()

    def restarted(
        self, cluster: str, cluster_id: str, topic: str, topic_id: str | None, delta: int, now_ms: int
    ) -> KafkaSource:
        """This source after `--restart-from-kafka`: the history it followed ends now, and the one of
        `topic_id` begins at lake offset `delta`."""
        ended = SourceBreak(self.cluster_id, self.topic, self.topic_id, self.offset_delta, now_ms)
        return replace(
            self,
            cluster=cluster,
            cluster_id=cluster_id,
            topic=topic,
            topic_id=topic_id,
            since_ms=now_ms,
            offset_delta=delta,
            breaks=(*self.breaks, ended),
        )

    def lake_offset(self, kafka_offset: int) -> int:
        """Where the record at `kafka_offset` of the current history lands in the lake."""
        return kafka_offset + self.offset_delta

    def kafka_offset(self, lake_offset: int) -> int:
        """The Kafka offset of the current history that `lake_offset` stands for (negative: below it)."""
        return lake_offset - self.offset_delta

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": KAFKA,
            "cluster": self.cluster,
            "cluster_id": self.cluster_id,
            "topic": self.topic,
            "topic_id": self.topic_id,
            "since_ms": self.since_ms,
            "offset_delta": self.offset_delta,
            "breaks": [b.to_dict() for b in self.breaks],
        }

    @staticmethod
    def from_fields(f: Fields) -> KafkaSource:
        kind = f.text("kind", max_chars=32)
        if kind != KAFKA:
            raise Malformed(f"field {f.where}.kind is {kind[:32]!r}, not {KAFKA!r}")
        return KafkaSource(
            f.text("cluster", max_chars=256),
            f.text("cluster_id", max_chars=256),
            f.text("topic", max_chars=249),
            f.optional_text("topic_id"),
            f.integer("since_ms"),
            f.integer("offset_delta", default=0),
            tuple(SourceBreak.from_fields(b) for b in f.objects("breaks", default=[])),
        )


@dataclass(frozen=True)
class RecordSample:
    """The last record a mirror appended to a partition: its Kafka offset, timestamp, leader epoch
    (None: unknown) and a digest of its key and value, kept in the partition's manifest so that the
    next run can read the same offset from Kafka and compare without opening a segment."""

    kafka_offset: int
    lake_offset: int
    timestamp: int
    leader_epoch: int | None
    digest: str

    def encode(self) -> str:
        epoch = "" if self.leader_epoch is None else str(self.leader_epoch)
        return f"{self.kafka_offset}:{self.lake_offset}:{self.timestamp}:{epoch}:{self.digest}"

    @staticmethod
    def decode(text: str) -> RecordSample | None:
        """The sample a manifest property holds; None for one that is not a sample (which the
        mirror then treats as missing: it reads the lake's last record instead)."""
        parts = text.split(":")
        if len(parts) != 5 or not all(p.lstrip("-").isdigit() for p in parts[:3]) or len(parts[4]) != 32:
            return None
        epoch = int(parts[3]) if parts[3].lstrip("-").isdigit() else None
        return RecordSample(int(parts[0]), int(parts[1]), int(parts[2]), epoch, parts[4])


def record_digest(key: bytes | None, value: bytes | None) -> str:
    """A digest of a record's key and value (a null one is told from an empty one), hex."""
    h = hashlib.blake2b(digest_size=16)
    for part in (key, value):
        h.update(b"\xff" if part is None else len(part).to_bytes(8, "big") + part)
    return h.hexdigest()


__all__ = [
    "ADOPTION_WRITER",
    "KAFKA",
    "MIRROR_WRITER",
    "SAMPLE_PROPERTY",
    "KafkaSource",
    "OwningSource",
    "RecordSample",
    "SourceBreak",
    "record_digest",
]
