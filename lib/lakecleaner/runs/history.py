"""A topic's history: its figures at each run, from the run reports the lake keeps (issue 51).

Kafka users read the cleaner's gauges as time series (JMX into Grafana); the dashboard draws the
same from the reports: each DAG run's assessment stores every partition's figures
(`policy.figures.PartitionFigures`) at the run's "now", and its report task the figures after the
run (issue 78), so a run is two points: the state it found ("before", at its "now") and the state
it left ("after", at its "now" plus its duration, `runs.times`). A topic's point sums
sizes, records and tombstones over its partitions, takes the highest dirty ratio (Kafka's
max-dirty-percent) and the nearest deadline. Runs older than `lake.report_retention_days` are
pruned by gc, so reading a range costs one listing of the topic's runs plus the reports in it
(`TopicRuns.since`), bounded by MAX_RUNS however long the topic has run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from lakecleaner.config import DAY_MS
from lakecleaner.policy.figures import PartitionFigures
from lakecleaner.runs.records import RunRecord, TopicRuns

#: The most runs one history reads: 30 days of runs every 15 minutes, and then some.
MAX_RUNS = 3000
#: The ranges a topic's or partition's page offers (`?range=`), in ms.
HistoryRange = Literal["24h", "7d", "30d"]
RANGES: dict[HistoryRange, int] = {"24h": DAY_MS, "7d": 7 * DAY_MS, "30d": 30 * DAY_MS}
DEFAULT_RANGE: HistoryRange = "7d"


#: Which state of its run a point shows: what the run found, or what it left.
Phase = Literal["before", "after"]


@dataclass(frozen=True)
class HistoryPoint:
    """A topic's (`partition` None) or a partition's figures before or after one run (`phase`), at
    `time_ms`, with the run's duration (from its own report, None when unknown) and outcome. A run
    whose report has no figures (written before issue 51, or by a command-line run) has a topic
    point with what its report does say."""

    time_ms: int
    partition: int | None
    dirty_ratio: float | None
    size_bytes: int | None
    records: int | None
    tombstones: int | None
    nearest_deadline_ms: int | None
    run_id: str
    duration_s: float | None
    outcome: str
    mirror_lag: int | None = None
    phase: Phase = "before"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_outcome(record: RunRecord) -> str:
    """A run's outcome in one word: failed, dry-run, ok, or Airflow's state while it runs."""
    if record.error is not None or record.failures:
        return "failed"
    if record.airflow is not None and record.airflow.state not in {"success", "failed"}:
        return record.airflow.state
    if record.airflow is not None and record.airflow.state == "failed":
        return "failed"
    return "dry-run" if record.params.get("dry_run") else "ok"


def stored_figures(record: RunRecord, phase: Phase = "before") -> list[PartitionFigures] | None:
    """The partition figures a run stored before it changed anything (its assessment's) or after
    (its report task's); None for a report without them; ValueError for figures of a shape no
    writer makes."""
    part = (record.summary or {}).get("assess" if phase == "before" else "after")
    raw = part.get("figures") if isinstance(part, Mapping) else None
    if raw is None:
        return None
    if not isinstance(raw, list) or not all(isinstance(f, Mapping) for f in raw):
        where = "assess" if phase == "before" else "after"
        raise ValueError(f"{where}.figures of run {record.run_id}: must be a list of objects")
    return [PartitionFigures.from_dict(f) for f in raw]


def _topic_point(
    record: RunRecord, time_ms: int, figures: Sequence[PartitionFigures], phase: Phase = "before"
) -> HistoryPoint:
    run = (record.run_id, record.duration_s, run_outcome(record))
    if not figures:
        assess = (record.summary or {}).get("assess")
        metrics = assess.get("metrics") if isinstance(assess, Mapping) else None
        percent = metrics.get("max-dirty-percent") if isinstance(metrics, Mapping) else None
        ratio = percent / 100 if isinstance(percent, int) and not isinstance(percent, bool) else None
        return HistoryPoint(time_ms, None, ratio, None, None, None, None, *run, mirror_lag=record.mirror_lag)
    ratios = [f.dirty_ratio for f in figures if f.dirty_ratio is not None]
    deadlines = [f.nearest_deadline_ms for f in figures if f.nearest_deadline_ms is not None]
    return HistoryPoint(
        time_ms,
        None,
        max(ratios) if ratios else None,
        sum(f.size_bytes for f in figures),
        sum(f.records for f in figures),
        sum(f.tombstones for f in figures),
        min(deadlines) if deadlines else None,
        *run,
        mirror_lag=record.mirror_lag,
        phase=phase,
    )


def _figures(record: RunRecord, phase: Phase) -> list[PartitionFigures] | None:
    """`stored_figures`, None when they are of a shape no writer makes."""
    try:
        return stored_figures(record, phase)
    except ValueError:
        return None


def history_points(records: Sequence[RunRecord]) -> list[HistoryPoint]:
    """Each run's points before it (topic, then partitions) and after it, in the runs' order. The
    after points stand at the run's "now" plus its duration (at its "now" when that is unknown). A
    run whose figures cannot be read gives a topic point with its outcome only ("failed" when the
    report is unreadable), and no after points."""
    points = []
    for record in records:
        time_ms = record.now_ms if record.now_ms is not None else record.time_ms
        duration_s = record.duration_s
        duration_ms = 0 if duration_s is None else round(duration_s * 1000)
        run = (record.run_id, duration_s, run_outcome(record))
        phases: tuple[tuple[Phase, int, list[PartitionFigures]], ...] = (
            ("before", time_ms, _figures(record, "before") or []),
            ("after", time_ms + duration_ms, _figures(record, "after") or []),
        )
        for phase, at_ms, figures in phases:
            if phase == "after" and not figures:
                continue
            points.append(_topic_point(record, at_ms, figures, phase))
            points += [
                HistoryPoint(
                    at_ms,
                    f.partition,
                    f.dirty_ratio,
                    f.size_bytes,
                    f.records,
                    f.tombstones,
                    f.nearest_deadline_ms,
                    *run,
                    phase=phase,
                )
                for f in figures
            ]
    return points


def topic_history(runs: TopicRuns, since_ms: int, until_ms: int | None = None) -> list[HistoryPoint]:
    """The topic's history points of the runs whose "now" is at or after `since_ms` (and at or before
    `until_ms`, when given), oldest first."""
    records = runs.since(since_ms, MAX_RUNS)
    return history_points([r for r in records if until_ms is None or (r.now_ms or 0) <= until_ms])
