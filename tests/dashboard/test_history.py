"""A topic's history (issue 51): the figures each DAG run stored, as the JSON API's points and as
the topic's, the partitions' and the overview's charts.

Three runs are stored the way the DAG stores them (assess, retention, report), an hour apart, with
records appended between them; Airflow's view of the runs (state) comes from the stand-in backend,
and when each ran from its own report (issue 78). Every point is checked against the manifests as
they were before and after its run, and every drawn circle against the points.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from lakecleaner.charts.history import OVERDUE_COLOUR, history_charts
from lakecleaner.charts.lines import render_chart
from lakecleaner.config import load_config
from lakecleaner.log.records import Record
from lakecleaner.orchestration import tasks
from lakecleaner.policy import plan_topic
from lakecleaner.policy.text import format_timestamp_ms
from lakecleaner.runs.history import HistoryPoint, Phase, history_points
from lakecleaner.runs.naming import report_run_id
from lakecleaner.runs.records import AirflowRun, RunRecord
from lakecleaner.runs.times import RunTimes, recorded_times, run_times
from tests.dashboard.conftest import Scene, make_scene
from tests.dashboard.scene import HOUR
from tests.dashboard.test_app import as_user, client

TOPIC = "customers"


def _store_run(scene: Scene, run_id: str, now_ms: int) -> None:
    """One run of the topic's DAG, its tasks called as the DAG calls them, and its run.json stored."""
    config = load_config(scene.config_path)
    pushed = {
        "assess": tasks.assess(config, TOPIC, now_ms, {}),
        "compaction_gate": None,
        "retention": tasks.retention(config, TOPIC, now_ms, {"dry_run": False, "partitions": None}, run_id),
        "physical_deletion": None,
    }
    tasks.summarise(config, TOPIC, run_id, tasks.gather(config, TOPIC, run_id, pushed))


def _expected(scene: Scene, now_ms: int) -> dict[int | None, dict[str, Any]]:
    """The figures a run at `now_ms` must store, from the manifests and the plan as they are."""
    lake = scene.lake
    topic = lake.topic(TOPIC)
    manifests = topic.read_manifests().manifests
    plan = plan_topic(TOPIC, manifests, topic.config, {}, now_ms, cleaner=lake.cleaner_state.read(TOPIC))
    figures: dict[int | None, dict[str, Any]] = {}
    for p in plan.partitions:
        m = manifests[p.partition]
        figures[p.partition] = {
            "records": m.record_count,
            "size_bytes": m.size_bytes,
            "tombstones": sum(s.tombstone_count for s in m.segments),
            "dirty_ratio": p.compaction.range.dirty_ratio if p.compaction.range else None,
            "nearest_deadline_ms": p.deadline.deadline_ms if p.deadline else None,
        }
    parts = list(figures.values())
    figures[None] = {
        "records": sum(f["records"] for f in parts),
        "size_bytes": sum(f["size_bytes"] for f in parts),
        "tombstones": sum(f["tombstones"] for f in parts),
        "dirty_ratio": max(f["dirty_ratio"] for f in parts),
        "nearest_deadline_ms": min(f["nearest_deadline_ms"] for f in parts if f["nearest_deadline_ms"]),
    }
    return figures


@pytest.fixture
def three_runs(
    tmp_path: Path,
) -> tuple[Scene, list[AirflowRun], list[tuple[str, int, dict[int | None, Any], dict[int | None, Any]]]]:
    scene = make_scene(tmp_path)
    runs, airflow = [], []
    for index, hours_ago in enumerate((2, 1, 0)):
        now_ms = scene.now_ms - hours_ago * HOUR
        airflow_id = f"scheduled__{format_timestamp_ms(now_ms).replace(' ', 'T')}"
        log = scene.lake.topic(TOPIC).partition(index % 2)
        log.append(
            [Record(f"new-{index}-{i}".encode(), b"x" * 200, timestamp=now_ms) for i in range(40)], now_ms=now_ms
        )
        expected = _expected(scene, now_ms)
        _store_run(scene, report_run_id(airflow_id), now_ms)
        runs.append((report_run_id(airflow_id), now_ms, expected, _expected(scene, now_ms)))
        state = "failed" if index == 1 else "success"
        airflow.append(AirflowRun(airflow_id, state, "scheduled", {}, now_ms, now_ms))
    return scene, airflow, runs


