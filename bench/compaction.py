"""Benchmark: lakecleaner's compaction against the copy floor and DuckDB.

    uv run python bench/compaction.py                     # --case default: 10M records, 1M keys, 4 partitions
    uv run python bench/compaction.py --case all          # every case, each against its targets
    uv run python bench/compaction.py --case high-cardinality --runs 1
    uv run python bench/compaction.py --records 1000000 --keys 100000
    uv run python bench/compaction.py --scaling           # 1M, 4M and 16M records (keys = records / 10)
    uv run python bench/compaction.py --runs 1            # one run of each instead of the median of 5

Cases (`--case`; `--records`, `--keys` and `--partitions` override a case's shape, and
`--unpadded-keys` gives keys of several lengths, as a CDC topic's numeric ids have):

  default           10M records, 1M keys, 4 partitions, everything dirty
  high-cardinality  20M records, 10M keys, 1 partition (a CDC topic: nearly a key per record)
  many-partitions   10M records, 1M keys, 64 partitions
  incremental       a 10M-record log of 5M keys compacted once, then 500k records over the same
                    keys appended and rolled; only the second compaction is timed, against the
                    copy floor of the files it reads and DuckDB's query over the whole log
  gdpr              the default shape with max.compaction.lag.ms one day (delete.retention.ms a
                    week), compacted once, then
                    one key erased (a tombstone); only the second compaction, at the tombstone's
                    KIP-354 deadline, is timed: it must rewrite only the groups holding that key

Builds a compacted topic in a local lake from the vectorised workload generator (100-byte
values, 5% tombstones by default) in a process of its own (`topic_build.built_apart`), seals
every segment, and measures, in one process per case
(several cases run one after another, each in a process of its own: a Spark application and JVM
of its own, as each compaction run has):

  (a) lakecleaner: `compact_topic` end to end — both passes, the quality gate and the commit —
      as a Spark application (`--master`, default local[*]), or as a client of a Spark Connect
      server (`--remote sc://host:port`; a server on this machine, e.g. `make spark-connect`,
      counts in (a)'s peak memory). Spark session start-up, the
      one-time imports and a 20k-record warm-up compaction are measured on their own line, not
      in (a).
  (b) the copy floor: the same segment files read and rewritten with pyarrow (zstd, one
      thread per core), no deduplication: the least any compaction must pay to rewrite them.
  (c) DuckDB deduplicating the same files in one query, the script a user would otherwise write:
      the latest record per (partition, key) by offset (QUALIFY row_number() … = 1), to Parquet.
  (b) and (c) each run in a new process of their own (bench/baselines.py), so that neither
  leaves what its allocators keep in the process that then runs (a)'s driver.
  (d) with `--iceberg`: (a) on a lake whose topic is an Iceberg table (log and latest values,
      the embedded catalog), the tables in step before the run: what keeping them in step adds to
      a compaction (target: at most 10%).

Each of (a), (b) and (c) runs `--runs` times (default 5), in turns, (a) each time on a fresh
copy of the topic; the median run is reported, and every run's time is printed. For each:
seconds, input records/s and MB/s (input bytes = the segment files), peak resident memory
(sampled; for (a) the whole process tree: driver, Spark JVM and Python workers, for (b) and
(c) their own processes; the highest of the runs), and the ratios a/b and a/c. See bench/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench.s3_servers, when run as a script

import boto3
import botocore.config
import psutil
import pyarrow as pa
import pyarrow.fs as pafs
from bench.baselines import Apart, copy_floor, duckdb_dedupe
from bench.s3_servers import LatencyProxy, S3Server, start_seaweedfs
from bench.topic_build import LakeSource, build_topic, built_apart, open_lake
from pyspark import cloudpickle
from pyspark.sql import SparkSession
from rich.console import Console
from rich.table import Table

from lakecleaner.config import LakeConfig, SparkSettings, parse_config
from lakecleaner.engine import EngineOptions, RunReport, compact_topic, requests_for
from lakecleaner.engine.memory import give_back
from lakecleaner.engine.session import build_session, connect_session
from lakecleaner.engine.sparkio import parallelism
from lakecleaner.iceberg.follow import sync_topic
from lakecleaner.lake import Lake, Topic
from lakecleaner.log.layout import partition_prefix
from lakecleaner.log.records import Record
from lakecleaner.workload import WorkloadSpec, generate

MB = 1_000_000


@dataclass(frozen=True)
class Case:
    """A shape of topic and the targets lakecleaner must meet on it (None: no target). With
    `appended`, the topic is compacted once, `appended` records over the same keys are added and
    rolled, and the second compaction is the one measured."""

    name: str
    records: int
    keys: int
    partitions: int
    max_a_over_b: float | None = None
    max_a_over_c: float | None = None
    memory_within_duckdb: bool = False
    appended: int = 0
    #: A case whose (a) peak memory this case's (a) must not exceed (measured before it,
    #: in a process of its own).
    memory_within_case: str | None = None
    #: Left out of `--case all` (hours of disk and time: run on its own).
    on_its_own: bool = False
    #: With `appended`: the measured (second) compaction's seconds against the first's (issue 79:
    #: a clean costs what changed, not the log).
    max_second_over_first: float | None = None
    #: Keys erased (a tombstone each, on a topic with `max.compaction.lag.ms` = ERASURE_LAG_MS)
    #: after the first compaction; the second, at their KIP-354 deadline, is measured.
    erased_keys: int = 0
    #: The most groups the measured compaction may rewrite (issue 79: an erasure rewrites the
    #: groups holding the key, and the tombstone's own, not the log).
    max_groups_rewritten: int | None = None


#: The gdpr case's max.compaction.lag.ms: a day, as an erasure deadline might be; its
#: delete.retention.ms is a week, so that the tombstones the first compaction kept are not due
#: too at the erasure's deadline (they would make every group a rewrite, as they should).
ERASURE_LAG_MS = 24 * 3_600_000
ERASURE_CONFIG = {"max.compaction.lag.ms": ERASURE_LAG_MS, "delete.retention.ms": 7 * ERASURE_LAG_MS}


#: Processes the case another's peak memory is compared with is measured in (`in_own_processes`).
#: One process's peak varies from run to run by tens of MB (eleven runs each of high-cardinality
#: and huge-partition, 2026-11-29 to 12-02: 1,841-1,881 MB at both sizes), so a single peak set
#: against another single peak decides nothing; the reference's own spread is measured instead.
REFERENCE_PROCESSES = 3

CASES = {
    c.name: c
    for c in (
        Case("default", 10_000_000, 1_000_000, 4, max_a_over_b=1.25, max_a_over_c=0.8),
        Case("high-cardinality", 20_000_000, 10_000_000, 1, max_a_over_c=0.8, memory_within_duckdb=True),
        Case("many-partitions", 10_000_000, 1_000_000, 64, max_a_over_c=0.8),
        Case(
            "incremental",
            10_000_000,
            5_000_000,
            4,
            max_a_over_b=1.25,
            max_a_over_c=0.5,
            appended=500_000,
            max_second_over_first=0.2,
        ),
        Case("gdpr", 10_000_000, 1_000_000, 4, erased_keys=1, max_groups_rewritten=2, max_second_over_first=0.2),
        Case(
            "huge-partition",
            100_000_000,
            50_000_000,
            1,
            max_a_over_c=1.0,
            memory_within_case="high-cardinality",
            on_its_own=True,
        ),
    )
}


@dataclass
class Measure:
    name: str
    seconds: float
    records: int
    input_bytes: int
    peak_rss_mb: float
    detail: str = ""

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds if self.seconds else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.input_bytes / MB / self.seconds if self.seconds else 0.0


def listening_process(url: str) -> psutil.Process | None:
    """The process of this machine that listens on a Spark Connect URL's port (the server), if any."""
    port = int(url.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])
    for connection in psutil.net_connections(kind="tcp"):
        if connection.status == psutil.CONN_LISTEN and connection.laddr.port == port and connection.pid:
            return psutil.Process(connection.pid)
    return None


