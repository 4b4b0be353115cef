"""What each task of a topic's DAG does (DESIGN section 6).

"now" for every decision is the run's `data_interval_end`, passed in by the DAG, so a scheduled
run, a manual trigger and a backfill of the same interval decide the same, and a backfill never
deletes more than the run at that time would have.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from lakecleaner.clock import wall_clock_ms
from lakecleaner.config import LakeConfig
from lakecleaner.errors import InvalidRunParams, LakeCleanerError, ObjectNotFound
from lakecleaner.extras import open_lake
from lakecleaner.io import ObjectStore
from lakecleaner.io.concurrent import map_ordered
from lakecleaner.lake import Lake, PartitionManifests, Topic, failure_runs, partitions_label
from lakecleaner.log.manifest import Manifest
from lakecleaner.policy import plan_topic
from lakecleaner.policy.figures import partition_figures
from lakecleaner.policy.plan import TopicPlan
from lakecleaner.policy.roll import apply_roll, plan_roll
from lakecleaner.retention import gc_topic, retain_topic
from lakecleaner.runs.outcome import partitions_of, statuses
from lakecleaner.runs.reports import load_report, store_report
from lakecleaner.runs.times import run_times


@dataclass(frozen=True)
class RunParams:
    """The UI trigger parameters, validated."""

    dry_run: bool = False
    force: bool = False
    partitions: tuple[int, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "force": self.force,
            "partitions": None if self.partitions is None else list(self.partitions),
        }


def parse_run_params(raw: Mapping[str, Any], partition_count: int) -> RunParams:
    """Validate `dry_run`, `force` (booleans) and `partitions` (empty / null = all; a list of
    partition numbers or a comma-separated string of them, each < the topic's partition count)."""
    problems = []
    flags = {}
    for name in ("dry_run", "force"):
        value = raw.get(name, False)
        if not isinstance(value, bool):
            problems.append(f"parameter {name}={value!r} must be true or false")
            value = False
        flags[name] = value
    partitions = _parse_partitions(raw.get("partitions"), partition_count, problems)
    unknown = sorted(set(raw) - {"dry_run", "force", "partitions"})
    if unknown:
        problems.append(f"unknown parameter(s) {', '.join(unknown)}; use dry_run, force, partitions")
    if problems:
        raise InvalidRunParams("invalid trigger parameters: " + "; ".join(problems))
    return RunParams(flags["dry_run"], flags["force"], partitions)


def _parse_partitions(value: object, count: int, problems: list[str]) -> tuple[int, ...] | None:
    if value is None or value == "" or value == []:
        return None
    items: list[object]
    if isinstance(value, str):
        items = [v.strip() for v in value.split(",") if v.strip()]
    elif isinstance(value, list):
        items = list(value)
    else:
        problems.append(f"parameter partitions={value!r} must be a list of partition numbers like [0, 2] or '0,2'")
        return None
    parsed = []
    for item in items:
        number = (
            int(item)
            if isinstance(item, int) and not isinstance(item, bool)
            else (int(item) if isinstance(item, str) and item.isdigit() else None)
        )
        if number is None or not 0 <= number < count:
            problems.append(f"parameter partitions: {item!r} is not a partition of this topic (0..{count - 1})")
            continue
        parsed.append(number)
    return tuple(sorted(set(parsed))) if parsed else None


def assess(config: LakeConfig, topic_name: str, now_ms: int, raw_params: Mapping[str, Any]) -> dict[str, Any]:
    """Validate the trigger parameters, roll idle active segments (★ KIP-354 for silent
    partitions; not in a dry run), plan the topic, and return which partitions to compact and why,
    and which are skipped as uncleanable (a failed compaction, Kafka's uncleanable partitions), with
    each partition's figures (`PartitionFigures`, which the dashboard's history charts draw) and
    when it started (`runs.times`).
    A partition whose manifest cannot be read is left out of the plan and listed in `unreadable`
    with the reason (the report fails the run for it); the others are planned as usual."""
    started_ms = wall_clock_ms()
    lake = open_lake(config)
    topic = lake.topic(topic_name)
    params = parse_run_params(raw_params, topic.partitions)
    read = topic.read_manifests(params.partitions or None)
    unreadable = dict(read.failures)
    manifests = read.manifests
    rolled: list[int] = []
    if not params.dry_run:
        manifests, rolled, failed = roll_idle(topic, read, now_ms, lake.config.storage.max_concurrency)
        unreadable.update(failed)
    plan = _plan(lake, topic, manifests, now_ms, force=params.force)
    selected = list(plan.selection.selected)
    reasons = {str(p.partition): p.compaction.reason for p in plan.partitions}
    uncleanable = {str(p.partition): p.compaction.reason for p in plan.partitions if p.compaction.uncleanable}
    return {
        "topic": topic_name,
        "now_ms": now_ms,
        "started_ms": started_ms,
        "params": params.to_dict(),
        "rolled": rolled,
        "selected": selected,
        "reasons": reasons,
        "unreadable": {partitions_label(first, last): reason for first, last, reason in failure_runs(unreadable)},
        "uncleanable": uncleanable,
        "metrics": plan.metrics.to_dict(),
        "figures": [partition_figures(p, manifests[p.partition]).to_dict() for p in plan.partitions],
    }


def _plan(lake: Lake, topic: Topic, manifests: Mapping[int, Manifest], now_ms: int, *, force: bool) -> TopicPlan:
    """The topic's plan at `now_ms` on `manifests`, with its consumer groups' positions (when
    consumed retention is on) and the cleaner's state."""
    consumed = {}
    if topic.config.consumed_retention_enabled:
        consumed = lake.offsets.consumed_positions(topic.name, sorted(manifests))
    cleaner = lake.cleaner_state.read(topic.name)
    return plan_topic(topic.name, manifests, topic.config, consumed, now_ms, force=force, cleaner=cleaner)


def figures_after(lake: Lake, topic_name: str, assessed: Mapping[str, Any]) -> dict[str, Any]:
    """The `after` part of a run's summary: the figures of the partitions the run assessed as
    they are when it ends, planned at the run's "now" (issue 78: a history point shows what the
    run left, not only what it found); the error instead when they cannot be read."""
    topic = lake.topic(topic_name)
    planned = [int(f["partition"]) for f in assessed.get("figures") or []]
    try:
        manifests = topic.read_manifests(planned).manifests if planned else {}
        plan = _plan(lake, topic, manifests, int(assessed["now_ms"]), force=False)
    except LakeCleanerError as exc:
        return {"error": str(exc)}
    return {"figures": [partition_figures(p, manifests[p.partition]).to_dict() for p in plan.partitions]}


def roll_idle(
    topic: Topic, read: PartitionManifests, now_ms: int, concurrency: int
) -> tuple[dict[int, Manifest], list[int], dict[int, str]]:
    """Roll every partition whose active segment is due (★ KIP-354 for silent partitions), each
    by its own conditional commit, concurrently, starting from the manifest `read` holds (one PUT
    a partition when nothing changed since); only the partitions due are written to. Returns the
    manifests after the rolls, the partitions rolled, and why a roll failed."""
    manifests = read.manifests
    due = [p for p, m in manifests.items() if plan_roll(m, topic.config, now_ms).roll]

    def roll(p: int) -> Manifest | LakeCleanerError:
        def roll_if_idle(manifest: Manifest) -> Manifest | None:
            return apply_roll(manifest, now_ms) if plan_roll(manifest, topic.config, now_ms).roll else None

        try:
            return topic.partition(p).commit(roll_if_idle, known=read.known(p))
        except LakeCleanerError as exc:
            return exc

    after = dict(manifests)
    failed: dict[int, str] = {}
    for p, result in zip(due, map_ordered(roll, due, concurrency), strict=True):
        if isinstance(result, Manifest):
            after[p] = result
        else:
            failed[p] = str(result)
            del after[p]
    rolled = [p for p in due if p in after and after[p].version != manifests[p].version]
    return after, rolled, failed


def retention(
    config: LakeConfig, topic_name: str, now_ms: int, params: Mapping[str, Any], run_id: str
) -> dict[str, Any]:
    lake = open_lake(config)
    dry_run = bool(params.get("dry_run"))
    report = retain_topic(lake, topic_name, now_ms, partitions=_subset(params), dry_run=dry_run, run_id=run_id)
    return step_digest(report.to_dict(), report.location)


def physical_deletion(
    config: LakeConfig, topic_name: str, now_ms: int, params: Mapping[str, Any], run_id: str
) -> dict[str, Any]:
    report = gc_topic(open_lake(config), topic_name, now_ms, partitions=_subset(params), run_id=run_id)
    return step_digest(report.to_dict(), report.location)


#: The report each step stores in the run's folder (a dry run's retention stores none).
MIRROR_REPORT, ADOPT_REPORT = "mirror", "adopt"
STEP_REPORTS = {"retention": "retention", "physical_deletion": "gc", "mirror": MIRROR_REPORT, "adopt": ADOPT_REPORT}


def step_digest(report: Mapping[str, Any], location: str | None) -> dict[str, Any]:
    """What a step's task hands on (XCom): its report less the partitions' entries, which grow
    with the topic (1.8 MB of retention at 1,000 partitions), with how many there were (by status
    where they have one), and where the whole report is (the report task reads it from there:
    `gather`). A report stored nowhere (a dry run's retention) is handed on whole."""
    if location is None:
        return {**report, "location": None}
    head = {key: value for key, value in report.items() if key != "partitions"}
    entries = partitions_of(report)
    counted = {"statuses": statuses(report)} if any("status" in e for e in entries) else {}
    return {**head, "partition_count": len(entries), **counted, "location": location}


def gather(config: LakeConfig, topic_name: str, run_id: str, pushed: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of the run's summary: what its tasks handed on (`pushed`: assess,
    compaction_gate, retention, physical_deletion), with the steps' whole reports read from the
    run's folder (`_step_report`) and the compaction job's report, over one store."""
    store = open_lake(config).store
    parts = dict(pushed)
    for step, name in STEP_REPORTS.items():
        if step in parts:  # a task of the DAG (a topic without `mirror:` has no mirror task)
            parts[step] = _step_report(store, topic_name, run_id, name, parts[step])
    parts["compaction"] = _compaction_report(store, topic_name, run_id)
    return parts


def _step_report(
    store: ObjectStore, topic_name: str, run_id: str, name: str, digest: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """A step's whole report, read from the run's folder, for the run's summary (or as handed on,
    when it was stored nowhere); for a step whose task failed after it stored its report (a mirror
    whose partitions failed), the stored report; None when the step did not run (its task failed
    before storing one, or was skipped)."""
    if digest is None:
        try:
            return load_report(store, topic_name, run_id, name)
        except ObjectNotFound:
            return None
    if digest.get("location") is None:  # handed on whole
        return dict(digest)
    return {**load_report(store, topic_name, run_id, name), "location": digest.get("location")}


def _subset(params: Mapping[str, Any]) -> list[int] | None:
    partitions = params.get("partitions")
    return list(partitions) if partitions else None


def mirror(config: LakeConfig, topic_name: str, run_id: str) -> dict[str, Any]:
    """The DAG's `mirror` task: the Kafka topic's new records into the lake, up to the high
    watermarks seen at its start and for at most `mirror.max_seconds` (a scheduled run ends); the
    report, with each partition's lag to the cluster and outcome and when the task started, stored
    in the run's folder (with `location`), so that the run's summary has it also when partitions
    failed. A run the mirror refused as a whole (another Kafka topic, a cluster that refuses the
    client) stores its error, then raises it."""
    from lakecleaner.kafka.mirror import MirrorLimits, mirror_topic

    started = {"started_ms": wall_clock_ms()}
    lake = open_lake(config)
    spec = config.topics[topic_name].mirror
    assert spec is not None, "the DAG has a mirror task only for a topic with mirror:"
    try:
        mirrored = mirror_topic(lake, topic_name, MirrorLimits(once=True, max_seconds=spec.max_seconds))
    except LakeCleanerError as exc:
        failed = {"topic": topic_name, "error": str(exc), **started}
        store_report(lake.store, topic_name, run_id, MIRROR_REPORT, failed)
        raise
    report = {**mirrored.to_dict(), **started}
    return {**report, "location": store_report(lake.store, topic_name, run_id, MIRROR_REPORT, report)}


def adopt(config: LakeConfig, topic_name: str, run_id: str) -> dict[str, Any]:
    """The DAG's `adopt` task: what Kafka Connect's S3 sink wrote of the topic since the last run,
    appended at the records' offsets (issue 49); the report, with when the task started, stored in
    the run's folder (with `location`) so that the run's summary has it also when a partition
    stopped (the DAG fails the task then, after the others were adopted: `adopt_failures`)."""
    from lakecleaner.adopt.connect import adopt_connect

    started_ms = wall_clock_ms()
    spec = config.topics[topic_name].adopt
    assert spec is not None, "the DAG has an adopt task only for a topic with adopt:"
    lake = open_lake(config)
    report = {**adopt_connect(lake, topic_name, spec).to_dict(), "started_ms": started_ms}
    return {**report, "location": store_report(lake.store, topic_name, run_id, ADOPT_REPORT, report)}


def summarise(config: LakeConfig, topic_name: str, run_id: str, parts: Mapping[str, Any]) -> dict[str, Any]:
    """The run's summary (assessment, compaction, retention, gc, the figures after the run and when
    it ran: `figures_after`, `runs.times`) stored as run.json, and the run's
    "now" kept in the topic's cleaner state (the latest one: a backfill does not move it back), by
    which the erasure audit sees whether the DAG still runs."""
    lake = open_lake(config)
    summary = {"topic": topic_name, "run_id": run_id, **parts}
    if config.iceberg_enabled(topic_name) and not ((parts.get("assess") or {}).get("params") or {}).get("dry_run"):
        summary["iceberg"] = iceberg_sync(lake, topic_name)
    if parts.get("assess"):
        summary["after"] = figures_after(lake, topic_name, parts["assess"])
    summary["times"] = run_times(parts, wall_clock_ms())
    summary["location"] = store_report(lake.store, topic_name, run_id, "run", summary)
    now_ms = (parts.get("assess") or {}).get("now_ms")
    if now_ms is not None:
        lake.cleaner_state.update(
            topic_name, lambda s: replace(s, last_dag_run_ms=max(s.last_dag_run_ms or now_ms, now_ms))
        )
    from lakecleaner.summaries.refresh import refresh_after_change

    refresh_after_change(lake, topic_name)
    return summary


def iceberg_sync(lake: Lake, topic_name: str) -> dict[str, Any]:
    """Each run catches the topic's Iceberg table up with its manifests (issue 48): what the
    sync did, or the error (which fails the run: the table is a promise to its readers)."""
    try:
        from lakecleaner.iceberg.follow import sync_topic

        return sync_topic(lake, topic_name).to_dict()
    except Exception as exc:  # reported in run.json and failing the run, not lost in a task log
        return {"error": f"{type(exc).__name__}: {exc}"}


COMPACTION_REPORT = "report"


def _compaction_report(store: ObjectStore, topic_name: str, run_id: str) -> dict[str, Any] | None:
    """The compaction job's report for this run, or None when compaction did not run."""
    try:
        return load_report(store, topic_name, run_id, COMPACTION_REPORT)
    except ObjectNotFound:
        return None
