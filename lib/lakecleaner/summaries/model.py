"""A topic's summary: per partition, the manifest's figures and what its plan added to the
topic's gauges, as of one "now" (issue 50).

The figures (log start and end, segments, records, bytes, tombstones) are the manifest's own, of
the version the entry names; a reader uses an entry only while no marker announces a newer
version. The gauges, due reasons and deletion deadline are the plan's at `planned_at_ms`: the
deadline does not move while the manifest does not, the due flags are as of then (as Kafka's
cleaner gauges are as of its last check). Storage is untrusted: `from_json` validates every field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from lakecleaner.cleaner_state import CleanerState, LastRun, UncleanablePartition
from lakecleaner.errors import CorruptSummary
from lakecleaner.io.strict_json import Fields, Malformed, load_object
from lakecleaner.log.layout import config_digest
from lakecleaner.log.manifest import Manifest
from lakecleaner.policy.plan import TopicPlan
from lakecleaner.runs.digests import RunDigest
from lakecleaner.runs.records import RunRecord
from lakecleaner.summaries.columns import decode_entries, encode_entries
from lakecleaner.summaries.entry import PartitionSummary, entries_of_plan

#: The summary's format; a reader falls back to the manifests for any other.
FORMAT = 2

#: The largest summary a reader parses (100,000 partitions of about 300 bytes fit with room).
MAX_SUMMARY_BYTES = 256 << 20


@dataclass(frozen=True)
class TopicSummary:
    """A topic's summary as of `planned_at_ms`: its partitions' entries, those whose manifest could
    not be read (and why), the topic.json it was planned with (`metadata`, its bytes as text, and
    `config_digest`, their digest; the cleanup policy), the cleaner state it was planned with (the
    uncleanable marks and the last run) and the digests of the topic's recent runs. A view that
    plans some partitions again takes the topic's config and marks from here, not from storage."""

    topic: str
    planned_at_ms: int
    config_digest: str
    cleanup_policy: tuple[str, ...]
    partition_count: int
    partitions: Mapping[int, PartitionSummary]
    metadata: str = ""
    unreadable: Mapping[int, str] = field(default_factory=dict)
    uncleanable: Mapping[int, UncleanablePartition] = field(default_factory=dict)
    last_run: LastRun | None = None
    runs: Sequence[RunDigest] = ()

    @property
    def cleaner(self) -> CleanerState:
        """The cleaner state the summary was planned with."""
        return CleanerState(self.topic, self.uncleanable, self.last_run)

    def version(self, partition: int) -> int | None:
        """The manifest version the partition's entry summarises (None: it has none)."""
        entry = self.partitions.get(partition)
        return None if entry is None else entry.figures.manifest_version

    def covers(self, other: TopicSummary) -> bool:
        """Whether this summary is at least as new as `other` for every partition `other` has."""
        return all((self.version(p) or 0) >= entry.figures.manifest_version for p, entry in other.partitions.items())

    def to_json(self) -> bytes:
        data = {
            "format": FORMAT,
            "topic": self.topic,
            "planned_at_ms": self.planned_at_ms,
            "config_digest": self.config_digest,
            "cleanup_policy": list(self.cleanup_policy),
            "partition_count": self.partition_count,
            "metadata": self.metadata,
            "partitions": encode_entries([e for _, e in sorted(self.partitions.items())]),
            "unreadable": {str(p): reason for p, reason in sorted(self.unreadable.items())},
            "uncleanable": [e.to_dict() for _, e in sorted(self.uncleanable.items())],
            "last_run": None if self.last_run is None else self.last_run.to_dict(),
            "runs": [r.to_stored() for r in self.runs],
        }
        return json.dumps(data, separators=(",", ":")).encode()

    @staticmethod
    def from_json(data: bytes, topic: str, location: str) -> TopicSummary:
        """Parse and validate; CorruptSummary naming `location` and the fix."""
        try:
            f = load_object(data, max_bytes=MAX_SUMMARY_BYTES, fractions=True)
            if f.integer("format", hi=1 << 31) != FORMAT:
                raise Malformed(f"format {f.raw['format']}, which this version does not read (it reads {FORMAT})")
            entries = decode_entries(f.raw.get("partitions"))
            last = f.optional_object("last_run")
            summary = TopicSummary(
                topic=f.text("topic", max_chars=249),
                planned_at_ms=f.integer("planned_at_ms"),
                config_digest=f.text("config_digest", max_chars=64),
                cleanup_policy=tuple(_strings(f, "cleanup_policy")),
                partition_count=f.integer("partition_count", hi=1 << 31),
                partitions={e.partition: e for e in entries},
                metadata=f.text("metadata", max_chars=1 << 20),
                unreadable={_partition(k): v for k, v in f.strings("unreadable").items()},
                uncleanable={
                    m.partition: m for m in (UncleanablePartition.from_fields(u) for u in f.objects("uncleanable"))
                },
                last_run=None if last is None else LastRun.from_fields(last),
                runs=tuple(RunDigest.from_fields(r) for r in f.objects("runs")),
            )
        except Malformed as exc:
            raise CorruptSummary(f"summary {location} is corrupt ({exc}); {_FIX.format(topic=topic)}") from None
        if config_digest(summary.metadata.encode()) != summary.config_digest:
            raise CorruptSummary(
                f"summary {location} holds a topic.json whose digest is not its config_digest; "
                + _FIX.format(topic=topic)
            )
        if summary.topic != topic or len(summary.partitions) != len(entries):
            raise CorruptSummary(
                f"summary {location} names topic {summary.topic!r} or lists a partition twice; "
                + _FIX.format(topic=topic)
            )
        return summary


def summary_of_plan(
    plan: TopicPlan,
    manifests: Mapping[int, Manifest],
    unreadable: Mapping[int, str],
    metadata: bytes,
    partition_count: int,
    cleaner: CleanerState,
    runs: Sequence[RunRecord],
) -> TopicSummary:
    """The summary of a topic planned as `plan` on `manifests` (those of `unreadable` could not be
    read), with topic.json `metadata`, the cleaner state and the topic's recent runs."""
    return TopicSummary(
        topic=plan.topic,
        planned_at_ms=plan.now_ms,
        config_digest=config_digest(metadata),
        cleanup_policy=tuple(sorted(plan.config.cleanup_policy)),
        partition_count=partition_count,
        partitions=entries_of_plan(plan, manifests),
        metadata=metadata.decode(),
        unreadable=dict(unreadable),
        uncleanable=dict(cleaner.uncleanable),
        last_run=cleaner.last_run,
        runs=tuple(RunDigest.of(r) for r in runs),
    )


_FIX = "the views read the topic's manifests instead until `lakecleaner summaries refresh --topic {topic}` rewrites it"


def _strings(f: Fields, key: str) -> list[str]:
    value = f.raw.get(key)
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise Malformed(f"field {key} is not a list of strings")
    return value


def _partition(key: str) -> int:
    if not key.isdigit() or len(key) > 9:
        raise Malformed(f"field unreadable has the key {key!r:.40}, not a partition number")
    return int(key)
