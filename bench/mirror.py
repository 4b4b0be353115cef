"""Mirror throughput: `lakecleaner mirror --once` against a confluent-kafka consumer that writes
Parquet as the mirror does, and against one that only reads.

    uv run python bench/mirror.py                    # 1M records of 100-byte values over 4 partitions
    uv run python bench/mirror.py --records 200000 --runs 1
    uv run python bench/mirror.py --broker mock      # librdkafka's mock cluster, without Maven

The topic is on the project's real Apache Kafka broker (one KRaft node, its jars from Maven Central
as the tests fetch them, `tests/support/kafka_real.py`) unless `--broker mock`. librdkafka's mock cluster
(in this process) keeps only about 5 MB per partition, so there the records go in rounds of
`--round` records: each round is produced, then read by every reader, and the rounds' times are
summed. The readers of a round go in an order that turns by round and run, so none is always the
first to read freshly produced records.

The floors use the mirror's consumer settings (read_committed, assigned partitions, no group):
`bare` takes each message's key and value into Python and drops them; `parquet` keeps offset,
timestamp, key, value and headers per partition and writes one zstd Parquet file per partition per
batch of `--batch-bytes` (what the mirror writes, without its commit protocol). lakecleaner's run
is `mirror_topic` (`--once`, the same batches) into a local lake, resuming where the previous round
ended. The ratio is lakecleaner's records/s over the parquet floor's (target ≥ 0.9). The identity
check (one Metadata and one DescribeTopics request a run, `io/kafka/identity.py`) is timed on its own.
Peak memory is the process's resident set sampled every 50 ms during each reader's runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from itertools import groupby
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's tests/ (the real broker)

from lakecleaner.config import parse_config
from lakecleaner.io.kafka.clients import ClusterErrors
from lakecleaner.io.kafka.identity import describe_topic
from lakecleaner.kafka.mirror import DEFAULT_BATCH_BYTES, MirrorLimits, mirror_topic
from lakecleaner.lake import Lake
from lakecleaner.log.records import HEADER_TYPE

PARTITIONS = 4  # the mock cluster's partitions per auto-created topic, and the real topic's
READERS = ("floor: bare consumer", "floor: consumer writing Parquet", "lakecleaner mirror --once")
#: The consumer settings the mirror uses (`io/kafka/clients.py`), for the floors.
CONSUMER = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "enable.partition.eof": True,
    "isolation.level": "read_committed",
}


#: librdkafka's Message accessors, for `map` over a poll's messages (as the mirror takes them).
_PARTITION: Any = Message.partition
_OFFSET: Any = Message.offset
_KEY: Any = Message.key
_VALUE: Any = Message.value
_HEADERS: Any = Message.headers
_TIMESTAMP: Any = Message.timestamp


class _Silent:
    def log(self, *args: object) -> None:
        pass


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--broker", choices=("real", "mock"), default="real")
    parser.add_argument(
        "--round", type=int, help="records per round (default: all on the real broker, 120,000 on the mock)"
    )
    parser.add_argument("--runs", type=int, default=3, help="runs of each; the median is reported")
    parser.add_argument("--batch-bytes", type=int, default=DEFAULT_BATCH_BYTES)
    args = parser.parse_args(argv)
    args.round = args.round or (args.records if args.broker == "real" else 120_000)
    return args


@contextmanager
def cluster(kind: str) -> Iterator[tuple[str, Producer, Callable[[str], None]]]:
    """(bootstrap servers, a producer, a function that creates a topic of PARTITIONS partitions)."""
    settings = {"linger.ms": 50, "batch.num.messages": 100_000, "batch.size": 1_000_000}
    if kind == "mock":
        producer = Producer({"test.mock.num.brokers": 1, **settings}, logger=_Silent())
        broker = next(iter(producer.list_topics(timeout=10).brokers.values()))
        yield f"{broker.host}:{broker.port}", producer, lambda topic: None  # created by the first produce
        return
    from tests.support.kafka_real import KafkaBroker

    with tempfile.TemporaryDirectory() as folder:
        real = KafkaBroker(Path(folder))
        admin = AdminClient({"bootstrap.servers": real.bootstrap})

        def create(topic: str) -> None:
            admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)

        try:
            yield real.bootstrap, Producer({"bootstrap.servers": real.bootstrap, **settings}, logger=_Silent()), create
        finally:
            real.stop()


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


def consumed(bootstrap: str, topic: str, starts: Sequence[int], take: Callable[[int, list[Any]], None]) -> int:
    """Read every record from `starts` (one offset per partition) to the end with the mirror's
    consumer settings, each poll's run of one partition's records handed to `take` (a partition's
    end as an empty run); the record count."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-floor", **CONSUMER}, logger=_Silent())
    consumer.assign([TopicPartition(topic, p, starts[p]) for p in range(PARTITIONS)])
    count, ended = 0, set()
    try:
        while len(ended) < PARTITIONS:
            messages = consumer.consume(10_000, timeout=0.2)
            records = [m for m in messages if m.error() is None]
            for p, run in groupby(records, key=_PARTITION):
                taken = list(run)
                take(p, taken)
                count += len(taken)
            for m in messages:
                if m.error() is not None and m.error().code() == KafkaError._PARTITION_EOF:
                    ended.add(m.partition())
                    take(m.partition(), [])
    finally:
        consumer.close()
    return count


