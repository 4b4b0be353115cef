"""Adoption throughput: `lakecleaner adopt connect` against pyarrow's JSON reader writing Parquet.

    uv run python bench/adopt.py                       # 200 sink files of 5,000 Debezium records, 4 partitions
    uv run python bench/adopt.py --files 40 --runs 1

The source is a local folder laid out as Kafka Connect's S3 sink writes JSON (`JsonConverter`
without schemas, `partition=<p>/<topic>+<p>+<start offset>.json`, no key sidecars): Debezium change
events (`before`, `after`, `op`, `ts_ms`), one in ten a delete (`after` null, `op` d). The floor reads
every file with `pyarrow.json.read_json` and writes one zstd Parquet file per partition, as a user
would convert the archive by hand; lakecleaner's run is `adopt_connect` with `--key-field after.id`
and `--timestamp-field ts_ms` into a fresh local lake (offsets, keys of deletes from `before`,
tombstones, commits). A small archive is taken by both first (the one-time imports); the runs
alternate which goes first. Target: lakecleaner's records/s ≥ 0.8 × the floor's.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import pyarrow as pa
import pyarrow.json as pj
import pyarrow.parquet as pq

from lakecleaner.adopt.connect import adopt_connect
from lakecleaner.config import parse_config
from lakecleaner.config.adopt import ConnectSource
from lakecleaner.lake import Lake

TOPIC = "customers"
PARTITIONS = 4


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--records-per-file", type=int, default=5000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3, help="runs of each; the median is reported")
    return parser.parse_args(argv)


def write_archive(folder: Path, files: int, per_file: int, keys: int) -> int:
    """The sink's JSON files of Debezium events; the record count."""
    rng = random.Random(7)
    next_offset = [0] * PARTITIONS
    for n in range(files):
        p = n % PARTITIONS
        start = next_offset[p]
        lines = []
        for offset in range(start, start + per_file):
            key = rng.randrange(keys)
            row = {"id": key, "email": f"c{key}-{offset}@example.com", "name": "customer", "tier": offset % 5}
            if offset % 10 == 9:
                event = {"before": row, "after": None, "op": "d", "ts_ms": 1_790_000_000_000 + offset}
            else:
                event = {"before": None, "after": row, "op": "u", "ts_ms": 1_790_000_000_000 + offset}
            lines.append(json.dumps(event, separators=(",", ":")))
        target = folder / f"partition={p}" / f"{TOPIC}+{p}+{start:010d}.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("\n".join(lines) + "\n")
        next_offset[p] += per_file
    return files * per_file


def floor(source: Path, out: Path) -> int:
    """Every file read by pyarrow's JSON reader, one zstd Parquet file written per partition."""
    count = 0
    for p in range(PARTITIONS):
        tables = [pj.read_json(f) for f in sorted((source / f"partition={p}").glob("*.json"))]
        table = pa.concat_tables(tables, promote_options="default")
        pq.write_table(table, out / f"{p}.parquet", compression="zstd")
        count += table.num_rows
    return count


def adopted(source: Path, lake_dir: Path) -> int:
    lake = Lake.open(
        parse_config(
            {"lake": {"uri": f"file://{lake_dir}"}, "topics": {TOPIC: {"config": {"cleanup.policy": "compact"}}}}
        )
    )
    spec = ConnectSource(f"file://{source}", key_field="after.id", timestamp_field="ts_ms", settle_ms=0)
    report = adopt_connect(lake, TOPIC, spec)
    assert not report.failures, report.failures
    return sum(a.records for a in report.partitions.values())


def timed(run: Callable[[], int]) -> tuple[float, int]:
    start = time.perf_counter()
    records = run()
    return time.perf_counter() - start, records


def main(argv: Sequence[str] | None = None) -> float:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        source = root / "sink" / TOPIC
        total = write_archive(source, args.files, args.records_per_file, args.keys)
        shape = f"{args.records_per_file:,} Debezium records ({total:,}) over {PARTITIONS} partitions"
        print(f"{args.files} sink files of {shape}")
        warm = root / "warm" / TOPIC
        write_archive(warm, PARTITIONS, 100, args.keys)
        (root / "warm-floor").mkdir()
        floor(warm, root / "warm-floor")  # the one-time imports (pyarrow's of pandas) of both
        adopted(warm, root / "warm-lake")
        floors, mirrors = [], []
        for run in range(args.runs):
            out = root / f"floor-{run}"
            out.mkdir()
            readers = [
                ("floor", partial(floor, source, out)),
                ("adopt", partial(adopted, source, root / f"lake-{run}")),
            ]
            for name, reader in readers if run % 2 == 0 else reversed(readers):
                seconds, records = timed(reader)
                assert records == total, (name, records, total)
                (floors if name == "floor" else mirrors).append(seconds)
            print(f"run {run + 1}: floor {floors[-1]:.2f} s, adopt {mirrors[-1]:.2f} s")
    floor_s, adopt_s = statistics.median(floors), statistics.median(mirrors)
    ratio = floor_s / adopt_s
    print()
    print("| run | seconds (median) | records/s |")
    print("|---|---:|---:|")
    print(f"| floor: pyarrow.json + one zstd Parquet file a partition | {floor_s:.2f} | {total / floor_s:,.0f} |")
    print(f"| lakecleaner adopt connect | {adopt_s:.2f} | {total / adopt_s:,.0f} |")
    print()
    print(f"adopt / floor records/s: {ratio:.2f} (target ≥ 0.8: {'met' if ratio >= 0.8 else 'MISSED'})")
    return ratio


if __name__ == "__main__":
    main()
