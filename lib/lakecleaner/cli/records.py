"""`lakecleaner produce` and `consume`: records as JSON lines in and out."""

from __future__ import annotations

import base64
import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from typing import IO, Any

import click
import pyarrow as pa

from lakecleaner.cli.base import Context, cli, decode_base64, pass_ctx
from lakecleaner.cli.output import console, err_console, progress_bar
from lakecleaner.clock import parse_time_ms, wall_clock_ms
from lakecleaner.config import (
    LONG_MAX,
    did_you_mean,
)
from lakecleaner.errors import InvalidRecord
from lakecleaner.log.partition import PartitionLog
from lakecleaner.log.records import BATCH_SCHEMA, HEADER_TYPE
from lakecleaner.workload import WorkloadSpec, generate, kafka_partition


def _decode(value: object, binary: bool, what: str, line_no: int) -> bytes | None:
    if value is None:
        return None
    if not isinstance(value, str):
        value = json.dumps(value)
    return decode_base64(value, f"line {line_no}: {what}") if binary else value.encode()


#: The fields of a record in `produce`'s JSON lines.
RECORD_FIELDS = ("key", "value", "timestamp", "headers", "partition", "offset")


def _json_lines(
    stream: IO[str], binary: bool, partitions: int, fixed: int | None
) -> Iterator[tuple[int, dict[str, Any]]]:
    for line_no, line in enumerate(stream, 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidRecord(f"line {line_no}: not valid JSON: {exc}") from None
        if not isinstance(raw, dict):
            raise InvalidRecord(f"line {line_no}: expected an object with key, value, timestamp, headers")
        unknown = sorted(set(raw) - set(RECORD_FIELDS))
        if unknown:  # a misspelt "value" would store a null value: a tombstone on a compacted topic
            raise InvalidRecord(
                f"line {line_no}: unknown field '{unknown[0]}'{did_you_mean(unknown[0], list(RECORD_FIELDS))}; "
                f"a record has the fields {', '.join(RECORD_FIELDS)}; nothing was written"
            )
        key = _decode(raw.get("key"), binary, "key", line_no)
        headers = raw.get("headers") or []
        if isinstance(headers, dict):
            headers = list(headers.items())
        if not isinstance(headers, list) or not all(isinstance(h, list | tuple) and len(h) == 2 for h in headers):
            raise InvalidRecord(f"line {line_no}: field headers must be an object or a list of [key, value] pairs")
        row = {
            "key": key,
            "value": _decode(raw.get("value"), binary, "value", line_no),
            "timestamp": _timestamp(raw.get("timestamp"), line_no),
            "headers": [{"key": str(k), "value": _decode(v, binary, "header", line_no)} for k, v in headers],
            "offset": _whole_number(raw.get("offset"), "offset", line_no, 0, LONG_MAX - 1),
        }
        partition = _whole_number(raw.get("partition", fixed), "partition", line_no, 0, partitions - 1)
        if partition is None:
            partition = kafka_partition(key, partitions) if key is not None else line_no % partitions
        yield partition, row


def _given_offsets(topic: str, partition: int, offsets: list[int | None]) -> list[int] | None:
    """The offsets JSON lines gave a partition's records: all of them, or None when none gave one."""
    given = [o for o in offsets if o is not None]
    if not given:
        return None
    if len(given) != len(offsets):
        raise click.ClickException(
            f"partition {topic}-{partition}: {len(given)} of {len(offsets)} records have an offset; "
            "give every record of a partition an offset, or none"
        )
    return given


def _whole_number(value: object, field: str, line_no: int, low: int, high: int, also: str = "") -> int | None:
    """A JSON field that must be a whole number in [low, high] when present (null: absent)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidRecord(
            f"line {line_no}: field {field}={json.dumps(value)[:60]} must be a whole number from {low} to {high}{also}"
        )
    return value


def _timestamp(value: object, line_no: int) -> int | None:
    """A record's timestamp: epoch ms, or an ISO 8601 time as every other TIME the CLI takes."""
    also = " (epoch ms) or an ISO 8601 time such as 2026-11-27T10:00:00Z"
    if isinstance(value, str):
        with contextlib.suppress(ValueError):  # else reported below, with the value as given
            value = parse_time_ms(value)
    return _whole_number(value, "timestamp", line_no, 0, LONG_MAX, also)


@cli.command()
@click.option("--topic", required=True)
@click.option("--file", "path", type=click.Path(exists=True, dir_okay=False), help="JSON lines file (default stdin).")
@click.option("--partition", type=int, help="Write every record to this partition (default: by key, like Kafka).")
@click.option("--base64", "binary", is_flag=True, help="Keys, values and headers are base64 (default UTF-8 text).")
@click.option(
    "--generate", "synthetic", is_flag=True, help="Produce a synthetic CDC workload instead of reading input."
)
@click.option("--keys", default=1000, show_default=True)
@click.option("--records", default=10000, show_default=True)
@click.option("--value-size", default=100, show_default=True)
@click.option("--tombstone-share", default=0.05, show_default=True)
@click.option("--out-of-order-share", default=0.0, show_default=True)
@click.option("--timestamp-spread-ms", default=3_600_000, show_default=True)
@click.option("--start-ms", type=int, help="First record timestamp (default: now − spread).")
@click.option("--header-versions", is_flag=True, help="Add a KIP-280 version header to each record.")
@click.option("--header-name", default="version", show_default=True)
@click.option("--seed", default=0, show_default=True)
@click.option("--batch-records", default=50_000, show_default=True, help="Records per append batch.")
@pass_ctx
def produce(
    ctx: Context,
    topic: str,
    path: str | None,
    partition: int | None,
    binary: bool,
    synthetic: bool,
    keys: int,
    records: int,
    value_size: int,
    tombstone_share: float,
    out_of_order_share: float,
    timestamp_spread_ms: int,
    start_ms: int | None,
    header_versions: bool,
    header_name: str,
    seed: int,
    batch_records: int,
) -> None:
    """Append records to TOPIC: JSON lines ({"key", "value", "timestamp", "headers", "partition", "offset"}) or
    --generate. With "offset" on every record of a partition, records keep those offsets (as when
    copying a Kafka topic: strictly increasing, from the log end on, gaps allowed)."""
    t = ctx.lake.topic(topic)
    totals: dict[int, int] = {}
    if synthetic:
        now = wall_clock_ms()
        spec = WorkloadSpec(
            keys=keys,
            records=records,
            partitions=t.partitions,
            value_size=value_size,
            tombstone_share=tombstone_share,
            out_of_order_share=out_of_order_share,
            start_ms=now - timestamp_spread_ms if start_ms is None else start_ms,
            timestamp_spread_ms=timestamp_spread_ms,
            header_versions=header_versions,
            header_name=header_name,
            seed=seed,
        )
        with progress_bar(quiet=ctx.as_json, label=f"producing to {topic}", total=records) as (progress, task):
            for p, batch in generate(spec, batch_records=batch_records):
                t.partition(p).append(batch)
                totals[p] = totals.get(p, 0) + batch.num_rows
                progress.advance(task, batch.num_rows)
    else:
        rows: dict[int, list[dict[str, Any]]] = {}
        with open(path) if path else sys.stdin as stream:
            for p, row in _json_lines(stream, binary, t.partitions, partition):
                rows.setdefault(p, []).append(row)
        for p, part_rows in sorted(rows.items()):
            offsets = _given_offsets(topic, p, [row.pop("offset") for row in part_rows])
            table = pa.Table.from_pylist(part_rows, schema=BATCH_SCHEMA.set(3, pa.field("headers", HEADER_TYPE)))
            t.partition(p).append(table, offsets=offsets)
            totals[p] = len(part_rows)
    summary = {"topic": topic, "records": sum(totals.values()), "per_partition": totals}
    per_partition = ", ".join(f"partition {p}: {n}" for p, n in sorted(totals.items()))
    shown = f"appended {summary['records']} records to {topic} ({per_partition or 'none'})"
    ctx.emit(summary, lambda: console.print(shown, markup=False))


@cli.command()
@click.option("--topic", required=True)
@click.option("--partition", type=int, required=True)
@click.option("--from-offset", type=int, help="First offset (default: the log start).")
@click.option("--max-records", type=int)
@click.option("--base64", "binary", is_flag=True, help="Print keys/values as base64 (default UTF-8, replacing errors).")
@pass_ctx
def consume(
    ctx: Context, topic: str, partition: int, from_offset: int | None, max_records: int | None, binary: bool
) -> None:
    """Print a partition's records as JSON lines."""
    log = ctx.lake.topic(topic).partition(partition)

    lossy: list[int] = []

    def enc(b: bytes | None, offset: int) -> str | None:
        if b is None:
            return None
        if binary:
            return base64.b64encode(b).decode()
        try:
            return b.decode()
        except UnicodeDecodeError:
            lossy.append(offset)
            return b.decode(errors="replace")

    try:
        _print_records(log, from_offset, max_records, enc)
    finally:
        if lossy:
            err_console.print(
                f"note: {len(lossy)} record(s) (first at offset {lossy[0]}) hold bytes that are not UTF-8 text and "
                "were printed with replacement characters; --base64 prints every byte",
                markup=False,
                highlight=False,
            )


def _print_records(
    log: PartitionLog, from_offset: int | None, max_records: int | None, enc: Callable[[bytes | None, int], str | None]
) -> None:
    """The records as JSON lines, keys, values and header values through `enc`."""
    printed = 0
    for batch in log.iter_batches(from_offset, max_records=max_records):
        for row in batch.to_pylist():
            if max_records is not None and printed >= max_records:
                return
            click.echo(
                json.dumps(
                    {
                        "offset": row["offset"],
                        "timestamp": row["timestamp"],
                        "key": enc(row["key"], row["offset"]),
                        "value": enc(row["value"], row["offset"]),
                        "headers": [[h["key"], enc(h["value"], row["offset"])] for h in row["headers"] or []],
                        "delete_horizon_ms": row["delete_horizon_ms"],
                    }
                )
            )
            printed += 1
