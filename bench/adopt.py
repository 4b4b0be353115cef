"""Adoption throughput: `lakecleaner adopt connect` against pyarrow reading the sink's files and writing Parquet.

    uv run python bench/adopt.py                       # 200 sink files of 5,000 Debezium records, 4 partitions
    uv run python bench/adopt.py --files 40 --runs 1
    uv run python bench/adopt.py --format parquet      # the sink's ParquetFormat (or avro: AvroFormat)

The source is a local folder laid out as Kafka Connect's S3 sink writes it (`partition=<p>/<topic>+<p>+
<start offset>.<ext>`, no key sidecars): Debezium change events (`before`, `after`, `op`, `ts_ms`), one
in ten a delete (`after` null, `op` d); JSON as `JsonConverter` without schemas writes it. The floor reads
every file with pyarrow (`pyarrow.json.read_json`, `pyarrow.parquet.read_table`; Avro: fastavro's reader
into a pyarrow table, as pyarrow has no Avro reader) and writes one zstd Parquet file per partition, as
a user would convert the archive by hand; lakecleaner's run is `adopt_connect` with `--key-field after.id`
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
    parser.add_argument("--format", choices=("json", "parquet", "avro"), default="json", help="the sink's format")
    return parser.parse_args(argv)


_ROW = pa.struct([("id", pa.int64()), ("email", pa.string()), ("name", pa.string()), ("tier", pa.int64())])
_EVENT = pa.schema([("before", _ROW), ("after", _ROW), ("op", pa.string()), ("ts_ms", pa.int64())])
_EXTENSIONS = {"json": "json", "parquet": "snappy.parquet", "avro": "avro"}


def _avro_schema() -> dict[str, object]:
    row = {
        "type": "record",
        "name": "Value",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "email", "type": "string"},
            {"name": "name", "type": "string"},
            {"name": "tier", "type": "long"},
        ],
    }
    return {
        "type": "record",
        "name": "Envelope",
        "fields": [
            {"name": "before", "type": ["null", row], "default": None},
            {"name": "after", "type": ["null", "Value"], "default": None},
            {"name": "op", "type": "string"},
            {"name": "ts_ms", "type": "long"},
        ],
    }


def _write_file(target: Path, events: list[dict[str, object]], file_format: str) -> None:
    """One sink file of `events`, as the S3 sink's format writes it."""
    if file_format == "json":
        target.write_text("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in events))
    elif file_format == "parquet":
        pq.write_table(pa.Table.from_pylist(events, schema=_EVENT), target, compression="snappy")
    else:
        import fastavro

        with target.open("wb") as out:
            fastavro.writer(out, fastavro.parse_schema(_avro_schema()), events, codec="deflate")


def write_archive(folder: Path, files: int, per_file: int, keys: int, file_format: str = "json") -> int:
    """The sink's files of Debezium events; the record count."""
    rng = random.Random(7)
    next_offset = [0] * PARTITIONS
    for n in range(files):
        p = n % PARTITIONS
        start = next_offset[p]
        events = []
        for offset in range(start, start + per_file):
            key = rng.randrange(keys)
            row = {"id": key, "email": f"c{key}-{offset}@example.com", "name": "customer", "tier": offset % 5}
            if offset % 10 == 9:
                event = {"before": row, "after": None, "op": "d", "ts_ms": 1_790_000_000_000 + offset}
            else:
                event = {"before": None, "after": row, "op": "u", "ts_ms": 1_790_000_000_000 + offset}
            events.append(event)
        target = folder / f"partition={p}" / f"{TOPIC}+{p}+{start:010d}.{_EXTENSIONS[file_format]}"
        target.parent.mkdir(parents=True, exist_ok=True)
        _write_file(target, events, file_format)
        next_offset[p] += per_file
    return files * per_file


def _read(path: Path) -> pa.Table:
    """A sink file as a table, by the fastest reader its format has."""
    if path.suffix == ".json":
        return pj.read_json(path)
    if path.suffix == ".parquet":
        return pq.read_table(path)
    import fastavro

    with path.open("rb") as data:
        return pa.Table.from_pylist(list(fastavro.reader(data)), schema=_EVENT)


def floor(source: Path, out: Path) -> int:
    """Every file read by pyarrow (`_read`), one zstd Parquet file written per partition."""
    count = 0
    for p in range(PARTITIONS):
        tables = [_read(f) for f in sorted((source / f"partition={p}").iterdir())]
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
        total = write_archive(source, args.files, args.records_per_file, args.keys, args.format)
        shape = f"{args.records_per_file:,} Debezium records ({total:,}) over {PARTITIONS} partitions"
        print(f"{args.files} {args.format} sink files of {shape}")
        warm = root / "warm" / TOPIC
        write_archive(warm, PARTITIONS, 100, args.keys, args.format)
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
    reader = {"json": "pyarrow.json", "parquet": "pyarrow.parquet", "avro": "fastavro into pyarrow"}[args.format]
    print(f"| floor: {reader} + one zstd Parquet file a partition | {floor_s:.2f} | {total / floor_s:,.0f} |")
    print(f"| lakecleaner adopt connect | {adopt_s:.2f} | {total / adopt_s:,.0f} |")
    print()
    print(f"adopt / floor records/s: {ratio:.2f} (target ≥ 0.8: {'met' if ratio >= 0.8 else 'MISSED'})")
    return ratio


if __name__ == "__main__":
    main()
