"""The main job on the embedded default (`make demo` / `lakecleaner demo`).

1. Builds the two sample topics of the config file in the local lake (fresh): a compacted CDC
   topic with updates, deletes, out-of-order producers and KIP-280 header versions, and a
   delete-policy topic with two consumer groups at different offsets and consumed retention on.
2. Runs both topics' DAGs in real Airflow (SQLite metadata DB, `dag.test()`), twice: at now,
   and two hours later, so tombstones stamped by the first pass expire in the second.
3. Prints a before/after summary (records, bytes, keys, tombstones stamped and removed,
   segments replaced by compaction and deleted by retention, quality results) and writes an HTML
   report with the dashboard's history charts and links to each run's reports and DAG run.
"""

from __future__ import annotations

import html
import json
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

import pyarrow as pa
import pyarrow.compute as pc

from lakecleaner.charts.history import history_charts, rendered
from lakecleaner.clock import wall_clock_ms
from lakecleaner.config import HOUR_MS, LONG_MAX, LakeConfig, TopicConfig
from lakecleaner.errors import ConfigError, LakeCleanerError
from lakecleaner.lake import Lake
from lakecleaner.offsets import OFFSETS_PREFIX
from lakecleaner.policy.text import format_timestamp_ms
from lakecleaner.runs.history import MAX_RUNS, history_points
from lakecleaner.runs.naming import dag_id_of
from lakecleaner.runs.records import AirflowRun, RunRecord, TopicRuns
from lakecleaner.runs.reports import runs_prefix
from lakecleaner.workload import WorkloadSpec, generate

CDC_TOPIC = "customers-cdc"
EVENTS_TOPIC = "page-views"


