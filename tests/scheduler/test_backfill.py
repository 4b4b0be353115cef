"""Issue #6: three backfilled intervals give the same log as three scheduled runs, in real Airflow.

The package's Airflow (conftest.py) serves two identical delete-policy topics of its lake, each with
its own DAG, scheduled daily. An Airflow 3 cron schedule triggers a run at each tick T with the data interval [T, T], so
the run's "now" (its data_interval_end) is T. The three past ticks T1 < T2 < T3 (the latest) run:

* on `views-backfilled`, as an Airflow backfill (`POST /api/v2/backfills`, what `airflow backfill
  create` does) from T1 to T3: the scheduler runs its three runs of type backfill, one at a time;
* on `views-scheduled`, as three runs of type scheduled. With catchup off (as lakecleaner's DAGs
  are), a live scheduler creates a run only for the latest tick: it creates T3's run itself when
  the DAG is unpaused. T1 and T2 passed before this scheduler started, so `tests.scheduled_runs`
  creates their runs exactly as the scheduler's `_create_dag_runs` does (the timetable's next run
  after the previous one, its run id, type scheduled, triggered by the timetable, queued) from the
  serialized DAG; the scheduler then runs all three in order (max_active_runs=1).

(Both DAGs are paused until their runs exist; on the backfilled DAG, the backfill's run at T3 is
then the latest tick's run, so the scheduler creates no run of its own there.) Every task's "now"
is its run's data_interval_end, so the backfill at each tick must decide exactly what the scheduled
run at that tick decided: the test compares each tick's retention and physical deletion decisions
(the run reports) and the final logs (segments, records, log start, pending deletes). The data
makes each tick decide differently (T1 deletes by retention.ms, T2 by retention.ms and consumed
retention, T3 by retention.ms; physical deletion follows file.delete.delay.ms behind), and at the
wall-clock time retention would delete one more segment, so a "now" other than the tick fails the
test.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from lakecleaner.clock import epoch_ms, wall_clock_ms
from lakecleaner.lake import Lake
from lakecleaner.policy.retention import plan_retention
from lakecleaner.runs.naming import dag_id_of, report_run_id
from lakecleaner.runs.reports import load_report
from tests.scheduler.conftest import World
from tests.scheduler.topics import BACKFILLED, HOUR, SCHEDULED

REPO = Path(__file__).resolve().parents[2]


def decisions(lake: Lake, topic: str, run: dict[str, Any]) -> dict[str, Any]:
    """What one DAG run decided, from its report (run.json): its now, what retention deleted by
    which rule and the new log start, and which deleted segments' files it removed physically."""
    summary = load_report(lake.store, topic, report_run_id(run["dag_run_id"]), "run")
    (retained,) = summary["retention"]["partitions"]
    (collected,) = summary["physical_deletion"]["partitions"]
    return {
        "now_ms": summary["assess"]["now_ms"],
        "rolled": summary["assess"]["rolled"],
        "retention": retained["status"],
        "checked": retained["quality"]["success"],  # Great Expectations checked the result
        "deleted": [(d["base_offset"], d["rule"]) for d in retained["plan"]["deletions"]],
        "log_start": retained["new_log_start_offset"],
        "held_back_by": retained["held_back_by"],
        "files_deleted": sorted(base_of(path) for path in collected["deleted_pending"]),
        "files_waiting": collected["pending_still_waiting"],
    }


def base_of(path: str) -> int:
    """A segment file's base offset, from its name (`segments/<base:020d>-<random>.parquet`)."""
    return int(path.rsplit("/", 1)[-1].split("-", 1)[0])


def log_state(lake: Lake, topic: str) -> dict[str, Any]:
    """The partition's log without the names that differ between topics (file names are random)."""
    log = lake.topic(topic).partition(0)
    manifest = log.manifest()
    return {
        "log_start": manifest.log_start_offset,
        "next_offset": manifest.next_offset,
        "segments": [
            (s.base_offset, s.next_offset, s.record_count, s.max_timestamp, s.sealed) for s in manifest.segments
        ],
        "pending_deletes": sorted((base_of(p.path), p.delete_after_ms, p.reason) for p in manifest.pending_deletes),
        "records": [
            (r["offset"], r["timestamp"], r["key"], r["value"])
            for r in log.read(columns=["offset", "timestamp", "key", "value"]).to_pylist()
        ],
    }


