"""A run in the few figures the overview shows of it, and which a topic's summary keeps (issue 50).

The overview row of a topic needs, of each recent run, only its outcome, what it reclaimed, the
mirror's lag and the topic's point of the trend: a `RunDigest`. The topic page makes digests of
the run records it reads; a topic's summary stores the digests of its last runs, so the overview
of many topics reads no run report at all. Airflow's side of a run (state, times) is joined at
read time (`with_airflow`), as it changes after the summary is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from lakecleaner.io.strict_json import Fields, Malformed
from lakecleaner.metrics import Reclaimed
from lakecleaner.policy.text import format_timestamp_ms
from lakecleaner.runs.history import history_points
from lakecleaner.runs.naming import report_run_id
from lakecleaner.runs.records import AirflowRun, RunRecord
from lakecleaner.runs.times import RunTimes, recorded_times

#: How many runs a topic's summary keeps, and the overview sums the reclaimed bytes of.
RECENT_RUNS = 10


@dataclass(frozen=True)
class RunDigest:
    """One run as the overview shows it: `dirty_ratio` and `size_bytes` are the topic's last point
    of the run's figures (after the run, when it stored those; None when it stored none), and
    `times` when it really ran (`runs.times`)."""

    run_id: str
    time_ms: int
    now_ms: int | None
    result: str
    failures: tuple[str, ...]
    mirror_lag: int | None
    reclaimed: Reclaimed
    dirty_ratio: float | None
    size_bytes: int | None
    airflow: AirflowRun | None = None
    mirror_gaps: tuple[str, ...] = ()
    times: RunTimes | None = None

    @classmethod
    def of(cls, record: RunRecord) -> RunDigest:
        *_, topic_point = [p for p in history_points([record]) if p.partition is None]
        return cls(
            run_id=record.run_id,
            time_ms=record.time_ms,
            now_ms=record.now_ms,
            result=record.result,
            failures=tuple(record.failures),
            mirror_lag=record.mirror_lag,
            reclaimed=record.reclaimed,
            dirty_ratio=topic_point.dirty_ratio,
            size_bytes=topic_point.size_bytes,
            airflow=record.airflow,
            mirror_gaps=record.mirror_gaps,
            times=record.times,
        )

    def with_airflow(self, run: AirflowRun) -> RunDigest:
        """The digest with Airflow's view of its DAG run (ordered by Airflow's time, as RunRecord is)."""
        return replace(self, airflow=run, time_ms=run.run_after_ms if run.run_after_ms is not None else self.time_ms)

    def to_dict(self) -> dict[str, Any]:
        """The overview's `last_run`."""
        airflow = self.airflow
        return {
            "run_id": self.run_id,
            "airflow_run_id": None if airflow is None else airflow.run_id,
            "state": None if airflow is None else airflow.state,
            "run_type": None if airflow is None else airflow.run_type,
            "start_ms": None if self.times is None else self.times.started_ms,
            "end_ms": None if self.times is None else self.times.ended_ms,
            "duration_s": None if self.times is None else self.times.duration_s,
            "now_ms": self.now_ms,
            "now": None if self.now_ms is None else format_timestamp_ms(self.now_ms),
            "time_ms": self.time_ms,
            "result": self.result,
            "failures": list(self.failures),
            "mirror_lag": self.mirror_lag,
            **self.reclaimed.to_dict(),
        }

    def to_stored(self) -> dict[str, Any]:
        """The digest as a topic's summary keeps it (the lake's side only)."""
        return {
            "run_id": self.run_id,
            "time_ms": self.time_ms,
            "now_ms": self.now_ms,
            "result": self.result,
            "failures": list(self.failures),
            "mirror_lag": self.mirror_lag,
            "mirror_gaps": list(self.mirror_gaps),
            "reclaimed": self.reclaimed.to_dict(),
            "dirty_ratio": self.dirty_ratio,
            "size_bytes": self.size_bytes,
            **({} if self.times is None else {"times": self.times.to_dict()}),
        }

    @classmethod
    def from_fields(cls, f: Fields) -> RunDigest:
        """A stored digest; Malformed (naming the field) for a shape no writer of ours makes."""
        reclaimed = f.object("reclaimed")
        ratio = None if f.raw.get("dirty_ratio") is None else f.number("dirty_ratio")
        return cls(
            run_id=f.text("run_id", max_chars=256),
            time_ms=f.integer("time_ms"),
            now_ms=f.optional_int("now_ms"),
            result=f.text("result", max_chars=4096),
            failures=_sentences(f, "failures", None),
            mirror_lag=f.optional_int("mirror_lag"),
            reclaimed=Reclaimed(
                bytes=reclaimed.integer("bytes_reclaimed"),
                records=reclaimed.integer("records_removed"),
                segments_deleted=reclaimed.integer("segments_deleted"),
                files_deleted=reclaimed.integer("files_deleted"),
            ),
            dirty_ratio=ratio,
            size_bytes=f.optional_int("size_bytes"),
            mirror_gaps=_sentences(f, "mirror_gaps", []),
            times=recorded_times(f.raw),
        )


def _sentences(f: Fields, name: str, default: list[str] | None) -> tuple[str, ...]:
    """A stored list of strings (`default` when absent; None: required)."""
    found = f.raw.get(name, default)
    if not isinstance(found, list) or not all(isinstance(x, str) for x in found):
        raise Malformed(f"field {f.where}.{name} is not a list of strings")
    return tuple(found)


def joined_with_airflow(digests: Sequence[RunDigest], airflow_runs: Sequence[AirflowRun]) -> list[RunDigest]:
    """The runs of a topic newest first: each digest with its DAG run when Airflow lists it, and
    the DAG runs that have no digest (not yet at `report`) as digests of their Airflow state."""
    by_id = {d.run_id: d for d in digests}
    joined = []
    for run in airflow_runs:
        key = report_run_id(run.run_id)
        found = by_id.pop(key, None)
        joined.append(found.with_airflow(run) if found else RunDigest.of(RunRecord(key, run, None, (), None)))
    joined += by_id.values()
    return sorted(joined, key=lambda d: d.time_ms, reverse=True)
