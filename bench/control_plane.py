"""Benchmark: the control plane (plan, status, retention, listings, the DAG's assessment, the
dashboard, a compaction's commit) at many partitions on an object store far away.

    uv run python bench/control_plane.py                          # 1,000 partitions, 20 ms per request
    uv run python bench/control_plane.py --partitions 5000 --no-compaction
    uv run python bench/control_plane.py --latency-ms 0            # the store itself, no added latency

Starts an S3 server on 127.0.0.1 (SeaweedFS, or with `--server moto` moto's server mode) and, in
front of it, a proxy that holds every request `--latency-ms` before forwarding it, as a bucket in
another zone or region would answer (bench/latency_proxy.py: a TCP proxy on one asyncio loop, so
the simulated network takes little of the machine's CPU); each in a process of its own. Builds,
straight on the server, a topic `big` of `--partitions` partitions (three sealed segments each,
committed offsets of three consumer groups) and `--small-topics` topics of 10 partitions, then
times each command against the proxy, in this process, on a fresh Lake (no cache carries over),
and counts the requests it made:

  plan, status, retain --dry-run, gc --dry-run, topics list, offsets list: the CLI commands on `big`;
  assess: the DAG's first task on `big` (roll idle segments, read offsets, plan);
  dashboard: the overview and `big`'s page, JSON and HTML (the FastAPI app, signed-in user stubbed);
  commit: the commit step of a compaction of every partition of `big` (a Spark run on local[*];
          only its commit phase is the figure; `--no-compaction` skips it).
  retain: `retain --topic big` a day past the default retention.ms, every partition deleting its
          segments with Great Expectations' checks; once, last (it changes the topic);
  gc: then `gc --topic big`, deleting the files retention left pending; once, last.

Before measuring, it waits for the machine to go idle (the S3 server keeps working for a while
after the build). Each command runs `--repeat` times (default 3) and the median is its figure;
the compaction runs once.

Target (issue 17): every figure under 5 s at 1,000 partitions and 20 ms a request. Prints a table
with met / MISSED; `--json FILE` also writes the figures.

    uv run python bench/control_plane.py --topics 1000             # 1,000 topics x 100 partitions

`--topics N` measures another shape instead (bench/lake_of_topics.py, issue 50): the dashboard's
overview of N topics of `--topic-partitions` partitions read from their summaries (target 5 s),
the erasure overview's first page of them (every partition's deadline counted: target 5 s),
again after `--stale-share` of the partitions were committed since (their manifests are read),
and of 10 topics (1,000 partitions: target 1 s), from summaries and from the manifests.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support, when run as a script

from bench.s3_servers import LatencyProxy, S3Server, start_moto, start_seaweedfs
from click.testing import CliRunner
from rich.console import Console
from rich.table import Table

from lakecleaner.cli import cli
from lakecleaner.config import LakeConfig, load_config
from lakecleaner.io.concurrent import map_ordered
from lakecleaner.lake import Lake
from lakecleaner.workload import WorkloadSpec, generate

TARGET_S = 5.0
BIG = "big"
GROUPS = ("billing", "analytics", "audit")
SEGMENTS = 3
RECORDS_PER_SEGMENT = 20
NOW_MS = 1_800_000_000_000


@dataclass(frozen=True)
class Figure:
    name: str
    seconds: float
    requests: int
    detail: str = ""
    #: The figure's target (None: a baseline, with none).
    target_s: float | None = TARGET_S

    @property
    def met(self) -> bool:
        return self.target_s is None or self.seconds < self.target_s

    @property
    def verdict(self) -> str:
        if self.target_s is None:
            return "baseline"
        return f"{'met' if self.met else 'MISSED'} (< {self.target_s:g} s)"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--partitions", type=int, default=1000, help="partitions of the big topic")
    parser.add_argument("--small-topics", type=int, default=100, help="topics of 10 partitions beside it")
    parser.add_argument("--latency-ms", type=float, default=20.0, help="added to every request")
    parser.add_argument(
        "--server",
        choices=["seaweedfs", "moto"],
        default="seaweedfs",
        help="the S3 server: SeaweedFS (the real object store the tests use), or moto's server mode (Python)",
    )
    parser.add_argument("--no-compaction", action="store_true", help="skip the compaction (its commit step)")
    parser.add_argument("--dir", help="work directory (default: a temporary one)")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each command; the median is the figure")
    parser.add_argument(
        "--topics",
        type=int,
        help="the overview of a lake of this many topics read from their summaries (issue 50), instead of the above",
    )
    parser.add_argument("--idle-wait-s", type=float, default=180.0, help="longest wait for the machine to go idle")
    parser.add_argument("--topic-partitions", type=int, default=100, help="partitions of each topic, with --topics")
    parser.add_argument(
        "--stale-share",
        type=float,
        default=0.01,
        help="share of partitions committed since, with --topics",
    )
    return parser.parse_args(argv)


def write_config(path: Path, server: S3Server, endpoint: str, partitions: int, small_topics: int) -> Path:
    """A lakecleaner.yaml on the bucket through `endpoint`, declaring every topic (the DAGs and the
    dashboard's overview are built from the config's topics)."""
    topics: dict[str, Any] = {
        BIG: {"partitions": partitions, "config": {"cleanup.policy": "compact,delete"}, "consumer_groups": list(GROUPS)}
    }
    topics |= {f"small-{i:03d}": {"partitions": 10} for i in range(small_topics)}
    config = {
        "lake": {
            "uri": f"s3://{server.bucket}/lake",
            "storage": {
                "endpoint_url": endpoint,
                "region": "us-east-1",
                "access_key_id": server.access_key,
                "secret_access_key": server.secret_key,
            },
        },
        "topics": topics,
    }
    path.write_text(json.dumps(config))  # JSON is YAML
    return path


def build_lake(config: LakeConfig, partitions: int, small_topics: int) -> None:
    """The big topic (every partition: SEGMENTS sealed segments), the small topics (one segment
    per partition), and the groups' committed offsets on the big topic; written concurrently."""
    lake = Lake.open(config)
    big = lake.create_topic(BIG, partitions=partitions, config={"cleanup.policy": "compact,delete"})
    spec = WorkloadSpec(keys=10, records=SEGMENTS * RECORDS_PER_SEGMENT, partitions=1, value_size=20, seed=1)
    batches = [batch for _, batch in generate(spec, RECORDS_PER_SEGMENT)]

    def fill(partition: int) -> None:
        log = big.partition(partition)
        for batch in batches:
            log.append(batch, now_ms=NOW_MS - 3_600_000)
            log.roll(now_ms=NOW_MS - 3_600_000)

    map_ordered(fill, range(partitions), 64)
    for i, group in enumerate(GROUPS):
        lake.offsets.commit(group, BIG, {p: RECORDS_PER_SEGMENT * (i + 1) for p in range(partitions)}, now_ms=NOW_MS)

    def small(index: int) -> None:
        topic = lake.create_topic(f"small-{index:03d}", partitions=10)
        for p in range(10):
            topic.partition(p).append(batches[0], now_ms=NOW_MS - 3_600_000)

    map_ordered(small, range(small_topics), 64)