#: Processes whose whole trees (a) also uses: a local Spark Connect server under --remote.
ENGINE_ROOTS: list[psutil.Process] = []
#: This process's children that are the simulated lake, not (a): the S3 server and the latency proxy.
EXCLUDED_ROOTS: list[psutil.Process] = []


def _descendants(process: psutil.Process) -> list[psutil.Process]:
    with contextlib.suppress(psutil.Error):
        return list(process.children(recursive=True))
    return []


def _kind(process: psutil.Process, me: psutil.Process) -> str:
    """What a sampled process is: this one (the driver, pyarrow, DuckDB), a JVM (Spark's driver
    and executors, a Connect server), or a Python worker of Spark's."""
    if process.pid == me.pid:
        return "this process"
    return "JVM" if process.name() == "java" else "Python workers"


class PeakMemory:
    """Peak resident memory, sampled every 100 ms: of this process alone, or with all its
    descendants (`tree`: the Spark JVM and its Python workers, and under --remote the local
    Connect server's tree, `ENGINE_ROOTS`), or of `roots` and their descendants instead (a
    baseline's own process, `bench.baselines.Apart`)."""

    def __init__(self, tree: bool, roots: Sequence[psutil.Process] = ()) -> None:
        self.tree = tree or bool(roots)
        self.roots = list(roots)
        self.peak = 0
        #: At the peak, the resident memory of each kind of process (`_kind`), in bytes, and
        #: how many processes of each kind there were.
        self.at_peak: dict[str, int] = {}
        self.processes: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        me = psutil.Process()
        roots = self.roots or ([me, *ENGINE_ROOTS] if self.tree else [me])
        while not self._stop.is_set():
            kinds: dict[str, int] = {}
            counts: dict[str, int] = {}
            excluded = {p.pid for r in EXCLUDED_ROOTS for p in (r, *_descendants(r))}
            for p in [*roots, *(c for r in roots for c in _descendants(r) if self.tree)]:
                if p.pid in excluded:
                    continue
                with contextlib.suppress(psutil.Error):
                    kind = _kind(p, me)
                    kinds[kind] = kinds.get(kind, 0) + p.memory_info().rss
                    counts[kind] = counts.get(kind, 0) + 1
            if sum(kinds.values()) > self.peak:
                self.peak, self.at_peak, self.processes = sum(kinds.values()), kinds, counts
            self._stop.wait(0.1)

    def breakdown(self) -> str:
        """The peak's parts, largest first: "Python workers (3) 1,260 MB, JVM 443 MB, …" (to the
        MB: two cases' peaks tens of MB apart are compared part by part; with the number of
        processes where there are several)."""
        return ", ".join(
            f"{k}{f' ({n})' if (n := self.processes.get(k, 1)) > 1 else ''} {v / MB:,.0f} MB"
            for k, v in sorted(self.at_peak.items(), key=lambda kv: -kv[1])
        )

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def timed(
    name: str,
    records: int,
    input_bytes: int,
    fn: Callable[[], str],
    *,
    tree: bool = False,
    apart: bool = False,
    requests: Callable[[], int] | None = None,
) -> Measure:
    """Run `fn` once, timed, after flushing the files written before it to disk (`os.sync`), so
    that no run pays for the write-back of what an earlier one wrote, and after this process gave
    back the memory earlier runs freed (pyarrow's allocator and the C library's malloc keep it
    until asked, `engine.memory.give_back`), so that a run's peak is its own. With `apart` (the
    baselines), `fn` runs in a new process (`bench.baselines.Apart`), whose peak is measured and
    which takes what it used with it; with `requests` (the latency proxy's count so far), the S3
    requests it made are named in its detail."""
    os.sync()
    gc.collect()
    give_back()
    before = requests() if requests else 0
    if apart:
        baseline = Apart(fn)
        with PeakMemory(tree, [psutil.Process(baseline.start())]) as memory:
            seconds, detail = baseline.result()
    else:
        with PeakMemory(tree) as memory:
            start = time.perf_counter()
            detail = fn()
            seconds = time.perf_counter() - start
    made = f"; {requests() - before:,} S3 requests" if requests else ""
    parts = f"; at the memory peak: {memory.breakdown()}" if tree else ""
    return Measure(name, seconds, records, input_bytes, memory.peak / MB, detail + made + parts)


