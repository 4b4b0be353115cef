"""Mirror throughput: `lakecleaner mirror --once` against a bare confluent-kafka consumer.

    uv run python bench/mirror.py                    # 1M records of 100-byte values over 4 partitions
    uv run python bench/mirror.py --records 200000 --runs 1

librdkafka's mock cluster (one broker, in this process) holds the topic. It keeps only about
5 MB per partition (older records leave its log), so the records go in rounds of `--round`
records: each round is produced, then read by the floor and mirrored, and the times of the
rounds are summed; which of the two reads a round first alternates, so neither is always the
first to read freshly produced records. The floor is the same consumer settings (read_committed, assigned partitions,
no group) reading the round's records into Python (key and value taken from each message) and
discarding them; lakecleaner's `mirror_topic` (`--once`, 16 MiB batches) appends them to a local
lake at their offsets, resuming where the previous round ended. The ratio is lakecleaner's
records/s over the floor's (target ≥ 0.8); peak memory is the process's resident set sampled
every 50 ms during the runs (the mock cluster's copy of the topic is in it for both).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from lakecleaner.config import parse_config
from lakecleaner.kafka.mirror import DEFAULT_BATCH_BYTES, MirrorLimits, mirror_topic
from lakecleaner.lake import Lake

PARTITIONS = 4  # the mock cluster's partitions per auto-created topic


class _Silent:
    def log(self, *args: object) -> None:
        pass


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument(
        "--round", type=int, default=120_000, help="records per round (the mock keeps ~5 MB a partition)"
    )
    parser.add_argument("--runs", type=int, default=3, help="runs of each; the median is reported")
    parser.add_argument("--batch-bytes", type=int, default=DEFAULT_BATCH_BYTES)
    return parser.parse_args(argv)


def produce(producer: Producer, topic: str, records: int, value_size: int, first: int = 0) -> None:
    value = os.urandom(value_size)
    for i in range(first, first + records):
        while True:
            try:
                producer.produce(topic, key=b"key-%d" % (i % 100_000), value=value, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(120) == 0


def floor(bootstrap: str, topic: str, starts: Sequence[int]) -> int:
    """Read every record from `starts` (one offset per partition) to the end with a bare consumer,
    touching its key and value; the record count."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-floor",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        },
        logger=_Silent(),
    )
    consumer.assign([TopicPartition(topic, p, starts[p]) for p in range(PARTITIONS)])
    count, ended = 0, set()
    try:
        while len(ended) < PARTITIONS:
            for m in consumer.consume(10_000, timeout=0.2):
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        ended.add(m.partition())
                    continue
                m.key()
                m.value()
                count += 1
    finally:
        consumer.close()
    return count


def mirrored(lake: Lake, topic: str, batch_bytes: int) -> int:
    """`mirror --once` into `lake`, from where it ended; the record count."""
    return mirror_topic(lake, topic, MirrorLimits(once=True, batch_bytes=batch_bytes)).records


def ends(bootstrap: str, topic: str) -> list[int]:
    """Each partition's high watermark."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-ends"}, logger=_Silent())
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS)]
    finally:
        consumer.close()


def one_run(
    producer: Producer, bootstrap: str, args: argparse.Namespace
) -> tuple[tuple[float, int, int], tuple[float, int, int]]:
    """A fresh topic and lake, filled round by round: (floor, mirror) as (seconds, records, peak)."""
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    totals = [[0.0, 0, 0], [0.0, 0, 0]]
    with tempfile.TemporaryDirectory() as lake_dir:
        config = parse_config(
            {
                "lake": {"uri": f"file://{Path(lake_dir) / 'lake'}"},
                "kafka": {"clusters": {"bench": {"bootstrap.servers": bootstrap}}},
                "topics": {topic: {"mirror": {"cluster": "bench"}, "config": {"cleanup.policy": "delete"}}},
            }
        )
        lake = Lake.open(config)
        done = 0
        while done < args.records:
            count = min(args.round, args.records - done)
            starts = ends(bootstrap, topic) if done else [0] * PARTITIONS
            produce(producer, topic, count, args.value_size, first=done)
            runs = [partial(floor, bootstrap, topic, starts), partial(mirrored, lake, topic, args.batch_bytes)]
            order = [0, 1] if (done // args.round) % 2 == 0 else [1, 0]  # who reads a round first alternates
            for which in order:
                seconds, records, peak = timed(runs[which])
                totals[which][0] += seconds
                totals[which][1] += records
                totals[which][2] = max(totals[which][2], peak)
            done += count
    (fs, fr, fp), (ms, mr, mp) = totals
    return (fs, int(fr), int(fp)), (ms, int(mr), int(mp))


def rss_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def timed(run: Callable[[], int]) -> tuple[float, int, int]:
    """(seconds, records, peak resident bytes) of one run."""
    peak, stop = [rss_bytes()], threading.Event()

    def sample() -> None:
        while not stop.wait(0.05):
            peak[0] = max(peak[0], rss_bytes())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start = time.perf_counter()
    records = run()
    seconds = time.perf_counter() - start
    stop.set()
    sampler.join()
    return seconds, records, max(peak[0], rss_bytes())


def main(argv: Sequence[str] | None = None) -> float:
    args = parse_args(argv)
    producer = Producer(
        {"test.mock.num.brokers": 1, "linger.ms": 50, "batch.num.messages": 100_000, "batch.size": 10_000_000},
        logger=_Silent(),
    )
    broker = next(iter(producer.list_topics(timeout=10).brokers.values()))
    bootstrap = f"{broker.host}:{broker.port}"
    print(f"{args.records:,} records of {args.value_size} B over {PARTITIONS} partitions, in rounds of {args.round:,}")
    warm_up = argparse.Namespace(**{**vars(args), "records": 1000, "round": 1000})
    one_run(producer, bootstrap, warm_up)  # the one-time imports (pyarrow's of pandas) and librdkafka's start
    floors, mirrors = [], []
    for run in range(args.runs):
        measured_floor, measured_mirror = one_run(producer, bootstrap, args)
        floors.append(measured_floor)
        mirrors.append(measured_mirror)
        print(
            f"run {run + 1}: floor {floors[-1][0]:.2f} s ({floors[-1][1]:,} records), "
            f"mirror {mirrors[-1][0]:.2f} s ({mirrors[-1][1]:,} records)"
        )
        assert floors[-1][1] == mirrors[-1][1] == args.records, "every record, once"
    floor_s = statistics.median(s for s, _, _ in floors)
    mirror_s = statistics.median(s for s, _, _ in mirrors)
    ratio = floor_s / mirror_s
    print()
    print("| run | seconds (median) | records/s | peak RSS |")
    print("|---|---:|---:|---:|")
    for name, seconds, runs in (
        ("floor: bare consumer", floor_s, floors),
        ("lakecleaner mirror --once", mirror_s, mirrors),
    ):
        peak = max(p for _, _, p in runs) / 2**20
        print(f"| {name} | {seconds:.2f} | {args.records / seconds:,.0f} | {peak:,.0f} MiB |")
    print()
    print(f"mirror / floor records/s: {ratio:.2f} (target ≥ 0.8: {'met' if ratio >= 0.8 else 'MISSED'})")
    return ratio


if __name__ == "__main__":
    main()
