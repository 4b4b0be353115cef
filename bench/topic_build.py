"""The bench's topic, built from the vectorised workload generator (`lakecleaner.workload`).

`built_apart` builds it in a process of its own (`baselines.Apart`): generating 100M records
left the measuring process 9 MB larger than 20M did (its resident memory before (a), after the
same give-back: 346 against 337 MB), which (a)'s peak then counted as the driver's, though a
compaction's driver never generated its topic.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from bench.baselines import Apart

from lakecleaner.config import parse_config
from lakecleaner.lake import Lake, Topic
from lakecleaner.workload import WorkloadSpec, generate

#: What `Lake.open` opens: a lake's URI, or a configuration's mapping (an S3 lake's endpoint and keys).
LakeSource = str | dict[str, Any]


def open_lake(source: LakeSource) -> Lake:
    """The lake `source` names."""
    return Lake.open(source if isinstance(source, str) else parse_config(source))


def build_topic(lake: Lake, spec: WorkloadSpec, segment_bytes: int, batch_records: int) -> Topic:
    """The workload appended batch by batch (one file per batch), then every segment sealed."""
    topic = lake.create_topic(
        "bench", partitions=spec.partitions, config={"cleanup.policy": "compact", "segment.bytes": segment_bytes}
    )
    now = spec.start_ms + spec.timestamp_spread_ms
    for partition, batch in generate(spec, batch_records):
        topic.partition(partition).append(batch, now_ms=now)
    for log in topic.partition_logs():
        log.roll(now_ms=now)
    return topic


def built_apart(source: LakeSource, spec: WorkloadSpec, segment_bytes: int, batch_records: int) -> Topic:
    """`build_topic` in the lake `source` names, run in a process of its own; the topic, opened here."""
    builder = Apart(partial(_build, source, spec, segment_bytes, batch_records))
    builder.start()
    builder.result()
    return open_lake(source).topic("bench")


def _build(source: LakeSource, spec: WorkloadSpec, segment_bytes: int, batch_records: int) -> str:
    topic = build_topic(open_lake(source), spec, segment_bytes, batch_records)
    return f"{spec.records} records in topic {topic.name}"