def segment_files(topic: Topic) -> list[tuple[int, str, int]]:
    """(partition, key under the lake's root, bytes) of every file of the topic's log."""
    return [
        (log.partition, partition_prefix(topic.name, log.partition) + f.path, f.size_bytes)
        for log in topic.partition_logs()
        for s in log.manifest().segments
        for f in s.files
    ]


class LocalLakes:
    """Lakes in folders of a local directory (`--store local`)."""

    name = "local"

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.filesystem = pafs.LocalFileSystem()
        #: No requests to count on a local disk.
        self.requests_made: Callable[[], int] | None = None

    def lake(self, name: str, iceberg: bool = False) -> Lake:
        return Lake.open(tabled(self.workdir / name)) if iceberg else open_lake(self.source(name))

    def source(self, name: str) -> LakeSource:
        """What opens lake `name` (`topic_build.open_lake`), here or in another process."""
        return f"file://{self.workdir / name}"

    def copy(self, source: str, target: str) -> None:
        shutil.copytree(self.workdir / source, self.workdir / target)

    def remove(self, name: str) -> None:
        shutil.rmtree(self.workdir / name, ignore_errors=True)

    def remove_file(self, name: str) -> None:
        (self.workdir / name).unlink(missing_ok=True)

    def disk(self) -> Path:
        """Where this store's bytes land on the local disk."""
        return self.workdir

    def reclaim(self) -> bool:
        """Nothing to reclaim: a removed folder's disk is free at once."""
        return False

    def path(self, name: str, key: str = "") -> str:
        """What pyarrow's filesystem (and DuckDB) open for `key` of lake or folder `name`."""
        return str(self.workdir / name / key) if key else str(self.workdir / name)

    def close(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)


#: Server-side copies of a lake's objects at once (`S3Lakes.copy`), and the client's connections for them.
COPY_THREADS = 16


