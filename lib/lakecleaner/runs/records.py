"""A topic's run history: the run reports in the lake joined with the DAG runs Airflow knows.

The DAG stores each run's reports under `_lakecleaner/runs/<topic>/<run id>/` with the Airflow run
id made path-safe (`report_run_id`); `run.json` is the run's summary written by the `report`
task, `report.json` the compaction job's report, `retention.json` and `gc.json` the retention and
physical-deletion reports (runs started from the command line write only some of them). A DAG
run that has not reached its `report` task yet has no reports: it shows with Airflow's state only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from lakecleaner.errors import LakeCleanerError, ObjectNotFound
from lakecleaner.io import ObjectStore
from lakecleaner.io.concurrent import map_ordered
from lakecleaner.metrics import Reclaimed, reclaimed
from lakecleaner.policy.text import format_timestamp_ms
from lakecleaner.runs.naming import report_run_id
from lakecleaner.runs.outcome import failures
from lakecleaner.runs.reports import load_report, runs_prefix
from lakecleaner.runs.times import RunTimes, recorded_times

#: The reports a run may have, by name (`<name>.json`), in the order they are shown.
REPORT_NAMES = ("run", "report", "retention", "gc")
_RUN_ID = re.compile(r"^[A-Za-z0-9._-]{1,250}$")


def valid_run_id(run_id: str) -> bool:
    """Whether `run_id` can name a run's report folder (no path separators, not `.` or `..`)."""
    return bool(_RUN_ID.match(run_id)) and run_id not in {".", ".."}


@dataclass(frozen=True)
class AirflowRun:
    """What Airflow knows about one DAG run (times in epoch ms, None when not reached yet). Not when
    it started or ended: `dag.test()` stamps its logical date there; the run's report says
    (`runs.times`)."""

    run_id: str
    state: str
    run_type: str
    conf: Mapping[str, Any] = field(default_factory=dict)
    run_after_ms: int | None = None
    data_interval_end_ms: int | None = None


@dataclass(frozen=True)
class QualityResult:
    """One Great Expectations report of a run (a compaction or a retention commit)."""

    step: str
    partition: int
    subject: str
    success: bool
    checks: int
    failed_rules: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "partition": self.partition,
            "subject": self.subject,
            "success": self.success,
            "checks": self.checks,
            "failed_rules": list(self.failed_rules),
        }


def run_time_ms(airflow: AirflowRun | None, written_ms: int | None) -> int:
    """When a run happened, for ordering: Airflow's run-after time, else the reports' write time
    (known before the run's summary is read)."""
    if airflow is not None and airflow.run_after_ms is not None:
        return airflow.run_after_ms
    return written_ms or 0