def timed(proxy: LatencyProxy, name: str, action: Callable[[], str], repeat: int = 1) -> Figure:
    """The median of `repeat` runs of `action`, with the requests of one run."""
    runs = []
    for _ in range(repeat):
        before = proxy.requests
        start = time.perf_counter()
        detail = action()
        runs.append((time.perf_counter() - start, proxy.requests - before, detail))
    seconds, requests, detail = sorted(runs)[len(runs) // 2]
    every = ", ".join(f"{r[0]:.2f}" for r in runs)
    return Figure(name, seconds, requests, f"{detail}; runs {every} s" if repeat > 1 else detail)


def wait_until_idle(console: Console, limit_s: float = 180.0) -> None:
    """Wait until the machine's CPUs are at least 80% idle over two seconds (the S3 server goes on
    working for a while after the build: a measurement must not share the cores with that)."""

    def busy_and_total() -> tuple[int, int]:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        return sum(fields) - fields[3] - fields[4], sum(fields)  # all but idle and iowait

    if not Path("/proc/stat").exists():
        return
    started = time.monotonic()
    while time.monotonic() - started < limit_s:
        busy0, total0 = busy_and_total()
        time.sleep(2)
        busy1, total1 = busy_and_total()
        if (busy1 - busy0) <= 0.2 * max(total1 - total0, 1):
            break
    console.print(f"waited {time.monotonic() - started:.0f} s for the machine to go idle", highlight=False)


def invoke_cli(config_file: Path, *args: str) -> str:
    """`lakecleaner --json ARGS` in this process: its output; an exit status but 0 raises."""
    result = CliRunner().invoke(cli, ["--config", str(config_file), "--json", *args], catch_exceptions=False)
    if result.exit_code != 0:
        raise RuntimeError(f"lakecleaner {' '.join(args)} exited {result.exit_code}: {result.output[-2000:]}")
    return result.output


def cli_action(config_file: Path, *args: str) -> Callable[[], str]:
    return lambda: f"{len(invoke_cli(config_file, *args)):,} bytes of JSON"


def assess_action(config_file: Path) -> Callable[[], str]:
    from lakecleaner.orchestration import tasks

    def run() -> str:
        result = tasks.assess(load_config(str(config_file)), BIG, NOW_MS, {})
        return f"{len(result['selected'])} partitions selected, {len(result['rolled'])} rolled"

    return run


def dashboard_client(config_file: Path) -> Any:
    """The dashboard app with a signed-in user who may read everything, and no Airflow runs."""
    from fastapi.testclient import TestClient

    from lakecleaner.dashboard.app import Backend, create_app

    class Everyone:
        def can_read(self, user: Any, dag_id: str | None) -> bool:
            return True

        def can_trigger(self, user: Any, dag_id: str) -> bool:
            return False

    backend = Backend(
        current_user=lambda: "bench",
        access=Everyone(),
        dag_runs=lambda dag_id, limit: [],
        open_lake=lambda: Lake.open(load_config(str(config_file))),
    )
    return TestClient(create_app(backend))


def dashboard_action(client: Any, path: str) -> Callable[[], str]:
    def run() -> str:
        response = client.get(path, params={"now": str(NOW_MS)})
        if response.status_code != 200:
            raise RuntimeError(f"GET {path}: {response.status_code} {response.text[:500]}")
        return f"{len(response.content):,} bytes"

    return run


def compaction_commit(config_file: Path) -> Figure:
    """Compact every partition of the big topic on local[*]; the figure is the commit phase."""
    from lakecleaner.engine import compact_topic, requests_for
    from lakecleaner.engine.session import build_session

    config = load_config(str(config_file))
    lake = Lake.open(config)
    topic = lake.topic(BIG)
    manifests = topic.read_manifests().manifests
    requests = [r for m in manifests.values() if (r := requests_for(m, topic.config, NOW_MS))]
    spark = build_session(config.spark, "lakecleaner-bench-control-plane")
    try:
        report = compact_topic(spark, lake, BIG, requests, NOW_MS)
    finally:
        spark.stop()
    committed = report.statuses.get("committed", 0)
    whole = report.duration_ms / 1000
    return Figure(
        "commit step of a compaction of every partition",
        report.phases_ms.get("commit", 0) / 1000,
        0,
        f"{committed} partitions committed; the whole run {whole:.1f} s ({report.phases_ms})",
    )


def retention_run(proxy: LatencyProxy, config_file: Path) -> Figure:
    """`retain --topic big` a day past the default retention.ms (7 days): every partition deletes
    its sealed segments, each result checked by Great Expectations before its commit. Runs once,
    last (it changes the topic). GX is imported and warmed first, as a process pays that once, and
    its time is in the detail."""
    from lakecleaner.quality import warm_up

    started = time.perf_counter()
    warm_up()
    imported = time.perf_counter() - started
    at = str(NOW_MS + 8 * 24 * 3_600_000)

    def run() -> str:
        report = json.loads(invoke_cli(config_file, "retain", "--topic", BIG, "--now", at))
        committed = sum(p["status"] == "committed" for p in report["partitions"])
        return f"{committed} partitions committed, {report['segments_deleted']} segments deleted"

    figure = timed(proxy, "retain --topic big (deleting; GX checks)", run)
    return replace(figure, detail=f"{figure.detail}; GX's import and warm-up before it: {imported:.1f} s")


def gc_run(proxy: LatencyProxy, config_file: Path) -> Figure:
    """`gc --topic big` after `retention_run`, past file.delete.delay.ms: every partition deletes
    the files retention left pending and commits its manifest. Runs once, last."""
    at = str(NOW_MS + 9 * 24 * 3_600_000)

    def run() -> str:
        report = json.loads(invoke_cli(config_file, "gc", "--topic", BIG, "--now", at))
        return f"{report['files_deleted']} files deleted, {report['partitions_failed']} partitions failed"

    return timed(proxy, "gc --topic big (deleting)", run)


def main(argv: Sequence[str] | None = None, given_server: S3Server | None = None) -> list[Figure]:
    """The figures; `given_server` (a running S3 server, e.g. the tests') is used instead of starting one."""
    args = parse_args(argv)
    console = Console()
    work = Path(args.dir or f"/tmp/lakecleaner-bench-cp-{uuid.uuid4().hex[:8]}")
    work.mkdir(parents=True, exist_ok=True)
    if given_server is None:
        server = start_seaweedfs(work) if args.server == "seaweedfs" else start_moto()
    else:
        server = replace(given_server, stop=lambda: None)
    try:
        shape = topics_figures if args.topics else partitions_figures
        figures = shape(args, console, work, server)
    finally:
        server.stop()
    print_table(console, args, figures)
    if args.json:
        Path(args.json).write_text(json.dumps([f.__dict__ for f in figures], indent=1))
    return figures


def partitions_figures(args: argparse.Namespace, console: Console, work: Path, server: S3Server) -> list[Figure]:
    """The default shape: the big topic and the small topics, every command timed."""
    figures: list[Figure] = []
    started = time.perf_counter()
    direct = write_config(work / "direct.yaml", server, server.url, args.partitions, args.small_topics)
    build_lake(load_config(str(direct)), args.partitions, args.small_topics)
    console.print(
        f"built {BIG} ({args.partitions} partitions x {SEGMENTS} segments, {len(GROUPS)} groups) and "
        f"{args.small_topics} topics x 10 partitions in {time.perf_counter() - started:.0f} s",
        highlight=False,
    )
    wait_until_idle(console, args.idle_wait_s)
    proxy = LatencyProxy(server.url, args.latency_ms)
    try:
        config_file = write_config(work / "lakecleaner.yaml", server, proxy.url, args.partitions, args.small_topics)
        client = dashboard_client(config_file)
        steps: list[tuple[str, Callable[[], str]]] = [
            ("topics list", cli_action(config_file, "topics", "list")),
            ("plan --topic big", cli_action(config_file, "plan", "--topic", BIG, "--now", str(NOW_MS))),
            ("status --topic big", cli_action(config_file, "status", "--topic", BIG)),
            (
                "retain --topic big --dry-run",
                cli_action(config_file, "retain", "--topic", BIG, "--dry-run", "--now", str(NOW_MS)),
            ),
            ("offsets list --topic big", cli_action(config_file, "offsets", "list", "--topic", BIG)),
            (
                "gc --topic big --dry-run",
                cli_action(config_file, "gc", "--topic", BIG, "--dry-run", "--now", str(NOW_MS)),
            ),
            ("DAG assess (roll idle + plan)", assess_action(config_file)),
            ("dashboard overview, JSON", dashboard_action(client, "/api/topics")),
            ("dashboard overview, HTML", dashboard_action(client, "/")),
            ("dashboard topic page, JSON", dashboard_action(client, f"/api/topics/{BIG}")),
            ("dashboard topic page, HTML", dashboard_action(client, f"/topics/{BIG}")),
        ]
        for name, action in steps:
            figures.append(timed(proxy, name, action, args.repeat))
            show_last(console, figures[-1])
        if not args.no_compaction:
            before = proxy.requests
            figure = compaction_commit(config_file)
            requests = proxy.requests - before
            figures.append(Figure(figure.name, figure.seconds, requests, figure.detail + " (requests: whole run)"))
            show_last(console, figures[-1])
        figures.append(retention_run(proxy, config_file))
        show_last(console, figures[-1])
        figures.append(gc_run(proxy, config_file))
        show_last(console, figures[-1])
    finally:
        proxy.close()
    return figures


def topics_figures(args: argparse.Namespace, console: Console, work: Path, server: S3Server) -> list[Figure]:
    """The `--topics` shape (bench/lake_of_topics.py): the overview of `--topics` topics from their
    summaries (target 5 s) and their erasure deadlines (`/api/erasure`, target 5 s), then with
    `--stale-share` of the partitions committed since (their manifests read instead: no target, it
    shows what staleness costs), and the overview of 10 topics (1,000 partitions at 100 each:
    target 1 s) from summaries and, as the baseline, from the manifests."""
    from bench import lake_of_topics as shape

    per = args.topic_partitions
    big = [f"t-{i:05d}" for i in range(args.topics)]
    small = [f"ten-{i:02d}" for i in range(shape.SMALL_TOPICS)]
    started = time.perf_counter()
    run = uuid.uuid4().hex[:8]  # the lakes' prefixes in the bucket, fresh each run
    big_lake, small_lake = f"{shape.BIG_LAKE}-{run}", f"{shape.SMALL_LAKE}-{run}"
    direct_big = shape.write_config(work / "direct-big.yaml", server, server.url, big_lake, big, per)
    direct_small = shape.write_config(work / "direct-small.yaml", server, server.url, small_lake, small, per)
    written = shape.build(shape.lake_config(direct_big), big, per, NOW_MS, summaries=True)
    written += shape.build(shape.lake_config(direct_small), small, per, NOW_MS, summaries=True)
    console.print(
        f"built {len(big)} topics x {per} partitions and {len(small)} x {per} ({written:,} objects) "
        f"in {time.perf_counter() - started:.0f} s",
        highlight=False,
    )
    wait_until_idle(console, args.idle_wait_s)
    figures: list[Figure] = []
    proxy = LatencyProxy(server.url, args.latency_ms)
    try:
        config_big = shape.write_config(work / "big.yaml", server, proxy.url, big_lake, big, per)
        config_small = shape.write_config(work / "small.yaml", server, proxy.url, small_lake, small, per)
        client_big, client_small = dashboard_client(config_big), dashboard_client(config_small)
        whole = f"{len(big):,} topics x {per}"
        steps: list[tuple[str, Callable[[], str], float]] = [
            (f"overview JSON, {whole} (summaries)", shape.overview_check(client_big, NOW_MS, len(big), 0), TARGET_S),
            (f"overview HTML, {whole} (summaries)", dashboard_action(client_big, "/"), TARGET_S),
            (
                f"erasure deadlines JSON, {whole} (summaries)",
                shape.erasure_check(client_big, NOW_MS, len(big) * per),
                TARGET_S,
            ),
        ]
        for name, action, target in steps:
            figures.append(replace(timed(proxy, name, action, args.repeat), target_s=target))
            show_last(console, figures[-1])
        stale = shape.mark_committed(shape.lake_config(direct_big), big, per, args.stale_share, NOW_MS)
        name = f"overview JSON, {whole}, {stale:,} partitions committed since"
        check = shape.overview_check(client_big, NOW_MS, len(big), stale)
        figures.append(replace(timed(proxy, name, check, args.repeat), target_s=None))  # what staleness costs
        show_last(console, figures[-1])
        ten = f"{len(small)} topics x {per}"
        check = shape.overview_check(client_small, NOW_MS, len(small), 0)
        figures.append(replace(timed(proxy, f"overview JSON, {ten} (summaries)", check, args.repeat), target_s=1.0))
        show_last(console, figures[-1])
        shape.drop_summaries(shape.lake_config(direct_small), small)
        check = shape.overview_check(client_small, NOW_MS, len(small), len(small) * per)
        figures.append(
            replace(timed(proxy, f"overview JSON, {ten} (manifests: baseline)", check, args.repeat), target_s=None)
        )
        show_last(console, figures[-1])
    finally:
        proxy.close()
    return figures


def show_last(console: Console, figure: Figure) -> None:
    console.print(f"  {figure.name}: {figure.seconds:.2f} s, {figure.requests} requests", highlight=False)


def print_table(console: Console, args: argparse.Namespace, figures: list[Figure]) -> None:
    shape = (
        f"{args.topics} topics x {args.topic_partitions}"
        if args.topics
        else f"{args.partitions} partitions + {args.small_topics} topics x 10"
    )
    table = Table(title=f"{shape} on {args.server}, {args.latency_ms:g} ms a request")
    for column in ("command", "seconds", "requests", "target", "detail"):
        table.add_column(column)
    for f in figures:
        table.add_row(f.name, f"{f.seconds:.2f}", str(f.requests), f.verdict, f.detail)
    console.print(table)


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    main()