class S3Lakes:
    """Lakes under prefixes of a bucket of SeaweedFS on 127.0.0.1 (`--store s3`), reached through the
    latency proxy when `latency_ms` > 0. lakecleaner, the copy floor and DuckDB (through pyarrow's S3
    filesystem) all go through the same endpoint; copying a lake for a run is done on the server."""

    name = "s3"

    def __init__(self, server: S3Server, latency_ms: float, disk: Path, owned: bool = True) -> None:
        self.server, self.owned, self.workdir = server, owned, disk
        self.proxy = LatencyProxy(self.server.url, latency_ms) if latency_ms > 0 else None
        self.endpoint = self.proxy.url if self.proxy else self.server.url
        #: The requests made through the latency proxy so far (none counted without it).
        self.requests_made: Callable[[], int] | None = (lambda: self.proxy.requests) if self.proxy else None
        self.client = boto3.client(
            "s3",
            config=botocore.config.Config(max_pool_connections=COPY_THREADS),
            endpoint_url=self.server.url,
            region_name="us-east-1",
            aws_access_key_id=self.server.access_key,
            aws_secret_access_key=self.server.secret_key,
        )
        self.filesystem = pafs.S3FileSystem(
            access_key=self.server.access_key,
            secret_key=self.server.secret_key,
            endpoint_override=self.endpoint,
            scheme="http",
            region="us-east-1",
        )
        pids = (server.pid, *([self.proxy.process.pid] if self.proxy else []))
        # a server the bench did not start has no pid here (psutil.Process(None) would be this process)
        EXCLUDED_ROOTS.extend(psutil.Process(p) for p in pids if p is not None)

    def lake(self, name: str, iceberg: bool = False) -> Lake:
        if iceberg:
            raise SystemExit("--iceberg runs on --store local only (an s3:// lake's tables need a catalog)")
        return open_lake(self.source(name))

    def source(self, name: str) -> LakeSource:
        """What opens lake `name` (`topic_build.open_lake`), here or in another process."""
        storage = {"endpoint_url": self.endpoint, "region": "us-east-1"}
        storage |= {"access_key_id": self.server.access_key, "secret_access_key": self.server.secret_key}
        return {"lake": {"uri": f"s3://{self.server.bucket}/{name}", "storage": storage}}

    def _keys(self, name: str) -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.server.bucket, Prefix=f"{name}/")
        return [o["Key"] for page in pages for o in page.get("Contents", [])]

    def copy(self, source: str, target: str) -> None:
        def one(key: str) -> None:
            bucket = self.server.bucket
            self.client.copy_object(
                Bucket=bucket, Key=target + key[len(source) :], CopySource={"Bucket": bucket, "Key": key}
            )

        with ThreadPoolExecutor(COPY_THREADS) as pool:
            list(pool.map(one, self._keys(source)))

    def remove(self, name: str) -> None:
        keys = self._keys(name)
        for i in range(0, len(keys), 1000):
            objects = [{"Key": k} for k in keys[i : i + 1000]]
            self.client.delete_objects(Bucket=self.server.bucket, Delete={"Objects": objects, "Quiet": True})

    def remove_file(self, name: str) -> None:
        self.client.delete_object(Bucket=self.server.bucket, Key=name)

    def disk(self) -> Path:
        """Where this store's bytes land on the local disk (the bench's directory, the server's in it)."""
        return self.workdir

    def reclaim(self) -> bool:
        """Have SeaweedFS free the disk of the objects removed so far (`S3Server.reclaim`, its
        vacuum). Only when the disk is short (`make_room`): the runs right after a vacuum were
        measured slower (incremental at 20 ms, (a) 12.9, 15.0, 16.0 s with a vacuum after every
        removal, 11.7, 12.4, 12.6 s without), so a vacuum would be part of what the bench measures."""
        self.server.reclaim()
        return True

    def path(self, name: str, key: str = "") -> str:
        return f"{self.server.bucket}/{name}/{key}" if key else f"{self.server.bucket}/{name}"

    def close(self) -> None:
        if self.proxy:
            self.proxy.close()
        if self.owned:
            self.server.stop()


Lakes = LocalLakes | S3Lakes


def session(master: str) -> SparkSession:
    """(a)'s Spark application, built as `lakecleaner compact` builds its own (`build_session`:
    the engine's settings for its Python workers and its driver's JVM included, and Spark's
    default driver memory, 1 GB, as a user's: with 4 GB the JVM's G1 grew its heap 0.1 GB further
    on the 100M-record partition, none of it live)."""
    conf = {"spark.ui.showConsoleProgress": "false"}
    return build_session(SparkSettings(master=master, conf=conf), "lakecleaner-bench")