@dataclass(frozen=True)
class RunRecord:
    """One run of a topic: Airflow's view (state, link) and the lake's (reports, figures)."""

    run_id: str
    airflow: AirflowRun | None
    summary: Mapping[str, Any] | None
    reports: tuple[str, ...]
    written_ms: int | None
    #: Why the run's reports could not be shown (unreadable, or of a shape no writer of ours makes).
    error: str | None = None

    @property
    def time_ms(self) -> int:
        """When the run happened, for ordering (`run_time_ms`)."""
        return run_time_ms(self.airflow, self.written_ms)

    @property
    def times(self) -> RunTimes | None:
        """When the run really started and ended, as its summary records (`runs.times`)."""
        return recorded_times(self.summary)

    @property
    def duration_s(self) -> float | None:
        """How long the run took, from its own report; None when unknown (no summary yet)."""
        times = self.times
        return None if times is None else times.duration_s

    @property
    def params(self) -> Mapping[str, Any]:
        """The trigger parameters as the assessment validated them, else as Airflow received them."""
        assessed = ((self.summary or {}).get("assess") or {}).get("params")
        return dict(assessed or (self.airflow.conf if self.airflow else {}))

    @property
    def now_ms(self) -> int | None:
        """The "now" the run decided with."""
        for part in ("assess", "retention", "compaction"):
            value = ((self.summary or {}).get(part) or {}).get("now_ms")
            if value is not None:
                return int(value)
        return None if self.airflow is None else self.airflow.data_interval_end_ms

    @property
    def reclaimed(self) -> Reclaimed:
        return reclaimed(self.summary or {})

    @property
    def mirror_lag(self) -> int | None:
        """Records the mirrored topic was behind its Kafka topic's high watermarks when the run's
        `mirror` task ended (summed over partitions); None for a run without one (issue 47)."""
        mirror = (self.summary or {}).get("mirror")
        if not isinstance(mirror, Mapping):
            return None
        parts = [p for p in mirror.get("partitions") or [] if isinstance(p, Mapping)]
        return sum(lag for p in parts if isinstance(lag := p.get("lag"), int) and not isinstance(lag, bool))

    @property
    def mirror_gaps(self) -> tuple[str, ...]:
        """The offsets Kafka deleted before the run's mirror read them (retention, DeleteRecords),
        one sentence each (issue 74); none for a run without a mirror task."""
        mirror = (self.summary or {}).get("mirror")
        gaps = mirror.get("deleted_before_mirrored") if isinstance(mirror, Mapping) else None
        return tuple(
            f"partition {g.get('partition')}: offsets {g.get('from')}..{g.get('to')} were deleted in Kafka before "
            "they were mirrored"
            for g in gaps or []
            if isinstance(g, Mapping)
        )

    @property
    def failures(self) -> list[str]:
        """What went wrong, from the run summary (only runs that reached `report` have one)."""
        if self.summary is None or "run" not in self.reports:
            return []
        return failures(self.summary)

    @property
    def result(self) -> str:
        """The run's result in a few words."""
        if self.error is not None:
            return f"unreadable report: {self.error}"
        if self.failures:
            return "failed: " + "; ".join(self.failures)
        if self.airflow is not None and self.airflow.state not in {"success", "failed"}:
            return self.airflow.state
        if self.summary is None:
            return self.airflow.state if self.airflow else "no report"
        outcome = "dry run" if self.params.get("dry_run") else "ok"
        return f"{outcome}: {_step_statuses(self.summary)}"

    def quality(self) -> list[QualityResult]:
        """The quality reports of the run's compaction and retention commits."""
        results = []
        for step in ("compaction", "retention"):
            for part in ((self.summary or {}).get(step) or {}).get("partitions") or []:
                report = part.get("quality")
                if report:
                    checks = report.get("checks") or []
                    failed = tuple(str(c.get("rule")) for c in checks if not c.get("success"))
                    results.append(
                        QualityResult(
                            step,
                            int(part["partition"]),
                            str(report.get("subject")),
                            bool(report.get("success")),
                            len(checks),
                            failed,
                        )
                    )
        return results

    def to_dict(self) -> dict[str, Any]:
        times = self.times
        return {
            "run_id": self.run_id,
            "airflow_run_id": None if self.airflow is None else self.airflow.run_id,
            "state": None if self.airflow is None else self.airflow.state,
            "run_type": None if self.airflow is None else self.airflow.run_type,
            "start_ms": None if times is None else times.started_ms,
            "end_ms": None if times is None else times.ended_ms,
            "duration_s": None if times is None else times.duration_s,
            "params": dict(self.params),
            "now_ms": self.now_ms,
            "now": None if self.now_ms is None else format_timestamp_ms(self.now_ms),
            "time_ms": self.time_ms,
            "result": self.result,
            "failures": self.failures,
            "mirror_lag": self.mirror_lag,
            **self.reclaimed.to_dict(),
            "quality": [q.to_dict() for q in self.quality()],
            "reports": list(self.reports),
        }


def _step_statuses(summary: Mapping[str, Any]) -> str:
    """How the steps' partitions ended, e.g. "compaction committed (2 partitions); retention dry-run (1 partition)"."""
    words = []
    for step in ("compaction", "retention"):
        counts: dict[str, int] = {}
        for part in (summary.get(step) or {}).get("partitions") or []:
            counts[str(part.get("status"))] = counts.get(str(part.get("status")), 0) + 1
        words += [f"{step} {status} ({n} partition{'s' if n > 1 else ''})" for status, n in sorted(counts.items())]
    return "; ".join(words) or "nothing to do"


@dataclass(frozen=True)
class _StoredRun:
    reports: tuple[str, ...]
    written_ms: int


def _stored_runs(store: ObjectStore, topic: str) -> dict[str, _StoredRun]:
    """Every run folder of the topic with the reports it holds and when the last was written."""
    found: dict[str, dict[str, int]] = {}
    prefix = runs_prefix(topic)
    for info in store.list(prefix):
        run_id, _, name = info.key[len(prefix) :].partition("/")
        if name.endswith(".json") and "/" not in name and name[: -len(".json")] in REPORT_NAMES:
            found.setdefault(run_id, {})[name[: -len(".json")]] = info.mtime_ms
    return {
        run_id: _StoredRun(tuple(n for n in REPORT_NAMES if n in names), max(names.values()))
        for run_id, names in found.items()
    }


