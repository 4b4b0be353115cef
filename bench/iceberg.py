"""What a commit costs with the topic's Iceberg tables following it, against the same commit without.

    uv run python bench/iceberg.py                     # 10k, 100k and 1M live keys; 500 commits at 10k
    uv run python bench/iceberg.py --keys 10000 --commits 100 --runs 3

A compacted topic of one partition holds `keys` live keys (one record each, compacted), in two local
lakes built alike: one with the tables on (`iceberg: {enabled: true}`, the log table and the
latest-values table follow each commit), one without. Each run appends 1,000 records updating keys
spread over the key space, in both lakes by turns, and measures the append's seconds and the bytes
it wrote: the segment file (the batch) and, with tables on, the files of the `_latest` sync and of
the log table's metadata. The baseline is the same append with tables off, measured in the same run.
Then, at the smallest key count, `commits` appends of 1,000 records in a row with tables on, and the
time of the first against that of the last (medians of the ten around each). Issue 80's targets:
the append with tables on at the largest key count costs at most 2x the same at the smallest, the
`_latest` sync writes at most 3x the batch's bytes at the largest, and the last of the commits in a
row costs at most 1.5x the first.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
from rich.console import Console
from rich.table import Table

from lakecleaner.clock import wall_clock_ms
from lakecleaner.config import parse_config
from lakecleaner.extras import open_lake
from lakecleaner.iceberg.follow import sync_topic
from lakecleaner.lake import Lake

TOPIC = "customers"
BATCH = 1_000
#: Each record's value: 100 random bytes (incompressible, as the issue's measurement had them).
VALUE_BYTES = 100


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--keys", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--runs", type=int, default=5, help="appends measured at each key count; the median")
    parser.add_argument("--commits", type=int, default=500, help="appends in a row at the smallest key count")
    return parser.parse_args(argv)


def values(count: int, seed: int) -> pa.Array:
    """`count` values of `VALUE_BYTES` random bytes."""
    raw = np.random.default_rng(seed).bytes(count * VALUE_BYTES)
    fixed = pa.FixedSizeBinaryArray.from_buffers(pa.binary(VALUE_BYTES), count, [None, pa.py_buffer(raw)])
    return fixed.cast(pa.binary())


def records(ids: Sequence[int], seed: int) -> pa.Table:
    return pa.table(
        {
            "key": [f"key-{i:08d}".encode() for i in ids],
            "value": values(len(ids), seed),
            "timestamp": pa.array([wall_clock_ms()] * len(ids), pa.int64()),
        }
    )


def batch(keys: int, seed: int) -> pa.Table:
    """1,000 updates of keys spread over the key space (a prime stride), all present already."""
    return records([(seed * BATCH + i) * 7919 % keys for i in range(BATCH)], seed + 1)


def built(root: Path, keys: int, tables: bool) -> Lake:
    """A lake at `root` whose topic holds `keys` live keys, compacted-alike (one record each),
    with its tables made when `tables`."""
    config = {"lake": {"uri": f"file://{root}"}, "iceberg": {"enabled": tables}}
    lake = open_lake(parse_config(config, "<bench>"))
    lake.create_topic(TOPIC, 1, {"cleanup.policy": "compact"})
    every = records(range(keys), 0)
    plain = Lake.open(parse_config(config, "<bench>"))  # no follower: one sync after, not one per batch
    for start in range(0, keys, 250_000):
        plain.topic(TOPIC).partition(0).append(every.slice(start, 250_000))
    if tables:
        sync_topic(lake, TOPIC)
    return lake


def files(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}


@dataclass(frozen=True)
class Commit:
    seconds: float
    batch_bytes: int
    latest_bytes: int
    other_bytes: int


def committed(lake: Lake, root: Path, keys: int, seed: int) -> Commit:
    """One 1,000-record append, timed, with the bytes of the files it left (new or rewritten)."""
    before = files(root)
    start = time.perf_counter()
    lake.topic(TOPIC).partition(0).append(batch(keys, seed))
    seconds = time.perf_counter() - start
    new = {path: size for path, size in files(root).items() if before.get(path) != size}
    segment = sum(size for path, size in new.items() if "/segments/" in path)
    latest = sum(size for path, size in new.items() if "/latest/" in path)
    return Commit(seconds, segment, latest, sum(new.values()) - segment - latest)


def measured(keys: int, runs: int, scratch: Path) -> dict[str, list[Commit]]:
    """`runs` appends with tables off and on, by turns, on lakes of `keys` live keys."""
    lakes = {kind: built(scratch / f"{kind}-{keys}", keys, kind == "on") for kind in ("off", "on")}
    out: dict[str, list[Commit]] = {"off": [], "on": []}
    for run in range(runs + 1):  # the first of each is a warm-up (imports, catalog)
        for kind in ("off", "on") if run % 2 else ("on", "off"):
            done = committed(lakes[kind], scratch / f"{kind}-{keys}", keys, run)
            if run:
                out[kind].append(done)
    return out


def in_a_row(keys: int, commits: int, scratch: Path) -> list[float]:
    """Seconds of each of `commits` appends in a row with tables on."""
    lake = built(scratch / f"row-{keys}", keys, True)
    log = lake.topic(TOPIC).partition(0)
    seconds = []
    for seed in range(commits):
        start = time.perf_counter()
        log.append(batch(keys, seed))
        seconds.append(time.perf_counter() - start)
    return seconds


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def main(argv: Sequence[str] | None = None) -> dict[str, object]:
    """Run and print the bench; returns its figures (per key count, the commits in a row, the targets)."""
    args = parse_args(argv)
    console = Console()
    shown = Table(
        "live keys",
        "append, tables off (s)",
        "tables on (s)",
        "on / off",
        "batch bytes",
        "_latest bytes",
        "other bytes",
    )
    on_seconds: dict[int, float] = {}
    latest_ratio: dict[int, float] = {}
    figures: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-iceberg-") as scratch:
        for keys in args.keys:
            runs = measured(keys, args.runs, Path(scratch))
            off, on = median([c.seconds for c in runs["off"]]), median([c.seconds for c in runs["on"]])
            batch_bytes = int(median([c.batch_bytes for c in runs["on"]]))
            latest = int(median([c.latest_bytes for c in runs["on"]]))
            other = int(median([c.other_bytes for c in runs["on"]]))
            on_seconds[keys], latest_ratio[keys] = on, latest / max(batch_bytes, 1)
            figures[keys] = {"off_s": off, "on_s": on, "batch_bytes": batch_bytes, "latest_bytes": latest}
            shown.add_row(
                f"{keys:,}",
                f"{off:.3f}",
                f"{on:.3f}",
                f"{on / off:.1f}",
                f"{batch_bytes:,}",
                f"{latest:,}",
                f"{other:,}",
            )
        console.print(shown)
        smallest, largest = min(args.keys), max(args.keys)
        row = in_a_row(smallest, args.commits, Path(scratch))
    first, last = median(row[:10]), median(row[-10:])
    console.print(
        f"{args.commits} commits in a row at {smallest:,} keys: the first {first:.3f} s, the last {last:.3f} s "
        f"({last / first:.2f}x; medians of ten)"
    )
    targets = [
        (
            f"append with tables on at {largest:,} keys <= 2x at {smallest:,}",
            on_seconds[largest] <= 2 * on_seconds[smallest],
            on_seconds[largest] / on_seconds[smallest],
        ),
        (
            f"_latest sync bytes <= 3x the batch's at {largest:,} keys",
            latest_ratio[largest] <= 3,
            latest_ratio[largest],
        ),
        (f"commit {args.commits} <= 1.5x commit 1", last <= 1.5 * first, last / first),
    ]
    for name, met, value in targets:
        console.print(f"target {name}: {'met' if met else 'MISSED'} ({value:.2f}x)")
    return {"keys": figures, "in_a_row": row, "targets": {name: met for name, met, _ in targets}}


if __name__ == "__main__":
    main()
