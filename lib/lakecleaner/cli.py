"""The `lakecleaner` command line. Every command takes `--config` and `--lake`, and `--json`
for output scripts can parse. Errors print one clear message and exit with status 2."""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import functools
import json
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any, BinaryIO, TypeVar

import click
import pyarrow as pa
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from lakecleaner.clock import parse_time_ms, wall_clock_ms
from lakecleaner.config import (
    ENV_CONFIG_PATH,
    ENV_LAKE_URI,
    LOCAL_CONFIG,
    LONG_MAX,
    LakeConfig,
    did_you_mean,
    find_config,
    load_config,
    parse_config,
    sample_config_text,
)
from lakecleaner.errors import ConfigError, InvalidRecord, LakeCleanerError
from lakecleaner.lake import Lake, Topic, failure_runs, partitions_label
from lakecleaner.log.partition import PartitionLog
from lakecleaner.log.records import BATCH_SCHEMA, HEADER_TYPE
from lakecleaner.log.repair import RepairAmbiguous, repair_partition
from lakecleaner.policy.text import format_timestamp_ms
from lakecleaner.process import exit_flushed
from lakecleaner.status import partition_status
from lakecleaner.workload import WorkloadSpec, generate, kafka_partition

F = TypeVar("F", bound=Callable[..., Any])
console = Console(width=None if sys.stdout.isatty() else 200)
err_console = Console(stderr=True, soft_wrap=True)  # paths and messages stay on one line


class Context:
    def __init__(self, config_path: str | None, lake_uri: str | None, as_json: bool) -> None:
        self.config_path = config_path
        self.lake_uri = lake_uri
        self.as_json = as_json
        self._lake: Lake | None = None

    @functools.cached_property
    def config(self) -> LakeConfig:
        """The config file's settings, with --lake replacing the lake URI (loaded once). With --lake
        and no config file anywhere (`find_config`), Kafka's defaults and no managed topics."""
        if self.lake_uri and find_config(self.config_path) is None:
            return parse_config({"lake": {"uri": self.lake_uri}}, "<--lake>")
        config = load_config(self.config_path)
        return dataclasses.replace(config, lake_uri=self.lake_uri) if self.lake_uri else config

    @property
    def lake(self) -> Lake:
        if self._lake is None:
            self._lake = Lake.open(self.config)
        return self._lake

    def emit(self, data: object, human: Callable[[], None]) -> None:
        if self.as_json:
            click.echo(json.dumps(data, indent=1, default=str))
        else:
            human()


pass_ctx = click.make_pass_decorator(Context)


def parse_config_pairs(pairs: tuple[str, ...]) -> dict[str, object]:
    """k=v pairs from --config options."""
    out: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r} is not key=value (e.g. --config cleanup.policy=compact)")
        out[key.strip()] = value.strip()
    return out