def _summary(store: ObjectStore, topic: str, run_id: str, reports: Iterable[str]) -> dict[str, Any] | None:
    """run.json, or, for a run without one (started from the command line), its separate reports
    under the keys run.json uses."""
    names = set(reports)
    if "run" in names:
        return load_report(store, topic, run_id, "run")
    keys = {"report": "compaction", "retention": "retention", "gc": "physical_deletion"}
    parts = {key: load_report(store, topic, run_id, name) for name, key in keys.items() if name in names}
    return parts or None


class TopicRuns:
    """A topic's runs as one request sees them: its run folders listed once and its DAG's runs as
    Airflow listed them, each run's summary read at most once however many parts of a page show
    it (the run table and the history charts)."""

    def __init__(self, store: ObjectStore, topic: str, airflow_runs: Sequence[AirflowRun], concurrency: int) -> None:
        self.store = store
        self.topic = topic
        self.concurrency = concurrency
        self._stored = _stored_runs(store, topic)
        self._airflow = {report_run_id(run.run_id): run for run in airflow_runs}
        self._records: dict[str, RunRecord] = {}

    def newest(self, limit: int) -> list[RunRecord]:
        """The `limit` most recent runs, newest first: the DAG runs Airflow listed, with their reports
        when they exist, and the runs only the lake knows about; only those runs' summaries are read."""
        keys = sorted(self._airflow.keys() | self._stored.keys(), key=self._time_ms, reverse=True)[:limit]
        return sorted(self._records_of(keys), key=lambda r: r.time_ms, reverse=True)

    def since(self, since_ms: int, limit: int) -> list[RunRecord]:
        """The runs that decided with a "now" at or after `since_ms`, oldest first, at most `limit`
        (the newest): only the summaries of runs whose reports were written since then are read (a
        run's reports are written after its "now"). Runs without reports (not yet at `report`, or
        whose reports were pruned) are left out."""
        recent = [(k, v) for k, v in self._stored.items() if v.written_ms >= since_ms]
        keys = [k for k, _ in sorted(recent, key=lambda item: item[1].written_ms, reverse=True)[:limit]]
        records = [r for r in self._records_of(keys) if r.now_ms is not None and r.now_ms >= since_ms]
        return sorted(records, key=lambda r: (r.now_ms or 0, r.time_ms))

    def record(self, run_id: str) -> RunRecord | None:
        """One run by its report run id (None when neither the lake nor Airflow knows it)."""
        if run_id not in self._stored and run_id not in self._airflow:
            return None
        return self._records_of([run_id])[0]

    def _time_ms(self, key: str) -> int:
        """A run's `RunRecord.time_ms`, before its summary is read."""
        stored = self._stored.get(key)
        return run_time_ms(self._airflow.get(key), stored.written_ms if stored else None)

    def _records_of(self, keys: Sequence[str]) -> list[RunRecord]:
        """The runs' records, each summary not read yet by this request read concurrently."""
        missing = [k for k in keys if k not in self._records]
        self._records.update(zip(missing, map_ordered(self._read, missing, self.concurrency), strict=True))
        return [self._records[k] for k in keys]

    def _read(self, key: str) -> RunRecord:
        airflow, found = self._airflow.get(key), self._stored.get(key)
        if found is None:
            return RunRecord(key, airflow, None, (), None)
        summary = partial(_summary, self.store, self.topic, key, found.reports)
        return _checked(key, airflow, summary, found.reports, found.written_ms)


def _checked(
    run_id: str,
    airflow: AirflowRun | None,
    summary: Callable[[], dict[str, Any] | None],
    reports: tuple[str, ...],
    written_ms: int | None,
) -> RunRecord:
    """The run's record, its summary read and every figure shown of it computed once: a report
    that cannot be read, or whose fields have types no writer of ours gives them, makes a record
    that says so (`error`), never an exception that takes the page down."""
    try:
        record = RunRecord(run_id, airflow, summary(), reports, written_ms)
        record.to_dict()
        return record
    except (LakeCleanerError, ValueError, TypeError, AttributeError, KeyError, IndexError, OverflowError) as exc:
        return RunRecord(run_id, airflow, None, reports, written_ms, error=f"{type(exc).__name__}: {str(exc)[:200]}")


def run_reports(store: ObjectStore, topic: str, run_id: str) -> dict[str, Any]:
    """Every report of one run by name (`run`, `report`, `retention`, `gc`); missing ones are absent."""
    reports: dict[str, Any] = {}
    for name in REPORT_NAMES:
        try:
            reports[name] = load_report(store, topic, run_id, name)
        except ObjectNotFound:
            continue
    return reports


__all__ = [
    "REPORT_NAMES",
    "AirflowRun",
    "QualityResult",
    "RunRecord",
    "TopicRuns",
    "run_reports",
    "valid_run_id",
]
