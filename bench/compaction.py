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

Builds a compacted topic in a local lake from the vectorised workload generator (100-byte
values, 5% tombstones by default), seals every segment, and measures in one process:

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
  (d) with `--iceberg`: (a) on a lake whose topic is an Iceberg table (log and latest values,
      the embedded catalog), the tables in step before the run: what keeping them in step adds to
      a compaction (target: at most 10%).

Each of (a), (b) and (c) runs `--runs` times (default 5), in turns, (a) each time on a fresh
copy of the topic; the median run is reported, and every run's time is printed. For each:
seconds, input records/s and MB/s (input bytes = the segment files), peak resident memory
(sampled; for (a) the whole process tree: driver, Spark JVM and Python workers; the highest of
the runs), and the ratios a/b and a/c. See bench/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import json
import os
import shutil
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

import psutil
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark import cloudpickle
from pyspark.sql import SparkSession
from rich.console import Console
from rich.table import Table

from lakecleaner.config import LakeConfig, SparkSettings, parse_config
from lakecleaner.engine import EngineOptions, RunReport, compact_topic, requests_for
from lakecleaner.engine.session import build_session, connect_session
from lakecleaner.engine.sparkio import parallelism
from lakecleaner.iceberg.follow import sync_topic
from lakecleaner.lake import Lake, Topic
from lakecleaner.log.layout import partition_prefix
from lakecleaner.log.segment_files import COMPRESSION, ROW_GROUP_SIZE
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