def bare_floor(bootstrap: str, topic: str, starts: Sequence[int]) -> int:
    """The records read, their keys and values taken into Python and dropped."""

    def take(p: int, run: list[Any]) -> None:
        list(map(_KEY, run))
        list(map(_VALUE, run))

    return consumed(bootstrap, topic, starts, take)


class ParquetBatches:
    """Per partition, the records of a batch as columns (taken a poll's run at a time, as the
    mirror takes them), written as one zstd Parquet file once it holds `batch_bytes` of keys and
    values, or at the partition's end."""

    def __init__(self, folder: Path, batch_bytes: int) -> None:
        self.folder, self.batch_bytes = folder, batch_bytes
        self.columns: dict[int, dict[str, list[Any]]] = {}
        self.size: dict[int, int] = {}
        self.files = 0

    def take(self, p: int, run: list[Any]) -> None:
        if not run:
            self.write(p)
            return
        columns = self.columns.setdefault(p, {"offset": [], "timestamp": [], "key": [], "value": [], "headers": []})
        keys, values = list(map(_KEY, run)), list(map(_VALUE, run))
        columns["offset"] += map(_OFFSET, run)
        columns["timestamp"] += [stamp for _, stamp in map(_TIMESTAMP, run)]
        columns["key"] += keys
        columns["value"] += values
        columns["headers"] += [h or [] for h in map(_HEADERS, run)]
        self.size[p] = self.size.get(p, 0) + sum(map(len, filter(None, keys))) + sum(map(len, filter(None, values)))
        if self.size[p] >= self.batch_bytes:
            self.write(p)

    def write(self, p: int) -> None:
        columns = self.columns.pop(p, None)
        self.size[p] = 0
        if not columns or not columns["offset"]:
            return
        table = pa.table(
            {
                "offset": pa.array(columns["offset"], pa.int64()),
                "timestamp": pa.array(columns["timestamp"], pa.int64()),
                "key": pa.array(columns["key"], pa.binary()),
                "value": pa.array(columns["value"], pa.binary()),
                "headers": pa.array(columns["headers"], HEADER_TYPE),
            }
        )
        pq.write_table(table, self.folder / f"{p}-{self.files}.parquet", compression="zstd")
        self.files += 1


def parquet_floor(bootstrap: str, topic: str, starts: Sequence[int], batch_bytes: int) -> int:
    """The records read and written as one zstd Parquet file per partition per batch."""
    with tempfile.TemporaryDirectory() as folder:
        return consumed(bootstrap, topic, starts, ParquetBatches(Path(folder), batch_bytes).take)


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


def lake_of(lake_dir: str, bootstrap: str, topic: str) -> Lake:
    return Lake.open(
        parse_config(
            {
                "lake": {"uri": f"file://{Path(lake_dir) / 'lake'}"},
                "kafka": {"clusters": {"bench": {"bootstrap.servers": bootstrap}}},
                "topics": {topic: {"mirror": {"cluster": "bench"}, "config": {"cleanup.policy": "delete"}}},
            }
        )
    )


