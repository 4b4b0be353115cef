"""The main job on the embedded default (`make demo` / `lakecleaner demo`).

At this stage of the project it builds the sample topics of config/lakecleaner.yaml in the
local lake: a compacted CDC topic with updates, deletes, out-of-order producers and KIP-280
header versions, and a delete-policy topic with two consumer groups at different offsets;
then it prints the status table (and the cleaning/retention plan when the policy is there).
"""

from __future__ import annotations

from dataclasses import dataclass

from lakecleaner.clock import wall_clock_ms
from lakecleaner.lake import Lake
from lakecleaner.workload import WorkloadSpec, generate

CDC_TOPIC = "customers-cdc"
EVENTS_TOPIC = "page-views"
HOUR_MS = 3_600_000


@dataclass(frozen=True)
class DemoSizes:
    cdc_records: int = 200_000
    cdc_keys: int = 20_000
    event_records: int = 100_000
    batch_records: int = 5_000


def build_sample_topics(lake: Lake, sizes: DemoSizes = DemoSizes(), now_ms: int | None = None) -> dict[str, int]:
    """Create the two sample topics (fresh) and fill them; returns records written per topic.

    Timestamps spread over the last 48 hours so that rolling, min/max compaction lag and
    time retention all have something to decide.
    """
    now = wall_clock_ms() if now_ms is None else now_ms
    written: dict[str, int] = {}
    specs = {
        CDC_TOPIC: WorkloadSpec(
            keys=sizes.cdc_keys,
            records=sizes.cdc_records,
            value_size=200,
            tombstone_share=0.08,
            out_of_order_share=0.05,
            start_ms=now - 48 * HOUR_MS,
            timestamp_spread_ms=47 * HOUR_MS,
            header_versions=True,
            header_name="version",
            malformed_header_share=0.001,
            seed=1,
            partitions=lake.create_topic(CDC_TOPIC, exist_ok=True, now_ms=now).partitions,
        ),
        EVENTS_TOPIC: WorkloadSpec(
            keys=sizes.event_records,
            records=sizes.event_records,
            value_size=120,
            tombstone_share=0.0,
            unkeyed_share=0.2,
            start_ms=now - 48 * HOUR_MS,
            timestamp_spread_ms=47 * HOUR_MS,
            seed=2,
            partitions=lake.create_topic(EVENTS_TOPIC, exist_ok=True, now_ms=now).partitions,
        ),
    }
    for name, spec in specs.items():
        topic = lake.topic(name)
        for partition, batch in generate(spec, batch_records=sizes.batch_records):
            topic.partition(partition).append(batch, now_ms=now)
        written[name] = spec.records
    _commit_demo_offsets(lake, now)
    return written


def _commit_demo_offsets(lake: Lake, now: int) -> None:
    """Two groups on the events topic: analytics is at 80% of each partition, billing at 30%."""
    topic = lake.topic(EVENTS_TOPIC)
    ends = {p: m.next_offset for p, m in topic.manifests().items()}
    lake.offsets.commit("analytics", EVENTS_TOPIC, {p: end * 8 // 10 for p, end in ends.items()}, now_ms=now)
    lake.offsets.commit("billing", EVENTS_TOPIC, {p: end * 3 // 10 for p, end in ends.items()}, now_ms=now)