CASES = {
    c.name: c
    for c in (
        Case("default", 10_000_000, 1_000_000, 4, max_a_over_b=1.25, max_a_over_c=1.0),
        Case("high-cardinality", 20_000_000, 10_000_000, 1, max_a_over_c=1.3, memory_within_duckdb=True),
        Case("many-partitions", 10_000_000, 1_000_000, 64, max_a_over_c=1.0),
        Case("incremental", 10_000_000, 5_000_000, 4, max_a_over_b=1.25, max_a_over_c=1.0, appended=500_000),
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


class PeakMemory:
    """Peak resident memory, sampled every 100 ms: of this process alone (pyarrow and DuckDB run
    in it), or with all its descendants (`tree`: the Spark JVM and its Python workers, and under
    --remote the local Connect server's tree, `ENGINE_ROOTS`)."""

    def __init__(self, tree: bool) -> None:
        self.tree = tree
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        me = psutil.Process()
        roots = [me, *ENGINE_ROOTS] if self.tree else [me]
        while not self._stop.is_set():
            total = 0
            for p in [*roots, *(c for r in roots for c in r.children(recursive=True) if self.tree)]:
                with contextlib.suppress(psutil.Error):
                    total += p.memory_info().rss
            self.peak = max(self.peak, total)
            self._stop.wait(0.1)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def timed(name: str, records: int, input_bytes: int, fn: Callable[[], str], *, tree: bool = False) -> Measure:
    """Run `fn` once, timed, after flushing the files written before it to disk (`os.sync`), so
    that no run pays for the write-back of what an earlier one wrote."""
    os.sync()
    with PeakMemory(tree) as memory:
        start = time.perf_counter()
        detail = fn()
        seconds = time.perf_counter() - start
    return Measure(name, seconds, records, input_bytes, memory.peak / MB, detail)


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


def segment_files(lake: Lake, topic: Topic) -> list[tuple[int, Path]]:
    """(partition, local path) of every file of the topic's log."""
    root = Path(lake.store.root_uri[len("file://") :])
    return [
        (log.partition, root / (partition_prefix(topic.name, log.partition) + f.path))
        for log in topic.partition_logs()
        for s in log.manifest().segments
        for f in s.files
    ]


def copy_floor(files: Sequence[tuple[int, Path]], out: Path) -> str:
    out.mkdir(parents=True, exist_ok=True)

    def copy(item: tuple[int, Path]) -> int:
        partition, path = item
        table = pq.read_table(path)
        pq.write_table(table, out / f"{partition}-{path.name}", compression=COMPRESSION, row_group_size=ROW_GROUP_SIZE)
        return table.num_rows

    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        copied = sum(pool.map(copy, files))
    return f"{copied} records copied"


def duckdb_dedupe(files: Sequence[tuple[int, Path]], out: Path) -> str:
    import duckdb

    paths = ", ".join(f"'{p}'" for _, p in files)
    query = f"""
        COPY (
            SELECT * EXCLUDE (filename) FROM read_parquet([{paths}], hive_partitioning = true, filename = true)
            QUALIFY row_number() OVER (PARTITION BY "partition", key ORDER BY "offset" DESC) = 1
        ) TO '{out}' (FORMAT parquet, COMPRESSION zstd)
    """
    with duckdb.connect() as con:
        con.execute(query)
        kept = con.execute(f"SELECT count(*) FROM read_parquet('{out}')").fetchone()
    return f"{kept[0] if kept else 0} records kept"


def session(master: str) -> SparkSession:
    """(a)'s Spark application, built as `lakecleaner compact` builds its own (`build_session`:
    the engine's settings for its Python workers included)."""
    conf = {"spark.ui.showConsoleProgress": "false", "spark.driver.memory": "4g"}
    return build_session(SparkSettings(master=master, conf=conf), "lakecleaner-bench")


def _import_engine(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for module in ("offset_map", "recopy", "gate_rows"):
        importlib.import_module(f"lakecleaner.engine.{module}")
    yield from batches


def warm_up(spark: SparkSession, workdir: Path) -> None:
    """Start the Python workers and import the engine's task modules in them, then compact a
    20k-record topic once, so that one-time costs (Spark's code generation and JIT, the first
    Great Expectations validation) are paid here, as part of start-up, and not by (a)."""
    tasks = parallelism(spark)
    if __name__ != "__main__":  # imported (by the smoke test): ship this module's functions by value
        cloudpickle.register_pickle_by_value(sys.modules[__name__])
    spark.range(0, tasks, 1, tasks).mapInArrow(_import_engine, "id long").count()
    spec = WorkloadSpec(keys=2_000, records=20_000, partitions=2, value_size=100, tombstone_share=0.05, seed=1)
    lake = Lake.open(f"file://{workdir / 'lake'}")
    compact_all(
        spark, lake, build_topic(lake, spec, 64 * 1024 * 1024, 5_000), spec.start_ms + spec.timestamp_spread_ms + 1
    )
    shutil.rmtree(workdir, ignore_errors=True)


def compact_all(
    spark: SparkSession, lake: Lake, topic: Topic, now: int, options: EngineOptions | None = None
) -> RunReport:
    """Compact every partition of `topic` that has something to clean at `now`."""
    requests = [r for log in topic.partition_logs() if (r := requests_for(log.manifest(), topic.config, now))]
    return compact_topic(spark, lake, topic.name, requests, now, options=options)


def median_run(runs: Sequence[Measure]) -> Measure:
    """The run of median time (the upper one of an even count), with the peak memory of all runs."""
    middle = sorted(runs, key=lambda m: m.seconds)[len(runs) // 2]
    return Measure(
        middle.name, middle.seconds, middle.records, middle.input_bytes, max(m.peak_rss_mb for m in runs), middle.detail
    )


def first_compaction(
    spark: SparkSession, lake: Lake, topic: Topic, spec: WorkloadSpec, args: argparse.Namespace, appended: int
) -> tuple[int, str]:
    """The incremental case's set-up: compact the whole log once, then append `appended` records
    over the same keys, later, and roll. Returns the `now` of the second compaction and a line
    about the first."""
    now = spec.start_ms + spec.timestamp_spread_ms + 1
    started = time.perf_counter()
    report = compact_all(spark, lake, topic, now)
    first = f"first compaction {time.perf_counter() - started:.1f} s, {report.totals.records_written:,} records kept"
    more = dataclasses.replace(spec, records=appended, seed=spec.seed + 1, start_ms=now + 1_000)
    for partition, batch in generate(more, args.batch_records):
        topic.partition(partition).append(batch, now_ms=more.start_ms + more.timestamp_spread_ms)
    for log in topic.partition_logs():
        log.roll(now_ms=more.start_ms + more.timestamp_spread_ms)
    return more.start_ms + more.timestamp_spread_ms + 1, first


def run_once(
    args: argparse.Namespace, case: Case, records: int, keys: int, spark: SparkSession, workdir: Path
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
    source = workdir / "lake"
    lake = Lake.open(f"file://{source}")
    started = time.perf_counter()
    topic = build_topic(lake, spec, args.segment_bytes, args.batch_records)
    now = spec.start_ms + spec.timestamp_spread_ms + 1
    setup = ""
    appended = case.appended if args.appended is None else args.appended
    if appended:
        now, setup = first_compaction(spark, lake, topic, spec, args, appended)
    build_s = time.perf_counter() - started
    files = segment_files(lake, topic)
    input_bytes = sum(p.stat().st_size for _, p in files)
    input_records = sum(s.record_count for log in topic.partition_logs() for s in log.manifest().segments)
    runs: dict[str, list[Measure]] = {"a": [], "b": [], "c": [], **({"d": []} if args.iceberg else {})}
    phases: list[dict[str, int]] = []

    def compact(copy: Path, iceberg: bool = False) -> str:
        fresh = Lake.open(tabled(copy) if iceberg else f"file://{copy}")
        report = compact_all(spark, fresh, fresh.topic(topic.name), now, options)
        phases.append(report.phases_ms)
        totals = report.totals
        spent = ", ".join(f"{k} {v / 1000:.1f}s" for k, v in report.phases_ms.items())
        status = "ok" if not report.failed else "FAILED"
        buckets = max((p.key_buckets for p in report.partitions), default=0)
        return (
            f"{status}: {totals.records_written} records kept, recopy {totals.recopy_percent}%, "
            f"{totals.groups_unchanged} groups kept as they were, up to {buckets} key buckets; {spent}"
        )

    options = EngineOptions(dedupe_buffer_size=args.dedupe_buffer_size)
    for i in range(args.runs):
        copy = workdir / f"lake-{i}"
        shutil.copytree(source, copy)  # compaction rewrites its lake: each run gets the same input
        out = workdir / "copy"
        shutil.rmtree(out, ignore_errors=True)
        runs["b"].append(timed("(b) copy floor, pyarrow", input_records, input_bytes, partial(copy_floor, files, out)))
        runs["c"].append(
            timed(
                "(c) DuckDB dedupe",
                input_records,
                input_bytes,
                lambda: duckdb_dedupe(files, workdir / "duckdb.parquet"),
            )
        )
        runs["a"].append(
            timed("(a) lakecleaner compact_topic", input_records, input_bytes, partial(compact, copy), tree=True)
        )
        shutil.rmtree(copy, ignore_errors=True)
        if args.iceberg:
            shutil.copytree(source, copy)
            sync_topic(Lake.open(tabled(copy)), topic.name)  # the tables in step before, as on a live lake
            name = "(d) lakecleaner compact_topic, tables in step"
            runs["d"].append(timed(name, input_records, input_bytes, partial(compact, copy, True), tree=True))
            shutil.rmtree(copy, ignore_errors=True)
    ours, floor, duck = (median_run(runs[k]) for k in "abc")
    median_phases = phases[[m.seconds for m in runs["a"]].index(ours.seconds)]
    result = {
        "case": case.name,
        "records": records,
        "keys": keys,
        "partitions": spec.partitions,
        "appended": appended,
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
    }
    if args.iceberg:
        tables = median_run(runs["d"])
        result["measures"].append(asdict(tables) | {"records_per_s": tables.records_per_s, "mb_per_s": tables.mb_per_s})
        result["d_over_a"] = tables.seconds / ours.seconds
    result["targets"] = targets(case, result, ours, duck)
    return result


#: What keeping the topic's Iceberg tables in step may add to a compaction run (issue 48).
ICEBERG_MAX_COST = 0.10


def tabled(root: Path) -> LakeConfig:
    """A lake at `root` whose topics are Iceberg tables (the embedded catalog in the lake)."""
    return parse_config({"lake": {"uri": f"file://{root}"}, "iceberg": {"enabled": True}}, "<bench>")


def targets(case: Case, result: dict[str, Any], ours: Measure, duck: Measure) -> list[tuple[str, bool]]:
    """Each target of `case` in words, and whether this run met it."""
    found = []
    if case.max_a_over_b is not None:
        found.append((f"a/b <= {case.max_a_over_b}", result["a_over_b"] <= case.max_a_over_b))
    if case.max_a_over_c is not None:
        found.append((f"a/c <= {case.max_a_over_c}", result["a_over_c"] <= case.max_a_over_c))
    if case.memory_within_duckdb:
        found.append(("peak memory of (a) <= (c)", ours.peak_rss_mb <= duck.peak_rss_mb))
    return found


def show(result: dict[str, Any], console: Console) -> None:
    appended = f", then {result['appended']:,} appended" if result["appended"] else ""
    keys = "keys" if result["padded_keys"] else "unpadded keys"
    title = (
        f"{result['case']}: {result['records']:,} records, {result['keys']:,} {keys}, {result['partitions']} "
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
    console.print(
        f"a/b = {result['a_over_b']:.2f}   a/c = {result['a_over_c']:.2f}",
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
    parser.add_argument("--case", default="default", choices=[*CASES, "all"], help="the shape to measure")
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


def main(argv: Sequence[str] | None = None, spark: SparkSession | None = None) -> list[dict[str, Any]]:
    args = parse_args(argv)
    console = Console()
    started = time.perf_counter()
    if args.remote:
        session_ = spark or connect_session(args.remote)
        server = listening_process(args.remote)
        ENGINE_ROOTS.extend([server] if server else [])
    else:
        importlib.import_module("great_expectations")  # the driver runs the gate's validations
        session_ = spark or session(args.master)
    cases = list(CASES.values()) if args.case == "all" else [CASES[args.case]]
    runs: list[tuple[Case, int, int]] = [(c, args.records or c.records, args.keys or c.keys) for c in cases]
    if args.scaling:
        sizes = sorted({(n, n // 10) for n in (1_000_000, 4_000_000, 16_000_000)} | {runs[0][1:]})
        runs = [(runs[0][0], n, k) for n, k in sizes]
    results = []
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="lakecleaner-bench-"))
    try:
        warm_up(session_, base / "warm-up")
        console.print(
            f"start-up (Spark session, Python workers, imports, a 20k-record warm-up compaction): "
            f"{time.perf_counter() - started:.1f} s",
            highlight=False,
        )
        for case, records, keys in runs:
            workdir = base / f"{case.name}-{records}"
            shutil.rmtree(workdir, ignore_errors=True)
            result = run_once(args, case, records, keys, session_, workdir)
            show(result, console)
            results.append(result)
            shutil.rmtree(workdir, ignore_errors=True)
    finally:
        if not args.dir:
            shutil.rmtree(base, ignore_errors=True)
        if spark is None:
            session_.stop()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return results


if __name__ == "__main__":
    main()
    sys.exit(0)