def one_run(
    kafka: tuple[str, Producer, Callable[[str], None]], args: argparse.Namespace, turn: int
) -> list[tuple[float, int, int]]:
    """A fresh topic and lake, filled round by round: each reader's (seconds, records, peak)."""
    bootstrap, producer, create = kafka
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    create(topic)
    totals = [[0.0, 0, 0] for _ in READERS]
    with tempfile.TemporaryDirectory() as lake_dir:
        lake = lake_of(lake_dir, bootstrap, topic)
        done = 0
        while done < args.records:
            count = min(args.round, args.records - done)
            starts = ends(bootstrap, topic) if done else [0] * PARTITIONS
            produce(producer, topic, count, args.value_size, first=done)
            readers = [
                partial(bare_floor, bootstrap, topic, starts),
                partial(parquet_floor, bootstrap, topic, starts, args.batch_bytes),
                partial(mirrored, lake, topic, args.batch_bytes),
            ]
            shift = (turn + done // args.round) % len(readers)  # who reads a round first turns
            for which in [*range(shift, len(readers)), *range(shift)]:
                seconds, records, peak = timed(readers[which])
                totals[which][0] += seconds
                totals[which][1] += records
                totals[which][2] = max(totals[which][2], peak)
            done += count
    return [(s, int(r), int(p)) for s, r, p in totals]


def identity_check_seconds(bootstrap: str, topic: str, times: int = 5) -> float:
    """The median time of the mirror's identity check (a Metadata and a DescribeTopics request)."""
    config = parse_config({"kafka": {"clusters": {"bench": {"bootstrap.servers": bootstrap}}}})
    cluster = config.kafka_clusters["bench"]
    taken = []
    for _ in range(times):
        start = time.perf_counter()
        describe_topic(cluster, topic, ClusterErrors(cluster, topic, 10), time.monotonic() + 10)
        taken.append(time.perf_counter() - start)
    return statistics.median(taken)


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
    with cluster(args.broker) as kafka:
        where = "the real broker" if args.broker == "real" else "librdkafka's mock cluster"
        print(
            f"{args.records:,} records of {args.value_size} B over {PARTITIONS} partitions on {where}, "
            f"in rounds of {args.round:,}"
        )
        warm_up = argparse.Namespace(**{**vars(args), "records": 1000, "round": 1000})
        one_run(kafka, warm_up, 0)  # the one-time imports (pyarrow's of pandas) and librdkafka's start
        runs: list[list[tuple[float, int, int]]] = []
        for run in range(args.runs):
            runs.append(one_run(kafka, args, run))
            print(
                f"run {run + 1}: "
                + ", ".join(f"{name} {r[0]:.2f} s" for name, r in zip(READERS, runs[-1], strict=True))
            )
            assert all(r[1] == args.records for r in runs[-1]), "every record, once"
        probe = f"bench-{uuid.uuid4().hex[:8]}"
        kafka[2](probe)
        produce(kafka[1], probe, PARTITIONS, 10)
        check = identity_check_seconds(kafka[0], probe)
    seconds = [statistics.median(r[i][0] for r in runs) for i in range(len(READERS))]
    print()
    print("| run | seconds (median) | records/s | peak RSS |")
    print("|---|---:|---:|---:|")
    for i, name in enumerate(READERS):
        peak = max(r[i][2] for r in runs) / 2**20
        print(f"| {name} | {seconds[i]:.2f} | {args.records / seconds[i]:,.0f} | {peak:,.0f} MiB |")
    ratio = seconds[1] / seconds[2]
    print()
    print(f"mirror / Parquet floor records/s: {ratio:.2f} (target ≥ 0.9: {'met' if ratio >= 0.9 else 'MISSED'})")
    print(f"mirror / bare floor records/s: {seconds[0] / seconds[2]:.2f}")
    share = check / seconds[2] * 100
    print(f"identity check: {check * 1000:.1f} ms a run (median of 5), {share:.2f}% of the mirror's run")
    return ratio


if __name__ == "__main__":
    main()
