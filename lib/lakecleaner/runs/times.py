"""When a run really ran: the wall-clock start of its first task and the end of its `report` task,
as the run's summary (run.json) records them (issue 78).

Airflow's own start date is not that: `dag.test()` (the demo, `lakecleaner airflow run`) stamps a
run's start with its logical date, so a run of a later interval looked as if it took a negative
time and one of an earlier interval hours. Every decision still uses the run's "now" (the data
interval's end); only durations and the run's start and end come from here. A run whose summary
has no times (written before issue 78, or still running) has no duration: the pages show "–".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: The parts of a run's summary whose tasks may be its first: each records when it started.
FIRST_TASKS = ("mirror", "adopt", "assess")


@dataclass(frozen=True)
class RunTimes:
    """A run's wall-clock start and end, in epoch ms (end at or after start)."""

    started_ms: int
    ended_ms: int

    @property
    def duration_s(self) -> float:
        return (self.ended_ms - self.started_ms) / 1000

    def to_dict(self) -> dict[str, int]:
        return {"started_ms": self.started_ms, "ended_ms": self.ended_ms}


def run_times(parts: Mapping[str, Any], ended_ms: int) -> dict[str, int] | None:
    """The `times` entry of a run's summary: the earliest start its first tasks recorded
    (`started_ms` in what each handed on or stored) and `ended_ms`, the report task's end; None
    when no first task recorded a start (each failed before it could)."""
    starts = [
        started
        for name in FIRST_TASKS
        if isinstance(part := parts.get(name), Mapping)
        and isinstance(started := part.get("started_ms"), int)
        and not isinstance(started, bool)
    ]
    if not starts:
        return None
    return RunTimes(min(starts), max(ended_ms, min(starts))).to_dict()


def recorded_times(summary: Mapping[str, Any] | None) -> RunTimes | None:
    """The times a run's summary records; None when it records none, or times no writer makes
    (not whole numbers, or an end before the start)."""
    times = (summary or {}).get("times")
    if not isinstance(times, Mapping):
        return None
    started, ended = times.get("started_ms"), times.get("ended_ms")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (started, ended)):
        return None
    assert isinstance(started, int) and isinstance(ended, int)
    return RunTimes(started, ended) if 0 <= started <= ended else None


__all__ = ["FIRST_TASKS", "RunTimes", "recorded_times", "run_times"]