def test_the_history_api_gives_each_runs_figures_as_the_manifests_were(three_runs: Any) -> None:
    scene, airflow, runs = three_runs
    app = client(scene, lambda dag_id, limit: airflow if dag_id == f"lakecleaner__{TOPIC}" else [])
    since = format_timestamp_ms(runs[0][1] - 1000).replace(" ", "T")
    answer = app.get(f"/api/topics/{TOPIC}/history", params={"since": since}, headers=as_user("viewer"))
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["topic"] == TOPIC
    points = body["points"]
    assert [(p["time_ms"], p["phase"]) for p in points if p["partition"] is None] == [
        (at, phase)
        for run_id, now, _, _ in runs
        for at, phase in ((now, "before"), (now + _duration_ms(scene, run_id), "after"))
    ]
    for (run_id, now_ms, before, after), index in zip(runs, range(3), strict=True):
        took_ms = _duration_ms(scene, run_id)
        for phase, at_ms, expected in (("before", now_ms, before), ("after", now_ms + took_ms, after)):
            mine = {p["partition"]: p for p in points if p["run_id"] == run_id and p["phase"] == phase}
            assert set(mine) == {None, 0, 1}
            for partition, figures in expected.items():
                point = mine[partition]
                assert point["time_ms"] == at_ms
                assert {k: point[k] for k in figures} == figures, (run_id, phase, partition)
                assert point["duration_s"] == took_ms / 1000
                assert point["outcome"] == ("failed" if index == 1 else "ok")
    assert points[0]["records"] < points[-3]["records"]  # the records appended between the runs

    later = app.get(f"/api/topics/{TOPIC}/history", params={"since": str(runs[1][1])}, headers=as_user("viewer"))
    assert sorted({p["run_id"] for p in later.json()["points"]}) == sorted(r for r, *_ in runs[1:])
    bad = app.get(f"/api/topics/{TOPIC}/history", params={"since": "yesterday-ish"}, headers=as_user("viewer"))
    assert bad.status_code == 400 and "since" in bad.json()["detail"]
    assert app.get("/api/topics/no-such-topic/history", headers=as_user("viewer")).status_code == 404
    assert app.get(f"/api/topics/{TOPIC}/history").status_code == 401


def _duration_ms(scene: Scene, run_id: str) -> int:
    """How long the stored run took, from its run.json's times (`runs.times`)."""
    times = json.loads(scene.lake.store.read(f"_lakecleaner/runs/{TOPIC}/{run_id}/run.json"))["times"]
    assert 0 <= times["ended_ms"] - times["started_ms"] < 60_000, times  # the test's own seconds
    return int(times["ended_ms"] - times["started_ms"])


def _circles(svg_chart: str) -> list[tuple[int, float, str]]:
    return [
        (int(t), float(v), r)
        for t, v, r in re.findall(
            r'<circle [^>]*data-time-ms="(\d+)" data-value="([^"]+)" data-run-id="([^"]+)"', svg_chart
        )
    ]


def _chart(page: str, title: str) -> str:
    match = re.search(rf'<svg class="chart"[^>]*data-chart="{re.escape(title)}".*?</svg>', page, re.S)
    assert match, f"no chart {title!r} on the page"
    return match.group(0)


def test_the_pages_draw_the_history_points(three_runs: Any) -> None:
    scene, airflow, runs = three_runs
    app = client(scene, lambda dag_id, limit: airflow if dag_id == f"lakecleaner__{TOPIC}" else [])
    points = app.get(f"/api/topics/{TOPIC}/history", headers=as_user("viewer")).json()["points"]
    page = app.get(f"/topics/{TOPIC}", params={"range": "24h"}, headers=as_user("viewer")).text
    topic_points = [p for p in points if p["partition"] is None]
    assert _circles(_chart(page, "log size")) == [
        (p["time_ms"], float(p["size_bytes"]), p["run_id"]) for p in topic_points
    ]
    dirty = _chart(page, "dirty ratio (highest partition) against min.cleanable.dirty.ratio")
    assert _circles(dirty) == [(p["time_ms"], p["dirty_ratio"], p["run_id"]) for p in topic_points]
    assert 'class="threshold"' in dirty and 'data-value="0.5"' in dirty  # the default min.cleanable.dirty.ratio
    durations = _circles(_chart(page, "run duration and outcome"))
    assert [d[1:] for d in durations] == [(_duration_ms(scene, r) / 1000, r) for r, *_ in runs]
    assert "#c62828" in _chart(page, "run duration and outcome")  # the failed run's point
    assert '<strong data-range="24h">' in page and 'href="?range=7d"' in page

    partition = app.get(f"/topics/{TOPIC}/partitions/1", headers=as_user("viewer")).text
    mine = [p for p in points if p["partition"] == 1]
    assert _circles(_chart(partition, "records")) == [(p["time_ms"], float(p["records"]), p["run_id"]) for p in mine]

    overview = app.get("/", headers=as_user("viewer")).text
    row = re.search(rf'<tr class="topic" data-topic="{TOPIC}">.*?</tr>', overview, re.S)
    assert row is not None
    values = re.search(r'class="sparkline"[^>]*data-values="([^"]+)"', row.group(0))
    assert values is not None
    left = [p["dirty_ratio"] for p in topic_points if p["phase"] == "after"]
    assert [float(v) for v in values.group(1).split(",")] == pytest.approx(left)  # what each run left
    empty = app.get(
        f"/topics/{TOPIC}", params={"range": "24h", "now": str(runs[0][1] - 2 * 86_400_000)}, headers=as_user("viewer")
    )
    assert "0 runs in range" in empty.text