@pytest.mark.usefixtures("started")  # the other tests' runs go on meanwhile
def test_three_backfilled_intervals_give_the_same_log_as_three_scheduled_runs(world: World) -> None:
    scenario = world
    airflow, lake = scenario.airflow, scenario.lake
    t1, _, t3 = scenario.ticks
    asked_ms = wall_clock_ms()
    airflow.backfill(dag_id_of(BACKFILLED), t1.isoformat(), t3.isoformat(), max_active_runs=1)
    created = subprocess.run(
        [sys.executable, "-m", "tests.scheduler.scheduled_runs", dag_id_of(SCHEDULED), t1.isoformat(), "2"],
        env=airflow.env(),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert created.returncode == 0, created.stderr[-3000:]
    ours = [json.loads(line)["run_id"] for line in created.stdout.splitlines() if line.startswith("{")]
    for topic in (BACKFILLED, SCHEDULED):
        airflow.set_paused(dag_id_of(topic), False)
    try:
        runs = {
            topic: airflow.wait_for_dag_runs(dag_id_of(topic), 3, timeout_s=900) for topic in (BACKFILLED, SCHEDULED)
        }
    except (TimeoutError, RuntimeError) as exc:
        pytest.fail(f"{exc}\n{scenario.diagnostics()}")
    for topic in (BACKFILLED, SCHEDULED):
        airflow.set_paused(dag_id_of(topic), True)

    for topic, run_type in ((BACKFILLED, "backfill"), (SCHEDULED, "scheduled")):
        assert [r["state"] for r in runs[topic]] == ["success"] * 3, scenario.diagnostics()
        assert [r["run_type"] for r in runs[topic]] == [run_type] * 3
        for field in ("logical_date", "data_interval_end"):
            assert [datetime.fromisoformat(r[field]) for r in runs[topic]] == scenario.ticks, (topic, field)
    assert [r["triggered_by"] for r in runs[SCHEDULED]] == ["timetable"] * 3
    assert [r["triggered_by"] for r in runs[BACKFILLED]] == ["backfill"] * 3
    # T1's and T2's scheduled runs are ours; T3's is the scheduler's own, and looks the same.
    assert [r["dag_run_id"] for r in runs[SCHEDULED]] == [f"scheduled__{t.isoformat()}" for t in scenario.ticks]
    assert ours == [r["dag_run_id"] for r in runs[SCHEDULED][:2]]

    # Each tick decided the same on both sides, and the ticks decided differently.
    backfilled = [decisions(lake, BACKFILLED, run) for run in runs[BACKFILLED]]
    scheduled = [decisions(lake, SCHEDULED, run) for run in runs[SCHEDULED]]
    assert backfilled == scheduled
    expected = [
        # T1: segment 0 is past retention.ms; segment 1 is neither that old nor old enough for consumed retention
        {
            "deleted": [(0, "retention.ms")],
            "log_start": 10,
            "held_back_by": [],
            "files_deleted": [],
            "files_waiting": 1,
        },
        # T2: segment 1 is past retention.ms, 2 consumed by every group; segment 0's file is due for deletion
        {
            "deleted": [(10, "retention.ms"), (20, "consumed")],
            "log_start": 30,
            "held_back_by": [],
            "files_deleted": [0],
            "files_waiting": 2,
        },
        # T3: segment 3 is past retention.ms; billing has not consumed segment 4
        {
            "deleted": [(30, "retention.ms")],
            "log_start": 40,
            "held_back_by": ["billing"],
            "files_deleted": [10, 20],
            "files_waiting": 1,
        },
    ]
    for now, decided, wanted in zip(scenario.ticks, backfilled, expected, strict=True):
        assert decided == {**wanted, "now_ms": epoch_ms(now), "rolled": [], "retention": "committed", "checked": True}
    # Issue 78: each run's times are when its tasks ran (after the test asked for them, one run
    # after the other), never its logical date days back: a duration of seconds, never negative
    waited_ms = wall_clock_ms()
    for topic in (BACKFILLED, SCHEDULED):
        times = [
            load_report(lake.store, topic, report_run_id(run["dag_run_id"]), "run")["times"] for run in runs[topic]
        ]
        assert asked_ms <= times[0]["started_ms"], (topic, times)
        assert all(t["started_ms"] <= t["ended_ms"] <= waited_ms for t in times), (topic, times)
        assert all(a["ended_ms"] <= b["started_ms"] for a, b in pairwise(times)), (topic, times)
    # The task logs users read hold none of Great Expectations' own chatter: GX logs some two
    # hundred INFO lines while it imports, and each of these retention tasks imported it.
    retention_logs = sorted((airflow.home / "logs").glob(f"dag_id={dag_id_of(BACKFILLED)}/*/task_id=retention/*.log"))
    assert len(retention_logs) == 3
    assert [p.name for p in retention_logs if '"logger":"great_expectations' in p.read_text()] == []
    # The report task logs the run's digest (counts, failures, where run.json is), not the whole
    # summary, which grows with the partitions (each one's plan and quality report).
    report_logs = sorted((airflow.home / "logs").glob(f"dag_id={dag_id_of(BACKFILLED)}/*/task_id=report/*.log"))
    assert len(report_logs) == 3
    assert all("changed_log" in p.read_text() and "deleted_by_rule" not in p.read_text() for p in report_logs)
    # The retention and physical deletion tasks hand on (XCom) their reports less the partitions'
    # entries, which grow with the topic; the report task reads the whole reports from the run's
    # folder (run.json has them: `decisions` above read it).
    run_id = quote(runs[BACKFILLED][0]["dag_run_id"], safe="")
    pushed: dict[str, Any] = {}
    for task_id, report in (("retention", "retention"), ("physical_deletion", "gc")):
        path = f"/api/v2/dags/{dag_id_of(BACKFILLED)}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/return_value"
        status, entry = airflow.api("GET", path + "?deserialize=true&stringify=false", user="admin")
        assert status == 200, entry
        value = entry["value"] if isinstance(entry["value"], dict) else json.loads(entry["value"])
        assert "partitions" not in value and value["partition_count"] == 1, value
        assert value["location"].endswith(f"/{report}.json"), value
        pushed[task_id] = value
    assert pushed["retention"]["statuses"] == {"committed": 1} and pushed["retention"]["segments_deleted"] == 1

    # The same log: segments, records, log start offset and the files still to be deleted.
    after = log_state(lake, BACKFILLED)
    assert after == log_state(lake, SCHEDULED)
    assert [s[0] for s in after["segments"]] == [40, 50] and after["log_start"] == 40
    assert after["pending_deletes"] == [(30, epoch_ms(t3) + 12 * HOUR, "retention: retention.ms")]

    # At the wall-clock time retention would delete more (segment 40): the runs did not use it.
    topic = lake.topic(BACKFILLED)
    at_wall_clock = plan_retention(topic.partition(0).manifest(), topic.config, None, wall_clock_ms())
    assert [d.base_offset for d in at_wall_clock.deletions] == [40]