def _import_engine(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for module in ("offset_map", "recopy", "gate_rows"):
        importlib.import_module(f"lakecleaner.engine.{module}")
    yield from batches


def warm_up(spark: SparkSession, lakes: Lakes) -> None:
    """Start the Python workers and import the engine's task modules in them, then compact a
    20k-record topic once, so that one-time costs (Spark's code generation and JIT, the first
    Great Expectations validation) are paid here, as part of start-up, and not by (a)."""
    tasks = parallelism(spark)
    if __name__ != "__main__":  # imported (by the smoke test): ship this module's functions by value
        cloudpickle.register_pickle_by_value(sys.modules[__name__])
    spark.range(0, tasks, 1, tasks).mapInArrow(_import_engine, "id long").count()
    spec = WorkloadSpec(keys=2_000, records=20_000, partitions=2, value_size=100, tombstone_share=0.05, seed=1)
    lake = lakes.lake("warm-up")
    compact_all(
        spark, lake, build_topic(lake, spec, 64 * 1024 * 1024, 5_000), spec.start_ms + spec.timestamp_spread_ms + 1
    )
    lakes.remove("warm-up")


def compact_all(
    spark: SparkSession, lake: Lake, topic: Topic, now: int, options: EngineOptions | None = None
) -> RunReport:
    """Compact every partition of `topic` that has something to clean at `now`, as `lakecleaner
    compact` does: the manifests read at once (`Topic.manifests`), not one after another."""
    requests = [r for m in topic.manifests().values() if (r := requests_for(m, topic.config, now))]
    return compact_topic(spark, lake, topic.name, requests, now, options=options)


def median_run(runs: Sequence[Measure]) -> Measure:
    """The run of median time (the upper one of an even count), with the peak memory of all runs."""
    middle = sorted(runs, key=lambda m: m.seconds)[len(runs) // 2]
    return Measure(
        middle.name, middle.seconds, middle.records, middle.input_bytes, max(m.peak_rss_mb for m in runs), middle.detail
    )


def first_compaction(
    spark: SparkSession, lake: Lake, topic: Topic, spec: WorkloadSpec, args: argparse.Namespace, case: Case
) -> tuple[int, str, float]:
    """The set-up of a case measured at its second compaction: compact the whole log once, then
    append `appended` records over the same keys, later, or erase `erased_keys` keys, and roll.
    Returns the `now` of the second compaction, a line about the first and its seconds."""
    now = spec.start_ms + spec.timestamp_spread_ms + 1
    if case.erased_keys:
        topic = lake.alter_topic(topic.name, ERASURE_CONFIG)
    started = time.perf_counter()
    report = compact_all(spark, lake, topic, now)
    seconds = time.perf_counter() - started
    first = f"first compaction {seconds:.1f} s, {report.totals.records_written:,} records kept"
    if case.erased_keys:
        return erased(topic, case.erased_keys, now + 1_000), first, seconds
    appended = case.appended if args.appended is None else args.appended
    more = dataclasses.replace(spec, records=appended, seed=spec.seed + 1, start_ms=now + 1_000)
    for partition, batch in generate(more, args.batch_records):
        topic.partition(partition).append(batch, now_ms=more.start_ms + more.timestamp_spread_ms)
    for log in topic.partition_logs():
        log.roll(now_ms=more.start_ms + more.timestamp_spread_ms)
    return more.start_ms + more.timestamp_spread_ms + 1, first, seconds


def erased(topic: Topic, keys: int, at_ms: int) -> int:
    """Append a tombstone of each of `keys` live keys of partition 0 at `at_ms` (a GDPR erasure)
    and roll; the `now` of their KIP-354 deadline, when the compaction that must erase them runs."""
    log = topic.partition(0)
    live = log.read(max_records=keys, columns=["key"]).column("key").to_pylist()
    log.append([Record(key, None, at_ms) for key in live], now_ms=at_ms)
    log.roll(now_ms=at_ms)
    return at_ms + ERASURE_LAG_MS


#: The disk a run needs beyond its input, in input sizes: the run's copy of the lake, a run's
#: output (at most the input) and pass 1's key spills and Spark's scratch (a third, measured).
DISK_PER_INPUT = 2.5


def make_room(lakes: Lakes, input_bytes: int) -> None:
    """Before a run: stop with a clear message when the disk has no room for it (a compaction that
    runs out of disk fails its partition, no space left on device, after minutes, and proves
    nothing). On SeaweedFS, removed lake copies keep their disk until a vacuum: one is asked for
    only when the disk is short, and the run says so."""
    needed, where = int(input_bytes * DISK_PER_INPUT), lakes.disk()
    if shutil.disk_usage(where).free < needed and lakes.reclaim():
        Console().print("[yellow]the disk was short: SeaweedFS vacuumed its volumes before this run[/]")
    free = shutil.disk_usage(where).free
    if free < needed:
        raise SystemExit(
            f"the runs need about {needed / 1e9:.0f} GB free in {where} (the input is {input_bytes / 1e9:.1f} GB) "
            f"and {free / 1e9:.0f} GB are: pass --dir on a larger disk, or free space"
        )


def run_once(
    args: argparse.Namespace, case: Case, records: int, keys: int, spark: SparkSession, lakes: Lakes, prefix: str
) -> dict[str, Any]:
    spec = WorkloadSpec(
        keys=keys,
        records=records,
        partitions=args.partitions or case.partitions,
        value_size=args.value_size,
        tombstone_share=args.tombstones,
        padded_keys=not args.unpadded_keys,
        seed=args.seed,
    )
    source = f"{prefix}/lake"
    started = time.perf_counter()
    topic = built_apart(lakes.source(source), spec, args.segment_bytes, args.batch_records)
    lake = lakes.lake(source)
    now = spec.start_ms + spec.timestamp_spread_ms + 1
    setup, first_s = "", None
    appended = case.appended if args.appended is None else args.appended
    if appended or case.erased_keys:
        now, setup, first_s = first_compaction(spark, lake, topic, spec, args, case)
    build_s = time.perf_counter() - started
    located = segment_files(topic)
    files = [(partition, lakes.path(source, key)) for partition, key, _ in located]
    input_bytes = sum(size for *_, size in located)
    input_records = sum(s.record_count for log in topic.partition_logs() for s in log.manifest().segments)
    topic_root = lakes.path(source, partition_prefix(topic.name, 0).rsplit("/partition=", 1)[0])
    runs: dict[str, list[Measure]] = {"a": [], "b": [], "c": [], **({"d": []} if args.iceberg else {})}
    phases: list[dict[str, int]] = []
    rewritten: list[int] = []
    failures: list[str] = []

    def compact(copy: str, iceberg: bool = False) -> str:
        fresh = lakes.lake(copy, iceberg)
        report = compact_all(spark, fresh, fresh.topic(topic.name), now, options)
        phases.append(report.phases_ms)
        totals = report.totals
        rewritten.append(totals.groups_rewritten)
        spent = ", ".join(f"{k} {v / 1000:.1f}s" for k, v in report.phases_ms.items())
        status = "ok"
        if report.failed:
            first = next(p for p in report.partitions if p.failed)
            failures.append(f"partition {first.partition}: {first.message}")
            status = f"FAILED ({failures[-1]})"
        buckets = max((p.key_buckets for p in report.partitions), default=0)
        return (
            f"{status}: {totals.records_written} records kept, recopy {totals.recopy_percent}%, "
            f"{totals.bytes_rewritten / MB:.0f} MB written, {totals.groups_rewritten} groups rewritten, "
            f"{totals.groups_unchanged} kept as they were, "
            f"{totals.groups_vectored} by deletion vectors, up to {buckets} key buckets; {spent}"
        )

    options = EngineOptions(dedupe_buffer_size=args.dedupe_buffer_size)
    counter = lakes.requests_made
    for i in range(args.runs):
        copy = f"{prefix}/lake-{i}"
        make_room(lakes, input_bytes)
        lakes.copy(source, copy)  # compaction rewrites its lake: each run gets the same input
        out = f"{prefix}/copy"
        lakes.remove(out)
        copying = partial(copy_floor, lakes.filesystem, files, lakes.path(out))
        runs["b"].append(
            timed("(b) copy floor, pyarrow", input_records, input_bytes, copying, apart=True, requests=counter)
        )
        lakes.remove(out)  # each run's output goes before the next run: a partition of 10 GB is written three times
        dedupe = partial(duckdb_dedupe, lakes.filesystem, files, lakes.path(f"{prefix}/duckdb.parquet"), topic_root)
        runs["c"].append(timed("(c) DuckDB dedupe", input_records, input_bytes, dedupe, apart=True, requests=counter))
        lakes.remove_file(f"{prefix}/duckdb.parquet")
        compacting = partial(compact, copy)
        runs["a"].append(
            timed("(a) lakecleaner compact_topic", input_records, input_bytes, compacting, tree=True, requests=counter)
        )
        lakes.remove(copy)
        if args.iceberg:
            lakes.copy(source, copy)
            sync_topic(lakes.lake(copy, True), topic.name)  # the tables in step before, as on a live lake
            name = "(d) lakecleaner compact_topic, tables in step"
            runs["d"].append(timed(name, input_records, input_bytes, partial(compact, copy, True), tree=True))
            lakes.remove(copy)
    ours, floor, duck = (median_run(runs[k]) for k in "abc")
    median_phases = phases[[m.seconds for m in runs["a"]].index(ours.seconds)]
    result = {
        "case": case.name,
        "store": lakes.name,
        "latency_ms": args.latency_ms,
        "records": records,
        "keys": keys,
        "partitions": spec.partitions,
        "appended": appended,
        "erased_keys": case.erased_keys,
        "padded_keys": not args.unpadded_keys,
        "setup": setup,
        "input_records": input_records,
        "input_mb": input_bytes / MB,
        "files": len(files),
        "build_s": build_s,
        "runs": args.runs,
        "measures": [
            asdict(m) | {"records_per_s": m.records_per_s, "mb_per_s": m.mb_per_s} for m in (ours, floor, duck)
        ],
        "seconds_per_run": {k: [m.seconds for m in v] for k, v in runs.items()},
        "phases_ms": median_phases,
        "a_over_b": ours.seconds / floor.seconds,
        "a_over_c": ours.seconds / duck.seconds,
        "second_over_first": None if first_s is None else ours.seconds / first_s,
        "groups_rewritten": max(rewritten, default=0),
        "failures": failures,
    }
    if args.iceberg:
        tables = median_run(runs["d"])
        result["measures"].append(asdict(tables) | {"records_per_s": tables.records_per_s, "mb_per_s": tables.mb_per_s})
        result["d_over_a"] = tables.seconds / ours.seconds
    return result


#: What keeping the topic's Iceberg tables in step may add to a compaction run (issue 48).
ICEBERG_MAX_COST = 0.10


def tabled(root: Path) -> LakeConfig:
    """A lake at `root` whose topics are Iceberg tables (the embedded catalog in the lake)."""
    return parse_config({"lake": {"uri": f"file://{root}"}, "iceberg": {"enabled": True}}, "<bench>")


def targets(case: Case, result: dict[str, Any], reference: dict[str, Any] | None) -> list[tuple[str, bool]]:
    """Each target of `case` in words, and whether this run met it (`reference`: the result of the
    case whose memory this one's must stay within)."""
    ours, duck = result["measures"][0], result["measures"][2]
    found = [("every run of (a) compacts the topic (no failed partition)", not result["failures"])]
    if case.max_a_over_b is not None:
        found.append((f"a/b <= {case.max_a_over_b}", result["a_over_b"] <= case.max_a_over_b))
    if case.max_a_over_c is not None:
        found.append((f"a/c <= {case.max_a_over_c}", result["a_over_c"] <= case.max_a_over_c))
    if case.memory_within_duckdb:
        found.append(("peak memory of (a) <= (c)", ours["peak_rss_mb"] <= duck["peak_rss_mb"]))
    ratio = result.get("second_over_first")
    if case.max_second_over_first is not None and ratio is not None:
        found.append(
            (f"second compaction / first <= {case.max_second_over_first}", ratio <= case.max_second_over_first)
        )
    if case.max_groups_rewritten is not None:
        most = case.max_groups_rewritten
        found.append((f"groups rewritten <= {most} (in every run)", result["groups_rewritten"] <= most))
    if case.memory_within_case and reference is not None:
        found.append(within_reference_memory(case.memory_within_case, ours["peak_rss_mb"], reference))
    return found


def within_reference_memory(name: str, peak_mb: float, reference: dict[str, Any]) -> tuple[str, bool]:
    """Whether (a)'s `peak_mb` stays within the peak memory of (a) at the case `name` (issue 50:
    bounded per task, not growing with the partition): no higher than the reference's highest peak
    over its processes plus their spread (highest less lowest). A peak that grew with the partition
    lies above that band; one that differs from the reference by no more than the reference differs
    from itself lies in it. Measured in one process (`peaks_mb` absent), the band is that peak."""
    peaks = reference.get("peaks_mb") or [reference["measures"][0]["peak_rss_mb"]]
    highest = max(peaks)
    spread = highest - min(peaks)
    each = ", ".join(f"{p:,.0f}" for p in peaks)
    return (
        f"peak memory of (a) <= (a) at {name} to within its spread "
        f"({highest:,.0f} + {spread:,.0f} MB; its peaks: {each} MB)",
        peak_mb <= highest + spread,
    )


def show(result: dict[str, Any], console: Console) -> None:
    appended = f", then {result['appended']:,} appended" if result["appended"] else ""
    if result.get("erased_keys"):
        appended = f", max.compaction.lag.ms a day, then {result['erased_keys']:,} key(s) erased"
    keys = "keys" if result["padded_keys"] else "unpadded keys"
    where = "local disk" if result["store"] == "local" else f"SeaweedFS on loopback, {result['latency_ms']:g} ms added"
    title = (
        f"{result['case']} ({where}): {result['records']:,} records, {result['keys']:,} {keys}, {result['partitions']} "
        f"partitions{appended}; input {result['input_records']:,} records, {result['input_mb']:.0f} MB in "
        f"{result['files']} files"
    )
    table = Table(title=title)
    for column in ("run", "seconds", "records/s", "MB/s", "peak RSS MB", "detail"):
        table.add_column(column, justify="left" if column in ("run", "detail") else "right")
    for m in result["measures"]:
        table.add_row(
            m["name"],
            f"{m['seconds']:.1f}",
            f"{m['records_per_s']:,.0f}",
            f"{m['mb_per_s']:.1f}",
            f"{m['peak_rss_mb']:,.0f}",
            m["detail"],
        )
    console.print(table)
    if result["setup"]:
        console.print(result["setup"], highlight=False)
    each = "; ".join(
        f"({k}) " + ", ".join(f"{s:.1f}" for s in seconds) for k, seconds in result["seconds_per_run"].items()
    )
    console.print(f"seconds of each run, in order: {each}", highlight=False)
    second = result.get("second_over_first")
    console.print(
        f"a/b = {result['a_over_b']:.2f}   a/c = {result['a_over_c']:.2f}"
        + ("" if second is None else f"   second / first compaction = {second:.2f}"),
        highlight=False,
    )
    if "d_over_a" in result:
        cost = result["d_over_a"] - 1
        verdict = "met" if cost <= ICEBERG_MAX_COST else "MISSED"
        target = f"target <= {ICEBERG_MAX_COST:.0%}: {verdict}"
        console.print(f"Iceberg tables' cost: {cost:+.1%} ({target})", highlight=False)
    for target, met in result["targets"]:
        console.print(f"target {target}: {'met' if met else 'MISSED'}", highlight=False)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--case", default="default", choices=[*CASES, "all"], help="the shape to measure (all: but huge-partition)"
    )
    parser.add_argument(
        "--store",
        default="local",
        choices=["local", "s3"],
        help="where the lake is: a local directory, or a bucket of SeaweedFS on 127.0.0.1",
    )
    parser.add_argument(
        "--latency-ms", type=float, default=0.0, help="with --store s3: added to every request (the latency proxy)"
    )
    parser.add_argument(
        "--alone",
        action="store_true",
        help="measure only --case, not also the case whose peak memory its own is compared with",
    )
    parser.add_argument("--records", type=int, help="records (default: the case's)")
    parser.add_argument("--keys", type=int, help="keys (default: the case's)")
    parser.add_argument("--partitions", type=int, help="partitions (default: the case's)")
    parser.add_argument("--appended", type=int, help="records appended before the measured run (incremental)")
    parser.add_argument(
        "--dedupe-buffer-size",
        type=int,
        default=EngineOptions().dedupe_buffer_size,
        help="log.cleaner.dedupe.buffer.size",
    )
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--tombstones", type=float, default=0.05, help="share of keyed records that are tombstones")
    parser.add_argument("--segment-bytes", type=int, default=64 * 1024 * 1024)
    parser.add_argument("--batch-records", type=int, default=250_000, help="records per append (one file each)")
    parser.add_argument(
        "--unpadded-keys",
        action="store_true",
        help="keys of as many lengths as their ids have digits (key-7, key-1234567), not zero-padded to one width",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--iceberg",
        action="store_true",
        help="also (d): (a) with the topic's Iceberg tables kept in step (the log's and the latest values')",
    )
    parser.add_argument("--master", default="local[*]")
    parser.add_argument(
        "--remote",
        help="run (a) on this Spark Connect server (sc://host:port, e.g. `make spark-connect`'s) instead of "
        "its own Spark application; a server on this machine counts in (a)'s memory",
    )
    parser.add_argument("--scaling", action="store_true", help="also run 1M, 4M and 16M records (keys = records/10)")
    parser.add_argument(
        "--runs", type=int, default=5, help="runs of each of (a), (b) and (c) per size; the median is reported"
    )
    parser.add_argument("--dir", help="work directory (default: a temporary one, removed afterwards)")
    parser.add_argument("--json", help="also write the results to this file")
    return parser.parse_args(argv)


def chosen_cases(args: argparse.Namespace) -> list[Case]:
    """The cases `--case` names, each after the case its memory is compared with (unless `--alone`)."""
    cases = [c for c in CASES.values() if not c.on_its_own] if args.case == "all" else [CASES[args.case]]
    for case in list(cases):
        if case.memory_within_case and not args.alone and all(c.name != case.memory_within_case for c in cases):
            cases.insert(cases.index(case), CASES[case.memory_within_case])
    return cases


def case_argv(argv: Sequence[str], case: str, out: str) -> list[str]:
    """`argv` for measuring `case` alone in a process of its own, its results written to `out`
    (`--case`, `--json` and `--alone` replaced, every other option as given)."""
    replaced = {"--case", "--json"}
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in replaced:
            skip = True
        elif arg != "--alone" and arg.split("=", 1)[0] not in replaced:
            kept.append(arg)
    return [*kept, "--case", case, "--alone", "--json", out]


def in_own_processes(argv: Sequence[str], cases: Sequence[Case], console: Console) -> list[dict[str, Any]]:
    """Measure each case in a process of its own (this script, `case_argv`): its own Spark
    application, JVM and driver, as each compaction run (an Airflow task, `lakecleaner compact`)
    has one, so that no case's peak memory holds what an earlier case grew (the JVM's heap, the
    driver's arenas, the Python workers). A case another's memory is compared with is measured in
    `processes_for` processes, and reported as its first, with every process's peak; the case
    compared with it is judged here, once both have run."""
    results: list[dict[str, Any]] = []
    for case in cases:
        measured = [measured_apart(argv, case) for _ in range(processes_for(case, cases))]
        result = measured[0]
        if len(measured) > 1:
            result["peaks_mb"] = [r["measures"][0]["peak_rss_mb"] for r in measured]
        result["targets"] = judged(case, result, results, console)
        results.append(result)
    return results


def processes_for(case: Case, cases: Sequence[Case]) -> int:
    """Processes `case` is measured in: `REFERENCE_PROCESSES` when another of `cases` compares its
    peak memory with this one's (`within_reference_memory`), else one."""
    return REFERENCE_PROCESSES if any(c.memory_within_case == case.name for c in cases) else 1


def measured_apart(argv: Sequence[str], case: Case) -> dict[str, Any]:
    """`case`'s result, measured by this script in a process of its own (`case_argv`)."""
    with tempfile.TemporaryDirectory(prefix="lakecleaner-bench-case-") as tmp:
        out = Path(tmp) / "results.json"
        command = [sys.executable, str(Path(__file__).resolve()), *case_argv(argv, case.name, str(out))]
        if subprocess.run(command, check=False).returncode != 0:
            raise SystemExit(f"the {case.name} case failed in its own process (its error is above): "
                             f"{' '.join(command)}")  # fmt: skip
        written: list[dict[str, Any]] = json.loads(out.read_text())
    (result,) = written
    return result


def judged(case: Case, result: dict[str, Any], earlier: Sequence[dict[str, Any]], console: Console) -> list[Any]:
    """`result`'s targets with those against an earlier case's result, which are printed (a case
    measured alone prints the rest itself)."""
    reference = next((r for r in earlier if r["case"] == case.memory_within_case), None)
    found = targets(case, result, reference)
    for target, met in found[len(result["targets"]) :]:
        console.print(f"target {target}: {'met' if met else 'MISSED'}", highlight=False)
    return found


def measured_here(
    args: argparse.Namespace, cases: Sequence[Case], spark: SparkSession | None, s3_server: S3Server | None
) -> list[dict[str, Any]]:
    """Measure `cases` in this process, one Spark application (`spark`, or one started here)."""
    console = Console()
    started = time.perf_counter()
    if args.remote:
        session_ = spark or connect_session(args.remote)
        server = listening_process(args.remote)
        ENGINE_ROOTS.extend([server] if server else [])
    else:
        importlib.import_module("great_expectations")  # the driver runs the gate's validations
        session_ = spark or session(args.master)
    runs: list[tuple[Case, int, int]] = [(c, args.records or c.records, args.keys or c.keys) for c in cases]
    if args.scaling:
        sizes = sorted({(n, n // 10) for n in (1_000_000, 4_000_000, 16_000_000)} | {runs[0][1:]})
        runs = [(runs[0][0], n, k) for n, k in sizes]
    results: list[dict[str, Any]] = []
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="lakecleaner-bench-"))
    lakes: Lakes = LocalLakes(base)
    if args.store == "s3":
        lakes = S3Lakes(s3_server or start_seaweedfs(base / "s3"), args.latency_ms, base, owned=s3_server is None)
    try:
        warm_up(session_, lakes)
        console.print(
            f"start-up (Spark session, Python workers, imports, a 20k-record warm-up compaction): "
            f"{time.perf_counter() - started:.1f} s",
            highlight=False,
        )
        for case, records, keys in runs:
            prefix = f"{case.name}-{records}"
            lakes.remove(prefix)
            result = run_once(args, case, records, keys, session_, lakes, prefix)
            result["targets"] = targets(case, result, None)
            show(result, console)
            result["targets"] = judged(case, result, results, console)
            results.append(result)
            lakes.remove(prefix)
    finally:
        if isinstance(lakes, S3Lakes):
            lakes.close()
        if not args.dir:
            shutil.rmtree(base, ignore_errors=True)
        if spark is None:
            session_.stop()
    return results


def main(
    argv: Sequence[str] | None = None, spark: SparkSession | None = None, s3_server: S3Server | None = None
) -> list[dict[str, Any]]:
    """The benchmark (`spark`, `s3_server`: a session and, for --store s3, a server to use instead of
    starting them; the smoke tests share the suite's). Several cases, unless --scaling or given a
    session, are measured each in a process of its own (`in_own_processes`)."""
    args = parse_args(argv)
    cases = chosen_cases(args)
    if len(cases) > 1 and spark is None and not args.scaling:
        results = in_own_processes(sys.argv[1:] if argv is None else argv, cases, Console())
    else:
        results = measured_here(args, cases, spark, s3_server)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return results


if __name__ == "__main__":
    main()
    sys.exit(0)