def test_a_report_without_figures_or_with_damaged_ones_is_a_topic_point_with_what_it_says() -> None:
    """Reports written before issue 51 have no figures: their topic point has the dirty ratio of the
    max-dirty-percent gauge. Figures of a shape no writer makes give the run's outcome only."""
    old = RunRecord("old", None, {"assess": {"now_ms": 1000, "metrics": {"max-dirty-percent": 62}}}, ("run",), 2000)
    damaged = RunRecord(
        "damaged", None, {"assess": {"now_ms": 3000, "figures": [{"partition": "zero"}]}}, ("run",), 4000
    )
    (first, second) = history_points([old, damaged])
    assert (first.time_ms, first.partition, first.dirty_ratio, first.size_bytes) == (1000, None, 0.62, None)
    assert (second.time_ms, second.dirty_ratio, second.records, second.run_id) == (3000, None, None, "damaged")


def _point(time_ms: int, deadline_ms: int | None, phase: Phase, size: int) -> HistoryPoint:
    return HistoryPoint(time_ms, None, 0.1, size, 10, 0, deadline_ms, "r1", 3.0, "ok", phase=phase)


def test_states_are_steps_and_a_deadline_says_its_own_state_not_the_runs_outcome() -> None:
    """Issue 78: the run found a deadline 23 h overdue and left none overdue; the run's outcome is
    "ok", which the overdue point must not say."""
    now = 100 * HOUR
    points = [_point(now, now - 23 * HOUR, "before", 500), _point(now + 3000, now + 5 * HOUR, "after", 200)]
    charts = {c.title: render_chart(c) for c in history_charts(points, None, now - HOUR, now + HOUR, True, 0.5)}
    deadline = charts["hours left to the nearest deletion deadline"]
    titles = re.findall(r"<circle [^>]*fill=\"([^\"]+)\"[^>]*><title>([^<]+)</title>", deadline)
    assert [(fill, title.rsplit(": ", 1)[-1]) for fill, title in titles] == [
        (OVERDUE_COLOUR, "overdue by 23.0 h"),
        ("#6a1b9a", "ok"),
    ]
    size = charts["log size"]
    corners = re.search(r'<polyline class="step" points="([^"]+)"', size)
    assert corners is not None
    (x0, y0), (x1, y1), (x2, y2) = (tuple(map(float, c.split(","))) for c in corners.group(1).split())
    assert (y1, x1) == (y0, x2) and x0 < x2 and y2 > y0  # held at 500 until the second point, then down to 200
    assert "before the run, ok" in size and "after the run, ok" in size


def test_a_runs_times_are_its_first_tasks_start_and_its_reports_end() -> None:
    parts = {"mirror": {"started_ms": 1_000}, "assess": {"started_ms": 5_000}, "retention": {"started_ms": 1}}
    assert run_times(parts, 9_000) == {"started_ms": 1_000, "ended_ms": 9_000}
    assert run_times({"assess": None, "mirror": {"error": "refused"}}, 9_000) is None
    assert run_times({"assess": {"started_ms": True}}, 9_000) is None
    assert recorded_times({"times": {"started_ms": 1_000, "ended_ms": 9_000}}) == RunTimes(1_000, 9_000)
    for damaged in ({"started_ms": 9_000, "ended_ms": 1_000}, {"started_ms": "1", "ended_ms": 2}, [1, 2]):
        assert recorded_times({"times": damaged}) is None
    record = RunRecord("r", None, {"times": {"started_ms": 1_000, "ended_ms": 53_000}}, ("run",), 1)
    assert record.duration_s == 52.0 and record.to_dict()["start_ms"] == 1_000
    assert RunRecord("r", None, None, (), 1).to_dict()["duration_s"] is None  # shown as "–"