@click.group()
@click.option("--config", "config_path", envvar=ENV_CONFIG_PATH, help="Path of lakecleaner.yaml.")
@click.option(
    "--lake",
    "lake_uri",
    envvar=ENV_LAKE_URI,
    help=f"Lake URI (s3://bucket/prefix or file:///path); overrides the config (also ${ENV_LAKE_URI}).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
@click.pass_context
def cli(ctx: click.Context, config_path: str | None, lake_uri: str | None, as_json: bool) -> None:
    """Kafka's log compaction and retention for logs stored in a data lake."""
    ctx.obj = Context(config_path, lake_uri, as_json)


# -- topics --------------------------------------------------------------------------------------
@cli.group()
def topics() -> None:
    """Create, list and describe topics."""


@topics.command("create")
@click.argument("name")
@click.option("--partitions", type=int, help="Partition count (default: the config file's, else 1).")
@click.option("--config", "pairs", multiple=True, help="Topic-level config, key=value (repeatable).")
@click.option("--if-not-exists", is_flag=True, help="Succeed if the topic exists already.")
@pass_ctx
def topics_create(ctx: Context, name: str, partitions: int | None, pairs: tuple[str, ...], if_not_exists: bool) -> None:
    """Create topic NAME and its partitions."""
    existed = if_not_exists and name in ctx.lake.list_topics()
    topic = ctx.lake.create_topic(name, partitions, parse_config_pairs(pairs), exist_ok=if_not_exists)
    done = "exists" if existed else "created"
    ctx.emit(
        {**_describe(topic), "result": done},
        lambda: console.print(
            f"topic {topic.name} exists ({topic.partitions} partition(s)); nothing was changed"
            if existed
            else f"created topic {topic.name} with {topic.partitions} partition(s)"
        ),
    )


@topics.command("alter")
@click.argument("name")
@click.option("--config", "pairs", multiple=True, help="Topic-level config to set, key=value (repeatable).")
@click.option("--delete-config", "deletes", multiple=True, help="Topic-level key to remove (repeatable).")
@pass_ctx
def topics_alter(ctx: Context, name: str, pairs: tuple[str, ...], deletes: tuple[str, ...]) -> None:
    """Change topic NAME's stored config overrides."""
    changes: dict[str, object] = {**parse_config_pairs(pairs), **dict.fromkeys(deletes)}
    topic = ctx.lake.alter_topic(name, changes)
    ctx.emit(_describe(topic), lambda: console.print(f"altered topic {topic.name}"))


@topics.command("list")
@pass_ctx
def topics_list(ctx: Context) -> None:
    """List the lake's topics."""
    names = ctx.lake.list_topics()
    ctx.emit(names, lambda: console.print("\n".join(names) if names else "no topics in the lake"))


def _describe(topic: Topic) -> dict[str, object]:
    return {
        "topic": topic.name,
        "partitions": topic.partitions,
        "overrides": dict(topic.metadata.overrides),
        "config": topic.config.to_kafka_dict(),
    }


@topics.command("describe")
@click.argument("name")
@pass_ctx
def topics_describe(ctx: Context, name: str) -> None:
    """Show topic NAME's partitions and effective config."""
    topic = ctx.lake.topic(name)
    info = _describe(topic)

    def human() -> None:
        console.print(f"[bold]{topic.name}[/bold]  partitions={topic.partitions}")
        table = Table("config", "value", "source")
        yaml_spec = ctx.lake.config.topics.get(name)
        for key, value in topic.config.to_kafka_dict().items():
            if key in topic.metadata.overrides:
                source = "topic"
            elif yaml_spec and key in yaml_spec.overrides:
                source = "config file (topic)"
            else:
                source = "default"
            table.add_row(key, str(value), source)
        console.print(table)

    ctx.emit(info, human)


# -- produce / consume ---------------------------------------------------------------------------
def _base64(value: str, what: str) -> bytes:
    """`value` decoded; a clear error naming `what` when it is not base64."""
    try:
        return base64.b64decode(value, validate=True)
    except ValueError as exc:
        raise click.ClickException(f"{what} is not valid base64: {exc}") from None


def _decode(value: object, binary: bool, what: str, line_no: int) -> bytes | None:
    if value is None:
        return None
    if not isinstance(value, str):
        value = json.dumps(value)
    return _base64(value, f"line {line_no}: {what}") if binary else value.encode()


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
        with _progress(ctx, f"producing to {topic}", records) as (progress, task):
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
    ctx.emit(summary, lambda: console.print(f"appended {summary['records']} records to {topic}: {totals}"))


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


# -- status / roll / repair ---------------------------------------------------------------------------
@cli.command()
@click.option("--topic", "names", multiple=True, help="Topics to show (default: all).")
@pass_ctx
def status(ctx: Context, names: tuple[str, ...]) -> None:
    """A table per topic: segments, records, bytes, offsets, checkpoint and active segment age."""
    show_status(ctx, list(names) or ctx.lake.list_topics())


def show_status(ctx: Context, names: list[str]) -> None:
    """Each topic's partitions; a partition that cannot be read is a FAILED row with the reason,
    and a topic whose topic.json cannot be read one line; the others are shown, and the command
    exits 1 at the end. A topic named that the lake does not hold is an error (exit 2)."""
    now = wall_clock_ms()
    topics, unopened = ctx.lake.read_topics(names)
    if unopened:
        present = set(ctx.lake.list_topics())
        missing = [n for n in names if n in unopened and n not in present]
        if missing:
            raise LakeCleanerError(unopened[missing[0]])
    reads = ctx.lake.read_manifests_of(dict.fromkeys(topics.values()))
    states = ctx.lake.cleaner_state.read_many(list(topics), ctx.config.storage.max_concurrency)
    result: dict[str, list[dict[str, Any]]] = {}
    failed: dict[str, dict[int, str]] = {}
    for name in topics:
        read, marks, config = reads[name], states[name].uncleanable, topics[name].config
        result[name] = [
            asdict(partition_status(p, m, now, config, marks.get(p))) for p, m in sorted(read.manifests.items())
        ]
        failed[name] = read.failures

    def human() -> None:
        for name, rows in result.items():
            table = Table(title=f"topic {name}")
            for col in ("part", "segs", "records", "bytes", "log start", "next", "checkpoint", "active age"):
                table.add_column(col, justify="right")
            table.add_column("uncleanable")
            for r in rows:
                table.add_row(
                    str(r["partition"]),
                    str(r["segments"]),
                    f"{r['records']:,}",
                    _bytes(r["bytes"]),
                    str(r["log_start_offset"]),
                    str(r["next_offset"]),
                    "-" if r["cleaner_checkpoint"] is None else str(r["cleaner_checkpoint"]),
                    _age(r["active_segment_age_ms"]),
                    r["uncleanable"] or "",
                )
            for first, last, _ in failure_runs(failed[name]):
                table.add_row(partitions_label(first, last), "FAILED", *[""] * 7)
            console.print(table)
        if not result and not unopened:
            console.print("no topics in the lake")

    as_json: dict[str, list[dict[str, Any]]] = {
        name: rows + [{"partition": p, "error": e} for p, e in failed[name].items()] for name, rows in result.items()
    }
    as_json.update({name: [{"partition": None, "error": reason}] for name, reason in unopened.items()})
    ctx.emit(as_json, human)
    failures = [line for name, errors in failed.items() for line in _unreadable(name, errors)]
    _exit_on_failures([(f"topic {name}", reason) for name, reason in unopened.items()] + failures)


def _bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def _age(ms: int | None) -> str:
    if ms is None:
        return "-"
    seconds = ms // 1000
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h"


@cli.command()
@click.option("--topic", required=True)
@click.option("--partition", type=int, required=True)
@pass_ctx
def roll(ctx: Context, topic: str, partition: int) -> None:
    """Seal the active segment of a partition."""
    manifest = ctx.lake.topic(topic).partition(partition).roll()
    ctx.emit({"version": manifest.version}, lambda: console.print(f"rolled {topic}-{partition}"))


@cli.command()
@click.option("--topic", required=True)
@click.option("--partition", "partitions", type=int, multiple=True, help="Partitions to repair (default: all).")
@click.option("--force", is_flag=True, help="Rebuild even a readable manifest.")
@click.option("--log-start-offset", type=int, help="Log start offset to restore (after a trim or retention).")
@click.option(
    "--prefer",
    "prefer",
    multiple=True,
    metavar="FILE",
    help="A segment file (as a refused repair names it) that wins over any file covering the same offsets.",
)
@pass_ctx
def repair(
    ctx: Context,
    topic: str,
    partitions: tuple[int, ...],
    force: bool,
    log_start_offset: int | None,
    prefer: tuple[str, ...],
) -> None:
    """Rebuild a missing or damaged topic.json and partition manifests from what storage holds.

    Between files that cover the same offsets, repair keeps the one a commit acknowledged; where
    nothing tells them apart it changes nothing for that partition, names the files, and waits for
    --prefer. Exits 1 when a partition could not be repaired."""
    rebuilt = ctx.lake.repair_metadata(topic)
    t = ctx.lake.topic(topic)
    reports: list[dict[str, object]] = []
    refused: dict[int, str] = {}
    for p in partitions or range(t.partitions):
        log = t.partition(p)
        state = "ok"
        try:
            log.load()
        except LakeCleanerError as exc:
            state = str(exc)
        if state == "ok" and not force and not partitions:
            continue
        try:
            report = repair_partition(
                ctx.lake.store,
                topic,
                p,
                t.config,
                force=force,
                log_start_offset=log_start_offset,
                prefer=prefer,
                max_workers=ctx.lake.config.storage.max_concurrency,
            )
        except RepairAmbiguous as exc:
            refused[p] = str(exc)
            continue
        reports.append({**report.to_dict(), "left_out_count": len(report.left_out)})

    def human() -> None:
        if rebuilt is not None:
            kept = "its config overrides kept" if rebuilt.overrides_kept else "no config overrides could be kept"
            console.print(
                f"rebuilt the {rebuilt.previous_state} topic.json of {topic}: "
                f"{rebuilt.metadata.partitions} partition(s), {kept}"
            )
        if not reports and not refused:
            console.print(f"every manifest of {topic} is readable; nothing to repair")
        for r in reports:
            console.print(
                f"repaired {topic}-{r['partition']}: {r['segments']} segments, {r['records']} records, "
                f"offsets [{r['log_start_offset']}, {r['next_offset']}), {r['left_out_count']} file(s) left out"
            )
        for message in refused.values():
            err_console.print(f"[red]error:[/red] {message}")

    ctx.emit(
        {
            "topic_metadata": None if rebuilt is None else rebuilt.to_dict(),
            "partitions": reports,
            "refused": {str(p): m for p, m in refused.items()},
        },
        human,
    )
    if refused:
        sys.exit(1)


# -- plan / retain / trim / gc -------------------------------------------------------------------
def _now(text: str | None) -> int:
    return wall_clock_ms() if text is None else parse_time_ms(text)


NOW_HELP = "Decide as of this time (epoch ms or ISO 8601; default: now)."


def _partitions(values: tuple[int, ...]) -> list[int] | None:
    return sorted(set(values)) or None


@cli.command()
@click.option("--topic", required=True)
@click.option("--now", "now_text", help=NOW_HELP)
@click.option("--partition", "partitions", type=int, multiple=True, help="Only these partitions.")
@click.option("--force", is_flag=True, help="Select every partition with cleanable bytes, ignoring the ratio.")
@click.option("--max-partitions", type=int, help="Compact at most this many partitions per run.")
@pass_ctx
def plan(
    ctx: Context, topic: str, now_text: str | None, partitions: tuple[int, ...], force: bool, max_partitions: int | None
) -> None:
    """Show what would be rolled, compacted and deleted, and why. Changes nothing."""
    from lakecleaner.policy import plan_topic
    from lakecleaner.policy.render import render_topic_plan

    now = _now(now_text)
    t = ctx.lake.topic(topic)
    read = t.read_manifests(_partitions(partitions))
    manifests = read.manifests
    consumed = (
        ctx.lake.offsets.consumed_positions(topic, sorted(manifests)) if t.config.consumed_retention_enabled else {}
    )
    cleaner = ctx.lake.cleaner_state.read(topic)
    result = plan_topic(
        topic, manifests, t.config, consumed, now, force=force, max_partitions=max_partitions, cleaner=cleaner
    )
    ctx.emit(
        {**result.to_dict(), "unreadable": {str(p): e for p, e in read.failures.items()}},
        lambda: console.print(render_topic_plan(result)),
    )
    _exit_on_failures(_unreadable(topic, read.failures))


@cli.command()
@click.option("--topic", required=True)
@click.option("--now", "now_text", help=NOW_HELP)
@click.option("--partitions", "partition_list", default="", help="Comma-separated partitions (default: the due ones).")
@click.option("--force", is_flag=True, help="Compact every partition with cleanable bytes, ignoring the ratio.")
@click.option("--master", help="Spark master (default: the config's spark.master).")
@click.option("--remote", help="Spark Connect server, sc://host:port (default: the config's spark.remote).")
@pass_ctx
def compact(
    ctx: Context,
    topic: str,
    now_text: str | None,
    partition_list: str,
    force: bool,
    master: str | None,
    remote: str | None,
) -> None:
    """Compact a topic's due partitions on Spark (one application), as the DAG's compact task does."""
    from lakecleaner.engine import EngineOptions, compact_topic, print_report, requests_for
    from lakecleaner.engine.session import build_session
    from lakecleaner.policy import plan_topic

    now = _now(now_text)
    t = ctx.lake.topic(topic)
    chosen = [int(p) for p in partition_list.split(",") if p.strip()] or None
    read = t.read_manifests(chosen)
    cleaner = ctx.lake.cleaner_state.read(topic)
    plan_result = plan_topic(topic, read.manifests, t.config, {}, now, force=force, cleaner=cleaner)
    selected = plan_result.selection.selected
    requests = [r for p in selected if (r := requests_for(read.manifests[p], t.config, now))]
    unreadable = _unreadable(topic, read.failures)
    if not requests:
        ctx.emit({"topic": topic, "partitions": []}, lambda: console.print(f"{topic}: no partition is due"))
        _exit_on_failures(unreadable)
        return
    spark = build_session(ctx.config.spark, f"lakecleaner-{topic}", master, remote)
    try:
        report = compact_topic(spark, ctx.lake, topic, requests, now, options=EngineOptions.of(ctx.config.cleaner))
    finally:
        spark.stop()
    ctx.emit({**report.to_dict(), "location": report.location}, lambda: print_report(report, console))
    failed = [(f"{topic}-{p.partition}", p.message) for p in report.partitions if p.failed]
    _exit_on_failures([*unreadable, *failed])


@cli.command()
@click.option("--topic", required=True)
@click.option("--now", "now_text", help=NOW_HELP)
@click.option("--partition", "partitions", type=int, multiple=True, help="Only these partitions.")
@click.option("--dry-run", is_flag=True, help="Plan only: nothing is checked or committed.")
@pass_ctx
def retain(ctx: Context, topic: str, now_text: str | None, partitions: tuple[int, ...], dry_run: bool) -> None:
    """Apply time, size and consumed retention (KIP-68) to a topic."""
    from lakecleaner.retention import retain_topic

    report = retain_topic(ctx.lake, topic, _now(now_text), partitions=_partitions(partitions), dry_run=dry_run)
    data = {**report.to_dict(), "location": report.location}

    def human() -> None:
        title = (
            f"DRY RUN: retention of {topic} would do this (nothing was deleted or committed)"
            if dry_run
            else f"retention of {topic}"
        )
        deleted = "would delete (rule: segments)" if dry_run else "deleted (rule: segments)"
        table = Table("part", "status", deleted, "bytes", "new log start", "held back by", title=title)
        for p in data["partitions"]:
            rules = ", ".join(f"{r}: {v['segments']}" for r, v in p["deleted_by_rule"].items()) or "-"
            deleted = sum(v["bytes"] for v in p["deleted_by_rule"].values())
            table.add_row(
                str(p["partition"]),
                p["status"],
                rules,
                _bytes(deleted),
                str(p["new_log_start_offset"]),
                ", ".join(p["held_back_by"]) or "-",
            )
        console.print(table)
        for p in data["partitions"]:
            if p["error"]:
                console.print(f"partition {p['partition']}: {p['error']}", markup=False)
            if p["consumers_below_log_start"]:
                console.print(
                    f"partition {p['partition']}: groups below the new log start will reset: "
                    f"{p['consumers_below_log_start']}",
                    markup=False,
                )
        if report.location:
            console.print(f"report: {report.location}", markup=False)

    ctx.emit(data, human)
    if not report.success:
        sys.exit(1)


@cli.command()
@click.option("--topic", required=True)
@click.option("--partition", type=int, required=True)
@click.option("--offset", type=int, required=True, help="New log start offset: records below it are deleted.")
@pass_ctx
def trim(ctx: Context, topic: str, partition: int, offset: int) -> None:
    """Kafka's DeleteRecords: move a partition's log start offset forward."""
    from lakecleaner.retention import trim_partition

    manifest = trim_partition(ctx.lake, topic, partition, offset)
    ctx.emit(
        {"log_start_offset": manifest.log_start_offset, "version": manifest.version},
        lambda: console.print(f"{topic}-{partition}: log start offset is now {manifest.log_start_offset}"),
    )


@cli.command()
@click.option("--topic", required=True)
@click.option("--now", "now_text", help=NOW_HELP)
@click.option("--partition", "partitions", type=int, multiple=True, help="Only these partitions.")
@click.option("--dry-run", is_flag=True, help="List what would be deleted, and why; delete nothing.")
@pass_ctx
def gc(ctx: Context, topic: str, now_text: str | None, partitions: tuple[int, ...], dry_run: bool) -> None:
    """Physically delete files whose file.delete.delay.ms has passed, and old orphan files.

    Exits with status 1 when any partition failed (one line each on stderr); the others proceed."""
    from lakecleaner.retention import gc_topic

    report = gc_topic(ctx.lake, topic, _now(now_text), partitions=_partitions(partitions), dry_run=dry_run)

    def human() -> None:
        verb = "would delete" if dry_run else "deleted"
        for p in report.partitions:
            for path in p.deleted_pending:
                console.print(f"{topic}-{p.partition}: {verb} {path} (left the log, delay passed)", markup=False)
            for path in p.deleted_orphans:
                console.print(f"{topic}-{p.partition}: {verb} {path} (orphan: no manifest references it)", markup=False)
            for path in p.discarded_unfinished:
                what = "would discard" if dry_run else "discarded"
                console.print(
                    f"{topic}-{p.partition}: {what} an unfinished write of {path} (its writer crashed)", markup=False
                )
            if p.orphans_kept:
                console.print(f"{topic}-{p.partition}: orphans kept: {p.orphans_kept}", markup=False)
        if report.run_reports_pruned:
            pruned = "would prune" if dry_run else "pruned"
            console.print(f"{topic}: {pruned} the reports of {report.run_reports_pruned} old run(s)", markup=False)
        for warning in report.warnings:
            console.print(f"{topic}: warning: {warning}", markup=False)
        console.print(f"{topic}: {verb} {report.files_deleted} file(s); report: {report.location}", markup=False)

    ctx.emit({**report.to_dict(), "location": report.location}, human)
    _exit_on_failures([(f"{topic}-{p.partition}", p.error) for p in report.failed])


def _unreadable(topic: str, failures: Mapping[int, str]) -> list[tuple[str, str]]:
    """A topic's unreadable partitions as failure lines: consecutive partitions that fail for the
    same reason share one line (`orders-3..9999`), so a topic.json naming partitions storage does
    not hold is one line, not one per partition."""
    lines: list[tuple[str, str]] = []
    for first, last, reason in failure_runs(failures):
        lines.append((f"{topic}-{partitions_label(first, last)}", reason))
    return lines


def _exit_on_failures(failures: Sequence[tuple[str, str | None]]) -> None:
    """Exit with status 1, one line per failure (of a partition `topic-partition`, or a group) on
    stderr, when anything failed; the command has done its work on the rest."""
    for what, error in failures:
        click.echo(f"{what}: FAILED: {error}", err=True)  # one line each, never wrapped
    if failures:
        sys.exit(1)


# -- offsets ----------------------------------------------------------------------------------
@cli.group()
def offsets() -> None:
    """Consumer groups' committed offsets."""


@offsets.command("commit")
@click.option("--group", required=True)
@click.option("--topic", required=True)
@click.argument("assignments", nargs=-1, required=True)
@pass_ctx
def offsets_commit(ctx: Context, group: str, topic: str, assignments: tuple[str, ...]) -> None:
    """Commit PARTITION=OFFSET pairs (the next offset to consume) for GROUP on TOPIC."""
    parsed: dict[int, int] = {}
    for a in assignments:
        p, sep, o = a.partition("=")
        if not sep or not p.strip().isdigit() or not o.strip().isdigit():
            raise click.BadParameter(f"{a!r} is not PARTITION=OFFSET (e.g. 0=1500)")
        parsed[int(p)] = int(o)
    topic_obj = ctx.lake.topic(topic)
    for part in parsed:
        topic_obj.partition(part)
    ctx.lake.offsets.commit(group, topic, parsed)
    ctx.emit(
        {"group": group, "topic": topic, "offsets": parsed},
        lambda: console.print(f"committed {group} {topic} {parsed}"),
    )


@offsets.command("list")
@click.option("--group", help="Only this group.")
@click.option("--topic", help="Only this topic, with the minimum committed offset per partition.")
@pass_ctx
def offsets_list(ctx: Context, group: str | None, topic: str | None) -> None:
    """List committed offsets per group, topic and partition."""
    rows = []
    reads = {group: ctx.lake.offsets.read_group(group)} if group else ctx.lake.offsets.read_all_groups()
    unreadable = {g: r for g, r in reads.items() if isinstance(r, str)}
    for g, read in reads.items():
        if isinstance(read, str):
            continue
        for t, parts in read.topics.items():
            if topic and t != topic:
                continue
            for p, c in sorted(parts.items()):
                rows.append({"group": g, "topic": t, "partition": p, "offset": c.offset, "commit_ms": c.commit_ms})
    minimum = {}
    if topic:
        t_obj = ctx.lake.topic(topic)
        for p, pos in ctx.lake.offsets.consumed_positions(topic, list(range(t_obj.partitions))).items():
            minimum[p] = {"offset": pos.offset, "reason": pos.reason}

    def human() -> None:
        table = Table("group", "topic", "partition", "committed offset")
        for r in rows:
            table.add_row(str(r["group"]), str(r["topic"]), str(r["partition"]), str(r["offset"]))
        console.print(table)
        for p, m in minimum.items():
            shown = m["offset"] if m["offset"] is not None else f"unknown ({m['reason']})"
            console.print(f"{topic}-{p}: minimum committed offset {shown}")

    ctx.emit({"offsets": rows, "minimum": minimum}, human)
    _exit_on_failures([(f"group {g}", reason) for g, reason in unreadable.items()])


@cli.group()
def uncleanable() -> None:
    """Partitions whose compaction failed and that later runs skip (Kafka's uncleanable partitions)."""


@uncleanable.command("list")
@click.option("--topic", required=True)
@pass_ctx
def uncleanable_list(ctx: Context, topic: str) -> None:
    """The partitions marked uncleanable: why, since when, how many attempts failed."""
    ctx.lake.topic(topic)
    state = ctx.lake.cleaner_state.read(topic)
    rows = [e.to_dict() for _, e in sorted(state.uncleanable.items())]

    def human() -> None:
        table = Table("partition", "attempts", "first failed", "last failed", "log end then", "reason")
        for r in rows:
            table.add_row(
                str(r["partition"]),
                str(r["attempts"]),
                format_timestamp_ms(r["first_failed_ms"]),
                format_timestamp_ms(r["last_failed_ms"]),
                str(r["log_end_offset"]),
                r["reason"],
            )
        console.print(table if rows else f"{topic}: no partition is marked uncleanable")

    ctx.emit({"topic": topic, "uncleanable": rows}, human)


@uncleanable.command("clear")
@click.option("--topic", required=True)
@click.option("--partition", "partitions", type=int, multiple=True, help="Only these partitions (default: all).")
@pass_ctx
def uncleanable_clear(ctx: Context, topic: str, partitions: tuple[int, ...]) -> None:
    """Forget that partitions are uncleanable, so that the next run compacts them if they are due."""
    t = ctx.lake.topic(topic)
    for p in partitions:
        t.partition(p)  # an unknown partition is an error, not a silent no-op
    cleared = ctx.lake.cleaner_state.clear(topic, partitions or None)
    ctx.emit(
        {"topic": topic, "cleared": cleared},
        lambda: console.print(
            f"{topic}: cleared {', '.join(map(str, cleared)) or 'nothing (no partition was marked)'}"
        ),
    )


@cli.group()
def audit() -> None:
    """Prove erasure: where a key's records are still stored, and by when each copy is gone."""


@audit.command("key")
@click.option("--topic", required=True)
@click.option("--key", "text_key", help="The key, as UTF-8 text.")
@click.option("--key-base64", "base64_key", help="The key's bytes, base64-encoded.")
@click.option(
    "--key-file",
    "key_file",
    type=click.File("rb"),
    help="A file holding the key's bytes exactly (no trailing newline is removed); - reads standard input.",
)
@click.option("--now", "now_text", help=NOW_HELP)
@pass_ctx
def audit_key_command(
    ctx: Context,
    topic: str,
    text_key: str | None,
    base64_key: str | None,
    key_file: BinaryIO | None,
    now_text: str | None,
) -> None:
    """Every stored copy of a key (live segments, files awaiting deletion, abandoned run outputs,
    spills, the lake's own files) with the time by which it is physically gone. Exits 1 when a copy
    is overdue or an object could not be read, so it can gate a compliance job."""
    from lakecleaner.audit import audit_key

    if sum(given is not None for given in (text_key, base64_key, key_file)) != 1:
        raise click.UsageError("give the key once: --key TEXT, --key-base64 B64 or --key-file PATH (- for stdin)")
    if key_file is not None:
        key = key_file.read()
    else:
        key = text_key.encode() if text_key is not None else _base64(str(base64_key), "--key-base64")
    result = audit_key(ctx.lake, topic, key, _now(now_text))

    def human() -> None:
        table = Table("partition", "object", "offset", "kind", "gone by", "overdue")
        for c in result.copies:
            d = c.deadline
            table.add_row(
                "-" if c.partition is None else str(c.partition),
                c.object,
                "-" if c.offset is None else str(c.offset),
                c.kind,
                "-" if d is None or d.gone_by_ms is None else format_timestamp_ms(d.gone_by_ms),
                "" if d is None or d.overdue is None else d.overdue,
            )
        console.print(table if result.copies else f"{topic}: no stored copy of the key")
        for name, reason in result.unreadable.items():
            console.print(f"[red]could not read {name}: {reason}[/red]")
        console.print("[red]OVERDUE[/red]" if result.overdue else "nothing is overdue")

    ctx.emit(result.to_dict(), human)
    if result.overdue:
        sys.exit(1)


@audit.command("topic")
@click.option("--topic", required=True)
@click.option("--now", "now_text", help=NOW_HELP)
@pass_ctx
def audit_topic_command(ctx: Context, topic: str, now_text: str | None) -> None:
    """Per partition, the earliest deadline by which data it still stores must be gone (dirty
    records, tombstones, files awaiting deletion, unreferenced files). Exits 1 when one is overdue."""
    from lakecleaner.audit import audit_topic

    partitions = audit_topic(ctx.lake, topic, _now(now_text))

    def human() -> None:
        table = Table("partition", "awaiting deletion", "unreferenced", "earliest", "gone by", "overdue")
        for p in partitions:
            d = p.deadline
            table.add_row(
                str(p.partition),
                str(p.pending_files),
                f"{p.unreferenced_files} + {p.unfinished_writes} unfinished"
                if p.unfinished_writes
                else str(p.unreferenced_files),
                p.error or p.what or "-",
                "-" if d is None or d.gone_by_ms is None else format_timestamp_ms(d.gone_by_ms),
                "" if d is None or d.overdue is None else d.overdue,
            )
        console.print(table)

    ctx.emit({"topic": topic, "partitions": [p.to_dict() for p in partitions]}, human)
    if any(p.overdue for p in partitions):
        sys.exit(1)


# -- Airflow ---------------------------------------------------------------------------------
@cli.group("airflow")
def airflow_group() -> None:
    """Prepare Airflow for the topics' DAGs."""


@airflow_group.command("setup")
@pass_ctx
def airflow_setup(ctx: Context) -> None:
    """Create or update what the DAGs need in Airflow (the compact tasks' pool); idempotent.

    Run it after `airflow db migrate`, with Airflow's environment (AIRFLOW_HOME or the database
    connection) and the config file the DAGs use."""
    from lakecleaner.orchestration.airflow_setup import setup_airflow

    done = setup_airflow(ctx.config)
    ctx.emit(
        done,
        lambda: console.print(
            f"Airflow is set up for lakecleaner: pool '{done['pool']}' with {done['pool_slots']} slot(s)", markup=False
        ),
    )


# -- set-up ------------------------------------------------------------------------------------
@cli.command()
@click.argument("path", default=LOCAL_CONFIG, type=click.Path(dir_okay=False, path_type=Path))
def init(path: Path) -> None:
    """Write the sample config file to PATH (default ./lakecleaner.yaml), with its lake in a folder
    `lake` beside it; an existing file is never overwritten."""
    console.print(f"wrote the sample config to {write_sample_config(path)}", markup=False, highlight=False)


@cli.command()
@pass_ctx
def paths(ctx: Context) -> None:
    """Where the installed package keeps what a deployment points at: the spark-submit application,
    the Airflow DAG folder, and the config file in use (if any)."""
    from lakecleaner.orchestration.dags import dags_folder
    from lakecleaner.spark_jobs import compact_topic_path

    found = find_config(ctx.config_path)
    data = {
        "compact_job": str(compact_topic_path()),
        "dags_folder": str(dags_folder()),
        "config": None if found is None else str(found),
    }
    lines = "\n".join(f"{k}: {v}" for k, v in data.items())
    ctx.emit(data, lambda: console.print(lines, markup=False, highlight=False))


def write_sample_config(path: Path) -> Path:
    """Write the sample config to `path` with an absolute lake URI (the folder `lake` beside it)."""
    path = path.resolve()
    if path.exists():
        raise click.ClickException(f"{path} exists; remove it or choose another path")
    lake = path.parent / "lake"
    text = sample_config_text().replace("uri: file://./lake", f"uri: file://{lake}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# -- a Spark Connect server -------------------------------------------------------------------
@cli.group("connect-server")
def connect_server() -> None:
    """A Spark Connect server for compaction runs (pyspark's bundled one, set up for lakecleaner)."""


_SERVER_FOLDER = click.option(
    "--folder",
    default=".spark-connect",
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the server keeps its logs and pid.",
)


@connect_server.command("start")
@_SERVER_FOLDER
@click.option("--port", default=15002, show_default=True, type=click.IntRange(1, 65535))
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (0.0.0.0 for all).")
@click.option("--master", default="local[*]", show_default=True, help="Spark master the server runs on.")
@click.option("--conf", "pairs", multiple=True, help="Extra Spark setting, key=value (repeatable).")
@click.option("--foreground", is_flag=True, help="Run in this process's place (a container's main process).")
def connect_server_start(
    folder: Path, port: int, host: str, master: str, pairs: tuple[str, ...], foreground: bool
) -> None:
    """Start the server and wait until it listens; prints its URL (for spark.remote / --remote)."""
    from lakecleaner.engine.connect_server import ConnectServer

    conf = {key: str(value) for key, value in parse_config_pairs(pairs).items()}
    server = ConnectServer(folder.resolve(), port=port, master=master, host=host, conf=conf)
    if foreground:
        server.run_foreground()
    click.echo(server.start())


@connect_server.command("stop")
@_SERVER_FOLDER
def connect_server_stop(folder: Path) -> None:
    """Stop the server started with this folder."""
    from lakecleaner.engine.connect_server import ConnectServer

    ConnectServer(folder.resolve()).stop()


# -- the main job ------------------------------------------------------------------------------
@cli.command()
@click.option("--records", default=200_000, show_default=True, help="Records in the CDC topic.")
@click.option(
    "--airflow-home",
    default="airflow_home",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Where the embedded Airflow keeps its SQLite database and logs.",
)
@click.option("--no-airflow", is_flag=True, help="Only build the sample topics and show their status.")
@click.option(
    "--reset",
    is_flag=True,
    help="Delete and rebuild the sample topics even in a lake that holds what the demo did not create "
    "(other topics and every consumer group's offsets are still left alone).",
)
@click.option(
    "--spark-remote",
    help="Run the compact tasks on this Spark Connect server (sc://host:port; the Airflow connection "
    "spark_lakecleaner becomes a spark_connect one) instead of spark-submit to local Spark.",
)
@pass_ctx
def demo(
    ctx: Context, records: int, airflow_home: str, no_airflow: bool, reset: bool, spark_remote: str | None
) -> None:
    """The main job: build the sample topics, run both topics' DAGs in Airflow, summarise.

    Without a config file (--config, $LAKECLEANER_CONFIG, ./lakecleaner.yaml) it writes the sample
    one to ./lakecleaner.yaml first and says so (--lake still chooses the lake). It rebuilds the
    sample topics of an earlier demo; in a lake that holds anything else it changes nothing unless
    told --reset."""
    from lakecleaner import demo as job

    if find_config(ctx.config_path) is None:
        sample = write_sample_config(Path(LOCAL_CONFIG))
        err_console.print(f"wrote the sample config to {sample}", markup=False, highlight=False)
    job.check_sample_topics(ctx.config)
    lake = ctx.lake
    foreign = job.foreign_content(lake)
    if foreign and not reset:
        raise LakeCleanerError(
            f"the lake {lake.uri} holds what no demo created: {'; '.join(foreign[:5])}"
            f"{f' (and {len(foreign) - 5} more)' if len(foreign) > 5 else ''}. The demo would delete and rebuild "
            f"the sample topics {job.CDC_TOPIC} and {job.EVENTS_TOPIC} ({job.sample_object_count(lake)} objects) "
            "and their run reports. Nothing was changed: point it at a lake of its own (--lake file:///tmp/demo-lake), "
            "or pass --reset to rebuild the sample topics here (other topics and every consumer group's offsets are "
            "left alone)"
        )
    job.reset_sample_topics(lake)
    sizes = job.DemoSizes(cdc_records=records, cdc_keys=max(1, records // 10), event_records=max(1, records // 2))
    now = wall_clock_ms() // job.HOUR_MS * job.HOUR_MS
    err_console.print(f"lake: {lake.uri}")
    written = job.build_sample_topics(lake, sizes, now_ms=now)
    err_console.print(f"produced {written}")
    if no_airflow:
        show_status(ctx, [job.CDC_TOPIC, job.EVENTS_TOPIC])
        return
    before = {t: job.topic_snapshot(lake, t) for t in (job.CDC_TOPIC, job.EVENTS_TOPIC)}
    _run_demo_dags(ctx, Path(airflow_home).resolve(), now, spark_remote)
    after = {t: job.topic_snapshot(lake, t) for t in before}
    runs = {t: job.run_summaries(lake, t) for t in before}
    sections = {t: job.summary_rows(before[t], after[t], runs[t]) for t in before}
    for topic, rows in sections.items():
        table = Table("figure", "before → after", title=f"topic {topic}")
        for row in rows:
            table.add_row(*row)
        console.print(table)
    page = job.render_html(lake.uri, sections, runs)
    lake.store.write("_lakecleaner/report.html", page.encode())
    console.print(f"HTML report: {lake.store.location('_lakecleaner/report.html')}", markup=False)


def _run_demo_dags(ctx: Context, airflow_home: Path, now: int, spark_remote: str | None) -> None:
    """Both DAGs at now and two hours later (tombstones stamped in the first run expire in the second)."""
    from lakecleaner import demo as job
    from lakecleaner.orchestration.compact_task import connection_of_url
    from lakecleaner.orchestration.local import DagRunRequest, DagRunResult, prepare_airflow, run_dags

    config_path = Path(ctx.config.source).resolve()
    env = {"LAKECLEANER_LAKE_URI": ctx.lake.uri}
    if spark_remote:
        env["AIRFLOW_CONN_SPARK_LAKECLEANER"] = json.dumps(connection_of_url(spark_remote))
        err_console.print("compact tasks: on the Spark Connect server of --spark-remote")
    airflow_home.mkdir(parents=True, exist_ok=True)
    err_console.print(f"airflow: {airflow_home} (SQLite)")
    prepare_airflow(airflow_home, config_path)
    requests = [
        DagRunRequest(f"lakecleaner__{topic}", job.iso(when))
        for when in (now, now + 2 * job.HOUR_MS)
        for topic in (job.CDC_TOPIC, job.EVENTS_TOPIC)
    ]
    err_console.print(f"running {len(requests)} DAG runs, one after another ...")

    def ended(request: DagRunRequest, result: DagRunResult) -> None:
        tasks = ", ".join(f"{t}={s}" for t, s in sorted(result.tasks.items()))
        err_console.print(f"  {request.dag_id} for {request.logical_date}: {result.state}: {tasks}")

    results = run_dags(airflow_home, config_path, requests, env=env, on_result=ended)
    if results[-1].state != "success":  # the runs stop at the first that fails
        failed = requests[len(results) - 1]
        raise LakeCleanerError(f"the DAG run {failed.dag_id} failed; its log:\n{results[-1].log[-3000:]}")


# -- helpers ----------------------------------------------------------------------------------
class _progress:
    """A rich progress bar on stderr (silent with --json)."""

    def __init__(self, ctx: Context, label: str, total: int) -> None:
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=err_console,
            disable=ctx.as_json,
        )
        self.label, self.total = label, total

    def __enter__(self) -> tuple[Progress, Any]:
        self.progress.start()
        return self.progress, self.progress.add_task(self.label, total=self.total)

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()


def _json_after_the_command(group: click.Group) -> None:
    """Every command takes `--json` after its name too (`lakecleaner status --json`), meaning what
    it means before the command (`lakecleaner --json status`)."""

    def set_json(ctx: click.Context, _: click.Parameter, value: bool) -> None:
        if value:
            ctx.find_object(Context).as_json = True  # type: ignore[union-attr]  # set by `cli` for every command

    for command in group.commands.values():
        if isinstance(command, click.Group):
            _json_after_the_command(command)
        else:
            command.params.append(
                click.Option(
                    ["--json"], is_flag=True, expose_value=False, is_eager=True, callback=set_json, help="Print JSON."
                )
            )


_json_after_the_command(cli)


def main() -> None:
    """Entry point: run the CLI, turning the project's errors into one clear message and exit 2;
    the process ends by `process.exit_flushed` (every command's I/O is done when it returns: its
    thread pools wait for their work)."""
    exit_flushed(_run())


def _run() -> int:
    """The CLI's exit status, its errors reported."""
    try:
        result = cli.main(standalone_mode=False)
    except SystemExit as exc:  # a command's own sys.exit (failed partitions: 1)
        return _status(exc.code)
    except click.exceptions.Abort:
        return 130
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except ConfigError as exc:
        click.echo("configuration error:", err=True)
        for problem in exc.problems:
            click.echo(f"  - {problem}", err=True)
        return 2
    except (LakeCleanerError, ValueError) as exc:
        click.echo(f"error: {exc}", err=True)
        return 2
    except ModuleNotFoundError as exc:
        extra = extra_providing(exc.name)
        if extra is None:
            raise
        click.echo(f"error: this command needs {exc.name}: pip install 'lakecleaner[{extra}]'", err=True)
        return 2
    return result if isinstance(result, int) else 0  # click returns an Exit's code (--help: 0)


def _status(code: object) -> int:
    """The exit status of a SystemExit's code, as the interpreter would make it."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    click.echo(str(code), err=True)
    return 1


#: The package extra that brings each optional top-level module (pyproject.toml).
EXTRAS = {
    "pyspark": "spark",
    "great_expectations": "quality",
    "pandas": "quality",
    "airflow": "airflow",
    "fastapi": "airflow",
    "jinja2": "airflow",
}


def extra_providing(module: str | None) -> str | None:
    """The extra to install for a missing module, if it is one an extra brings."""
    return EXTRAS.get((module or "").split(".")[0])


if __name__ == "__main__":
    main()


__all__ = ["cli", "main"]