@dataclass(frozen=True)
class DemoSizes:
    cdc_records: int = 50_000
    cdc_keys: int = 5_000
    event_records: int = 25_000
    batch_records: int = 1_000

    @classmethod
    def of_records(cls, records: int) -> DemoSizes:
        """The sizes for `records` in the CDC topic: a key per ten records, half as many events."""
        return cls(cdc_records=records, cdc_keys=max(1, records // 10), event_records=max(1, records // 2))


def build_sample_topics(lake: Lake, sizes: DemoSizes = DemoSizes(), now_ms: int | None = None) -> dict[str, int]:
    """Create the two sample topics and fill them; returns records written per topic.

    Timestamps spread over the 48 hours before `now`, so that rolling, min/max compaction lag
    and time and consumed retention all have something to decide.
    """
    now = wall_clock_ms() if now_ms is None else now_ms
    specs = {
        CDC_TOPIC: WorkloadSpec(
            keys=sizes.cdc_keys,
            records=sizes.cdc_records,
            value_size=200,
            tombstone_share=0.08,
            out_of_order_share=0.05,
            start_ms=now - 48 * HOUR_MS,
            timestamp_spread_ms=47 * HOUR_MS,
            header_versions=True,
            header_name="version",
            malformed_header_share=0.001,
            seed=1,
            partitions=lake.create_topic(CDC_TOPIC, exist_ok=True, now_ms=now).partitions,
        ),
        EVENTS_TOPIC: WorkloadSpec(
            keys=sizes.event_records,
            records=sizes.event_records,
            value_size=120,
            tombstone_share=0.0,
            unkeyed_share=0.2,
            start_ms=now - 48 * HOUR_MS,
            timestamp_spread_ms=47 * HOUR_MS,
            seed=2,
            partitions=lake.create_topic(EVENTS_TOPIC, exist_ok=True, now_ms=now).partitions,
        ),
    }
    for name, spec in specs.items():
        topic = lake.topic(name)
        render = _customer if name == CDC_TOPIC else _page_view
        for ordinal, (partition, batch) in enumerate(generate(spec, batch_records=sizes.batch_records)):
            readable = with_readable_values(batch, ordinal * sizes.batch_records, render)
            topic.partition(partition).append(readable, now_ms=now)
    _commit_demo_offsets(lake, now)
    mark_sample_topics(lake)
    return {name: spec.records for name, spec in specs.items()}


_PLANS = ("free", "pro", "team")


def _customer(key: str | None, ordinal: int) -> dict[str, object]:
    """A CDC row image of a customer: what `consume` prints for the CDC topic."""
    return {
        "id": key,
        "email": f"{key}@example.com",
        "plan": _PLANS[ordinal % 3],
        "balance_cents": ordinal * 37 % 100_000,
    }


def _page_view(key: str | None, ordinal: int) -> dict[str, object]:
    """A click-stream event (its key a visitor, or none)."""
    return {"visitor": key, "page": f"/products/{ordinal * 7919 % 500}", "ms_on_page": ordinal * 131 % 60_000}


def with_readable_values(
    batch: pa.Table, first: int, render: Callable[[str | None, int], dict[str, object]]
) -> pa.Table:
    """`batch` with each value replaced by a small JSON document rendered from the record's key
    and its ordinal (`first` + row), so that `consume` prints text; tombstones (null values) stay
    null. The workload's values are random bytes, which is what the benchmarks want."""
    keys = batch.column("key").to_pylist()
    valued = pc.is_valid(batch.column("value")).to_pylist()
    documents = [
        json.dumps(render(None if key is None else key.decode(), first + row)).encode() if has_value else None
        for row, (key, has_value) in enumerate(zip(keys, valued, strict=True))
    ]
    index = batch.schema.get_field_index("value")
    return batch.set_column(index, batch.schema.field(index), pa.array(documents, pa.binary()))


def _commit_demo_offsets(lake: Lake, now: int) -> None:
    """Two groups on the events topic: analytics is at 90% of each partition, billing at 50%."""
    topic = lake.topic(EVENTS_TOPIC)
    ends = {p: m.next_offset for p, m in topic.manifests().items()}
    analytics, billing = DEMO_GROUPS
    lake.offsets.commit(analytics, EVENTS_TOPIC, {p: end * 9 // 10 for p, end in ends.items()}, now_ms=now)
    lake.offsets.commit(billing, EVENTS_TOPIC, {p: end // 2 for p, end in ends.items()}, now_ms=now)


def check_sample_topics(config: LakeConfig) -> None:
    """The demo builds the sample topics as the config file defines them: both must be there (a
    topic the file does not define would get Kafka's defaults, cleanup.policy=delete)."""
    missing = [t for t in (CDC_TOPIC, EVENTS_TOPIC) if t not in config.topics]
    if missing:
        raise ConfigError(
            [
                f"{config.source}: the demo needs the sample topics {', '.join(missing)}; run it where no "
                "config file is found (it writes the sample one), or start from `lakecleaner init`"
            ]
        )


#: What a demo built, so a later one knows what is its own to rebuild.
DEMO_MARKER = "_lakecleaner/demo.json"
DEMO_GROUPS = ("analytics", "billing")


def _sample_prefixes() -> tuple[str, ...]:
    return (f"topics/{CDC_TOPIC}/", f"topics/{EVENTS_TOPIC}/", runs_prefix(CDC_TOPIC), runs_prefix(EVENTS_TOPIC))


def _marked(lake: Lake) -> tuple[set[str], set[str]]:
    """The topics and consumer groups an earlier demo recorded as its own (none without a readable
    marker: what cannot be proven the demo's is not)."""
    try:
        raw = json.loads(lake.store.read(DEMO_MARKER))
        topics, groups = raw["topics"], raw["groups"]
        if isinstance(topics, list) and isinstance(groups, list):
            return {str(t) for t in topics}, {str(g) for g in groups}
    except (LakeCleanerError, ValueError, KeyError, TypeError, RecursionError):
        pass
    return set(), set()


def foreign_content(lake: Lake) -> list[str]:
    """What the lake holds that no demo created: a topic (the sample topics included) or a
    consumer group's offsets that the marker of an earlier demo does not name."""
    topics, groups = _marked(lake)
    found = [f"topic {t}" for t in lake.list_topics() if t not in topics]
    for obj in lake.store.list(OFFSETS_PREFIX):
        group = obj.key[len(OFFSETS_PREFIX) :].removesuffix(".json")
        if group not in groups:
            found.append(f"consumer group offsets {obj.key}")
    return found


def sample_object_count(lake: Lake) -> int:
    """How many objects rebuilding the sample topics deletes."""
    return sum(len(lake.store.list(prefix)) for prefix in _sample_prefixes())


def reset_sample_topics(lake: Lake) -> None:
    """Delete the sample topics and their run reports. Consumer groups' offsets are never deleted
    (a group's object may hold its offsets of other topics); the demo commits its groups' offsets
    of the rebuilt topic again."""
    for prefix in _sample_prefixes():
        lake.store.delete_many([obj.key for obj in lake.store.list(prefix)])
    if any(lake.config.iceberg_enabled(t) for t in (CDC_TOPIC, EVENTS_TOPIC)):
        from lakecleaner.iceberg.sync import drop_tables

        for topic in (CDC_TOPIC, EVENTS_TOPIC):
            drop_tables(lake, topic)


def mark_sample_topics(lake: Lake) -> None:
    """Record what the demo built (`foreign_content` reads it)."""
    body = {"topics": [CDC_TOPIC, EVENTS_TOPIC], "groups": list(DEMO_GROUPS), "written_ms": wall_clock_ms()}
    lake.store.write(DEMO_MARKER, json.dumps(body).encode())


def iceberg_lines(lake: Lake) -> list[str]:
    """How to read the sample topics' tables with pyiceberg, in three lines (none when the lake
    keeps no tables)."""
    if not lake.config.iceberg_enabled(CDC_TOPIC):
        return []
    from lakecleaner.iceberg.catalog import CATALOG_NAME, catalog_properties
    from lakecleaner.iceberg.naming import table_name
    from lakecleaner.iceberg.shown import shown

    properties = {
        k: v for k, v in shown(catalog_properties(lake.config, lake.store.root_uri)).items() if k != "warehouse"
    }
    namespace = lake.config.iceberg.namespace
    return [
        "from pyiceberg.catalog import load_catalog",
        f"catalog = load_catalog({CATALOG_NAME!r}, **{properties!r})",
        f"catalog.load_table({namespace + '.' + table_name(CDC_TOPIC)!r}).scan().to_arrow()"
        f"  # and {namespace + '.' + table_name(CDC_TOPIC) + '_latest'!r}",
    ]


def topic_snapshot(lake: Lake, name: str) -> dict[str, int]:
    """Records, bytes, segments, distinct keys and tombstones of a topic's committed log."""
    out = {"records": 0, "bytes": 0, "segments": 0, "keys": 0, "tombstones": 0}
    for log in lake.topic(name).partition_logs():
        manifest = log.manifest()
        table = log.read(columns=["key", "value"], manifest=manifest)
        out["records"] += table.num_rows
        out["bytes"] += manifest.size_bytes
        out["segments"] += len(manifest.segments)
        out["keys"] += len(pc.unique(table.column("key").drop_null()))
        out["tombstones"] += sum(s.tombstone_count for s in manifest.segments)
    return out


def topic_runs(lake: Lake, name: str, airflow_runs: list[AirflowRun]) -> list[RunRecord]:
    """The topic's runs with their reports, joined with the DAG runs the demo made, oldest first."""
    return TopicRuns(lake.store, name, airflow_runs, lake.config.storage.max_concurrency).since(0, MAX_RUNS)


def deleted_key(lake: Lake) -> str | None:
    """A key of the CDC topic's partition 0 whose record in the log is a tombstone (the first
    such), else the partition's first key: what `audit key` is first tried on. None when the
    partition holds no key that is UTF-8 text."""
    table = lake.topic(CDC_TOPIC).partition(0).read(columns=["key", "value"])
    keys = table.column("key")
    tombstones = keys.filter(pc.and_(pc.is_null(table.column("value")), pc.is_valid(keys)))
    for key in [*tombstones.slice(0, 1).to_pylist(), *keys.drop_null().slice(0, 1).to_pylist()]:
        try:
            return bytes(key).decode()
        except UnicodeDecodeError:
            continue
    return None


def next_commands(invocation: str, key: str | None) -> list[str]:
    """What the demo's last lines suggest trying, as commands that run where the demo ran:
    `invocation` is how lakecleaner was started there (`demo_invocation`), `key` a deleted key of
    the CDC topic (`deleted_key`)."""
    tried = [
        ("plan --all", "every topic: what is due, the nearest deadline"),
        (f"consume --topic {CDC_TOPIC} --partition 0 | head", "the compacted log, record by record"),
    ]
    if key is not None:
        tried.append((f"audit key --topic {CDC_TOPIC} --key {shlex.quote(key)}", "every stored copy of a deleted key"))
    width = max(len(command) for command, _ in tried)
    return [f"{invocation} {command.ljust(width)}   # {why}" for command, why in tried]


def demo_invocation(under_uv: bool, config: str | None, lake_uri: str | None) -> str:
    """How to start lakecleaner where the demo ran: through `uv run` when the demo was (the
    project's environment is then not the shell's), with the --config and --lake the demo was
    given on its command line (a config found as ./lakecleaner.yaml or named by
    $LAKECLEANER_CONFIG is found again)."""
    words = ["uv run lakecleaner" if under_uv else "lakecleaner"]
    if config is not None:
        words.append(f"--config {shlex.quote(config)}")
    if lake_uri is not None:
        words.append(f"--lake {shlex.quote(lake_uri)}")
    return " ".join(words)


def summary_rows(before: dict[str, int], after: dict[str, int], runs: list[RunRecord]) -> list[tuple[str, str]]:
    """The before → after lines of one topic, plus what the runs did: segments replaced by
    compaction and segments deleted by retention are counted apart."""
    rows = [(k, f"{before[k]:,} → {after[k]:,}") for k in ("records", "bytes", "segments", "keys", "tombstones")]
    stamped = removed = superseded = replaced = written = 0
    rules: dict[str, int] = {}
    quality: list[str] = []
    for run in runs:
        summary = run.summary or {}
        for p in (summary.get("compaction") or {}).get("partitions") or []:
            stamped += p["stats"]["tombstones_stamped"]
            removed += p["stats"]["tombstones_removed"]
            superseded += p["stats"]["records_superseded"]
            replaced += int(p.get("segments_replaced") or 0)
            written += int(p.get("segments_written") or 0)
            if p.get("quality"):
                quality.append(
                    f"compaction p{p.get('partition')}: {'passed' if p['quality'].get('success') else 'FAILED'}"
                )
        for p in (summary.get("retention") or {}).get("partitions") or []:
            for rule, counts in (p.get("deleted_by_rule") or {}).items():
                rules[rule] = rules.get(rule, 0) + int(counts["segments"])
            if p.get("quality"):
                quality.append(f"retention p{p['partition']}: {'passed' if p['quality'].get('success') else 'FAILED'}")
    rows += [
        ("records dropped as superseded", f"{superseded:,}"),
        ("tombstones stamped", f"{stamped:,}"),
        ("tombstones removed", f"{removed:,}"),
        ("segments replaced by compaction", f"{replaced:,} (by {written:,} cleaned segments)" if replaced else "none"),
        ("segments deleted by retention", ", ".join(f"{n:,} by {r}" for r, n in rules.items()) or "none"),
        ("quality checks", "; ".join(sorted(set(quality))) or "none ran"),
    ]
    return rows


#: The demo's two DAG runs are this far apart (tombstones stamped in the first expire in the second);
#: the second runs at the hour before the demo starts, so that both are in the past.
RUN_GAP_MS = 2 * HOUR_MS


def demo_times(wall_ms: int) -> tuple[int, int]:
    """The "now" of the demo's first and second runs: the second at the last full hour at or before
    `wall_ms` (a run is never in the future: the dashboard's default range ends at now)."""
    second = wall_ms // HOUR_MS * HOUR_MS
    return second - RUN_GAP_MS, second


def airflow_url(environ: Mapping[str, str]) -> str:
    """Where Airflow's UI is, for the report's links: Airflow's own `[api] base_url`
    (AIRFLOW__API__BASE_URL), else where `make airflow-ui` serves it (127.0.0.1, AIRFLOW_UI_PORT or 8080)."""
    base = environ.get("AIRFLOW__API__BASE_URL") or f"http://127.0.0.1:{environ.get('AIRFLOW_UI_PORT') or 8080}"
    return base.rstrip("/")


def run_links(topic: str, run: RunRecord, airflow: str) -> list[tuple[str, str]]:
    """(label, href) of a run's reports, relative to the report page (`_lakecleaner/report.html`),
    and of its DAG run in the Airflow UI at `airflow`."""
    links = [(f"{name}.json", f"runs/{quote(topic)}/{quote(run.run_id)}/{name}.json") for name in run.reports]
    if run.airflow is not None:
        dag_run = f"{airflow}/dags/{quote(dag_id_of(topic), safe='')}/runs/{quote(run.airflow.run_id, safe='')}"
        links.append(("DAG run in Airflow", dag_run))
    return links


def topic_charts(runs: list[RunRecord], compacted: bool, min_cleanable_ratio: float) -> list[str]:
    """The dashboard's history charts of the topic (`charts/history.py`) over its runs."""
    points = history_points(runs)
    if not points:
        return []
    start = min(p.time_ms for p in points) - 10 * 60_000
    end = max(p.time_ms for p in points) + 10 * 60_000
    return rendered(history_charts(points, None, start, end, compacted, min_cleanable_ratio))


def deadline_notes(runs: list[RunRecord], config: TopicConfig) -> list[str]:
    """Why the demo's deletion deadlines were overdue when they were (the history's points, by
    phase): the sample data is loaded up to 48 hours old at once, past max.compaction.lag.ms; the
    tombstones a run stamps are due delete.retention.ms later, and the demo's next run comes
    RUN_GAP_MS later. Said from the points, never assumed: an overdue point after a run is said too."""
    points = [p for p in history_points(runs) if p.partition is None and p.nearest_deadline_ms is not None]
    overdue = {p.phase for p in points if (p.nearest_deadline_ms or 0) < p.time_ms}
    notes = []
    if "before" in overdue:
        bounded = config.max_compaction_lag_ms < LONG_MAX
        lag = f" (max.compaction.lag.ms {config.max_compaction_lag_ms / HOUR_MS:g} h)" if bounded else ""
        notes.append(
            f"Overdue before a run: the sample data is loaded up to 48 h old at once, older than its deadline{lag}; "
            f"and tombstones a run stamps are due delete.retention.ms ({config.delete_retention_ms / HOUR_MS:g} h) "
            "later, "
            f"while the demo's next run comes {RUN_GAP_MS // HOUR_MS} h later."
        )
    if "after" in overdue:
        notes.append("Still overdue after a run: see the topic's partitions with `lakecleaner audit topic`.")
    elif points:
        notes.append("After each run, no deletion deadline was overdue.")
    return notes


@dataclass(frozen=True)
class TopicReport:
    """One topic's section of the report; `notes`: why its deadlines were overdue, if they were."""

    rows: list[tuple[str, str]]
    runs: list[RunRecord]
    charts: list[str]
    notes: list[str] = field(default_factory=list)


def render_html(lake_uri: str, topics: dict[str, TopicReport], airflow: str) -> str:
    """A self-contained HTML page of the summary (no external assets): per topic its figures before
    and after, its history charts, and each run with how long it took, its outcome and links (to
    the Airflow UI at `airflow`)."""
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>lakecleaner run report</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin-bottom:2em}"
        "td,th{border:1px solid #ccc;padding:4px 10px;text-align:left}th{background:#eee}"
        ".chart-box svg{max-width:100%;height:auto}</style></head><body>",
        f"<h1>lakecleaner run report</h1><p>lake: <code>{html.escape(lake_uri)}</code></p>",
    ]
    for topic, section in topics.items():
        parts.append(f"<h2>{html.escape(topic)}</h2><table><tr><th>figure</th><th>before → after</th></tr>")
        parts += [f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>" for k, v in section.rows]
        parts.append("</table>")
        parts += [f"<div class='chart-box'>{svg}</div>" for svg in section.charts]
        parts += [f"<p class='deadline-note'>{html.escape(note)}</p>" for note in section.notes]
        parts.append("<h3>runs</h3><ul>")
        for run in section.runs:
            now = "" if run.now_ms is None else f" at {html.escape(format_timestamp_ms(run.now_ms))}"
            took = "–" if run.duration_s is None else f"{run.duration_s:,.0f} s"
            links = ", ".join(
                f"<a href='{html.escape(href)}'>{html.escape(label)}</a>"
                for label, href in run_links(topic, run, airflow)
            )
            parts.append(
                f"<li><code>{html.escape(run.run_id)}</code>{now}, took <span class='took'>{took}</span>: "
                f"{html.escape(run.result)}"
                f"{' (' + links + ')' if links else ''}</li>"
            )
        parts.append("</ul>")
    parts.append(
        f"<p>The Airflow links work while <code>make airflow-ui</code> serves the demo's Airflow at "
        f"{html.escape(airflow)}.</p>"
    )
    parts.append("</body></html>")
    return "".join(parts)


def produced_line(written: dict[str, int]) -> str:
    """ "produced 50,000 records to customers-cdc and 25,000 to page-views"."""
    first, *rest = written.items()
    more = "".join(f" and {n:,} to {t}" for t, n in rest)
    return f"produced {first[1]:,} records to {first[0]}{more}"


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat()


def html_report_path(lake: Lake) -> Path | None:
    """Where the HTML report goes: inside a local lake; None for an S3 lake (it is stored there)."""
    return Path(lake.store.arrow_path("_lakecleaner/report.html")) if lake.uri.startswith("file://") else None
