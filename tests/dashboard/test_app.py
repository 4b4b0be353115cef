"""The dashboard app's routes with a stand-in for Airflow (users from a header, canned DAG runs).

The real Airflow auth is tested in test_api.py; here: who may see what, status codes, the run
history joined with Airflow's runs, the trigger buttons, and that no response shows credentials.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi import Header, HTTPException
from fastapi.testclient import TestClient

from lakecleaner.config import load_config
from lakecleaner.dashboard.app import Backend, create_app, parse_now
from lakecleaner.lake import Lake
from lakecleaner.orchestration import tasks
from lakecleaner.runs.naming import report_run_id
from lakecleaner.runs.records import AirflowRun
from lakecleaner.summaries.deadlines import lake_deadlines
from lakecleaner.summaries.facts import facts_of_state, load_topic
from tests.dashboard.conftest import Scene, make_scene
from tests.dashboard.scene import ACCESS_KEY, SECRET_KEY

#: Users of the stand-in: what each may read (None: every DAG) and trigger.
READERS: dict[str, set[str] | None] = {"admin": None, "viewer": None, "customers-only": {"lakecleaner__customers"}}
TRIGGERERS = {"admin"}
MANUAL = "manual__2026-03-01T10:00:00+00:00"


def signed_in(x_user: str | None = Header(None)) -> str:
    if not x_user:
        raise HTTPException(401, "Not authenticated")
    return x_user


class StandInAccess:
    def can_read(self, user: Any, dag_id: str | None) -> bool:
        if user not in READERS:
            return False
        allowed = READERS[user]
        return allowed is None or dag_id is None or dag_id in allowed

    def can_trigger(self, user: Any, dag_id: str) -> bool:
        return user in TRIGGERERS


def client(
    scene: Scene,
    dag_runs: Callable[[str, int], list[AirflowRun]] | None = None,
    dag_paused: Callable[[str], bool | None] = lambda dag_id: None,
    open_lake: Callable[[], Lake] | None = None,
) -> TestClient:
    backend = Backend(
        current_user=signed_in,
        access=StandInAccess(),
        dag_runs=dag_runs or (lambda dag_id, limit: []),
        open_lake=open_lake or (lambda: Lake.open(load_config(scene.config_path))),
        dag_paused=dag_paused,
    )
    return TestClient(create_app(backend))


def as_user(user: str) -> dict[str, str]:
    return {"X-User": user}


PAGES = [
    "/",
    "/topics/customers",
    "/topics/customers/partitions/0",
    "/topics/page-views",
    "/topics/page-views/partitions/0",
    "/topics/scratch",
    "/api/topics",
    "/api/topics/customers",
    "/api/topics/page-views/partitions/0",
    "/api/topics/page-views/runs",
    "/erasure",
    "/api/erasure",
]


@pytest.mark.parametrize("path", PAGES)
def test_every_route_needs_a_user_who_may_read_dags(scene: Scene, path: str) -> None:
    app = client(scene)
    assert app.get(path).status_code == 401
    assert app.get(path, headers=as_user("stranger")).status_code == 403
    assert app.get(path, headers=as_user("viewer")).status_code == 200


def test_a_topic_needs_read_access_to_its_dag(scene: Scene) -> None:
    app = client(scene)
    headers = as_user("customers-only")
    assert app.get("/api/topics/customers", headers=headers).status_code == 200
    assert app.get("/api/topics/page-views", headers=headers).status_code == 403
    assert app.get("/topics/page-views/partitions/0", headers=headers).status_code == 403
    listed = [t["topic"] for t in app.get("/api/topics", headers=headers).json()["topics"]]
    assert listed == ["customers"]


@pytest.mark.parametrize(
    "path",
    ["/api/topics/nope", "/api/topics/customers/partitions/7", "/api/topics/customers/runs/nope", "/topics/a%2Fb"],
)
def test_unknown_things_are_404(scene: Scene, path: str) -> None:
    assert client(scene).get(path, headers=as_user("admin")).status_code == 404


def test_now_is_the_request_time_or_the_parameter(scene: Scene) -> None:
    app = client(scene)
    iso = app.get("/api/topics", params={"now": "2026-03-01T12:00:00Z"}, headers=as_user("viewer")).json()
    assert iso["now_ms"] == 1_772_366_400_000 == parse_now("1772366400000") == parse_now("2026-03-01T12:00:00")
    assert app.get("/api/topics", params={"now": "yesterday"}, headers=as_user("viewer")).status_code == 400


def test_no_page_shows_the_storage_credentials(scene: Scene) -> None:
    app = client(scene)
    for path in [*PAGES, "/api/topics/nope", "/api/topics/customers/partitions/7"]:
        text = app.get(path, headers=as_user("admin")).text
        assert SECRET_KEY not in text and ACCESS_KEY not in text, path


def test_trigger_buttons_follow_the_users_permission(scene: Scene) -> None:
    app = client(scene)
    admin = app.get("/topics/customers", headers=as_user("admin")).text
    viewer = app.get("/topics/customers", headers=as_user("viewer")).text
    assert 'data-dag-id="lakecleaner__customers"' in admin and "disabled" not in admin.split("<button")[2]
    assert "may not trigger runs of lakecleaner__customers" in viewer
    assert all("disabled" in b for b in viewer.split("<button")[2:4])
    partition = app.get("/topics/page-views/partitions/0", headers=as_user("admin")).text
    assert "&#34;partitions&#34;: [0]" in partition or '"partitions": [0]' in partition
    assert "Force compaction" not in partition


@pytest.fixture
def history(tmp_path: Path) -> tuple[Scene, list[AirflowRun]]:
    """A scene with one dry run stored the way the DAG stores it, and Airflow's view of two runs."""
    scene = make_scene(tmp_path)
    config = load_config(scene.config_path)
    run_id = report_run_id(MANUAL)
    params = {"dry_run": True}
    pushed = {
        "assess": tasks.assess(config, "page-views", scene.now_ms, params),
        "compaction_gate": None,
        "retention": tasks.retention(config, "page-views", scene.now_ms, {**params, "partitions": None}, run_id),
        "physical_deletion": None,
    }
    tasks.summarise(config, "page-views", run_id, tasks.gather(config, "page-views", run_id, pushed))
    runs = [
        AirflowRun("manual__2026-03-01T11:00:00+00:00", "queued", "manual", {"dry_run": False}, scene.now_ms),
        AirflowRun(MANUAL, "success", "manual", params, scene.now_ms - 1000),
    ]
    return scene, runs


def test_a_paused_dag_says_so_and_its_buttons_unpause_it_first(scene: Scene) -> None:
    """Issue 51: a DAG created paused queued the dashboard's runs forever; now its row and page say
    it is paused, and its buttons say they unpause it (the page's script PATCHes is_paused first)."""
    paused = {"lakecleaner__customers": True, "lakecleaner__page-views": False}
    app = client(scene, dag_paused=lambda dag_id: paused.get(dag_id))
    rows = {t["topic"]: t for t in app.get("/api/topics", headers=as_user("admin")).json()["topics"]}
    assert (rows["customers"]["paused"], rows["page-views"]["paused"], rows["scratch"]["paused"]) == (True, False, None)
    assert app.get("/api/topics/customers", headers=as_user("admin")).json()["paused"] is True
    page = app.get("/topics/customers", headers=as_user("admin")).text
    assert 'data-paused-pill="lakecleaner__customers"' in page
    assert page.count('data-paused="true"') == 2 and ">Unpause and dry run<" in page
    assert ">Unpause and force compaction<" in page and "unpauses it first" in page
    other = app.get("/topics/page-views", headers=as_user("admin")).text
    assert 'data-paused="true"' not in other and ">Dry run<" in other and 'data-paused-pill="' not in other
    overview = app.get("/", headers=as_user("admin")).text
    assert overview.count('data-paused-pill="lakecleaner__customers"') == 1
    assert "/api/v2/dags/" in page and "update_mask=is_paused" in page  # the script unpauses through Airflow's API


def test_the_run_history_joins_reports_and_airflow_runs(history: tuple[Scene, list[AirflowRun]]) -> None:
    scene, airflow_runs = history
    app = client(scene, lambda dag_id, limit: airflow_runs if dag_id == "lakecleaner__page-views" else [])
    runs = app.get("/api/topics/page-views/runs", headers=as_user("viewer")).json()
    assert [(r["airflow_run_id"], r["state"]) for r in runs] == [(a.run_id, a.state) for a in airflow_runs]
    queued, done = runs
    assert queued["reports"] == [] and queued["result"] == "queued"
    assert done["reports"] == ["run"] and done["result"].startswith("dry run")
    assert done["params"]["dry_run"] is True and done["bytes_reclaimed"] == 0
    page = app.get("/topics/page-views", headers=as_user("viewer")).text
    assert 'href="/dags/lakecleaner__page-views/runs/manual__2026-03-01T10%3A00%3A00%2B00%3A00"' in page
    assert 'target="_top"' in page
    run = app.get(f"/api/topics/page-views/runs/{report_run_id(MANUAL)}", headers=as_user("viewer")).json()
    assert set(run["reports_content"]) == {"run"}
    assert run["reports_content"]["run"]["assess"]["params"]["dry_run"] is True
    html = app.get(f"/topics/page-views/runs/{report_run_id(MANUAL)}", headers=as_user("viewer"))
    assert html.status_code == 200 and "run.json" in html.text
    overview = app.get("/api/topics", headers=as_user("viewer")).json()["topics"]
    assert next(t for t in overview if t["topic"] == "page-views")["last_run"]["state"] == "queued"


def test_the_overview_comes_a_page_of_topics_at_a_time_and_filters_by_name(scene: Scene) -> None:
    """Issue 50: at 10,000 topics the overview is a page of them (1,000 by default), in name order,
    with links to the next and previous pages that keep `now`, the page size and the filter."""
    app = client(scene)
    every = [t["topic"] for t in app.get("/api/topics", headers=as_user("admin")).json()["topics"]]
    assert every == sorted(every) and len(every) == 3
    first = app.get("/api/topics?per_page=2", headers=as_user("admin")).json()
    second = app.get("/api/topics?per_page=2&page=2", headers=as_user("admin")).json()
    assert [t["topic"] for t in first["topics"] + second["topics"]] == every
    assert first["paging"] == {"page": 1, "per_page": 2, "pages": 2, "topics": 3, "match": None}
    matched = app.get("/api/topics?match=view", headers=as_user("admin")).json()
    assert [t["topic"] for t in matched["topics"]] == ["page-views"] and matched["paging"]["topics"] == 1
    html = app.get("/?per_page=2&now=2026-03-01T12:00:00Z", headers=as_user("admin")).text
    assert "page 1 of 2" in html and 'rel="next" href="?now=2026-03-01T12%3A00%3A00Z&amp;per_page=2&amp;page=2"' in html
    assert html.count('<tr class="topic"') == 2 and 'rel="prev"' not in html
    assert app.get("/api/topics?per_page=0", headers=as_user("admin")).status_code == 422


def test_the_topic_page_lists_the_runs_and_asks_airflow_once_for_its_table_and_charts(
    history: tuple[Scene, list[AirflowRun]],
) -> None:
    """Session 30's review: the run table and the history charts each listed the topic's run folders,
    asked Airflow for its DAG runs and read the same run summaries; one request does each once."""
    scene, airflow_runs = history
    asked: list[int] = []
    listed: list[str] = []

    def dag_runs(dag_id: str, limit: int) -> list[AirflowRun]:
        asked.append(limit)
        return airflow_runs if dag_id == "lakecleaner__page-views" else []

    def open_lake() -> Lake:
        lake = Lake.open(load_config(scene.config_path))
        listing = lake.store.list
        lake.store.list = lambda prefix: listed.append(prefix) or listing(prefix)  # type: ignore[method-assign]
        return lake

    app = client(scene, dag_runs, open_lake=open_lake)
    page = app.get("/topics/page-views?range=30d", headers=as_user("viewer")).text
    assert len(asked) == 1 and listed.count("_lakecleaner/runs/page-views/") == 1
    assert 'href="/dags/lakecleaner__page-views/runs/manual__2026-03-01T10%3A00%3A00%2B00%3A00"' in page  # the table
    assert 'data-run-id="' + report_run_id(MANUAL) + '"' in page  # and the charts, from the same records


DAMAGE = {
    # (object, bytes): one damaged object of each kind the dashboard reads
    "topics/customers/partition=1/manifest.json": b'{"topic": "customers", "partition": 1, "segments": ["x"]}',
    "topics/scratch/topic.json": b'{"name": "scratch", "partitions": 1e999}',
    "_lakecleaner/cleaner/customers.json": b'{"topic": "customers", "uncleanable": [], "last_run": 0}',
    "_consumer_offsets/billing.json": b'{"group": "billing", "topics": {"page-views": {"0": {"offset": 1e999}}}}',
    "_lakecleaner/runs/page-views/r-not-json/run.json": b"{not json",
    "_lakecleaner/runs/page-views/r-wrong-types/run.json": b'{"compaction": {"partitions": "x"}, "assess": 3}',
    "_lakecleaner/runs/page-views/r-nested/report.json": b"[" * 100_000,
}


@pytest.mark.backends("local", "seaweedfs")
def test_damaged_objects_are_one_error_each_and_every_page_still_answers(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    """Issue #45: whatever one object holds, the pages and the API answer 200, the damaged topic or
    partition or run says why, and the rest is shown."""
    scene = make_scene(tmp_path, None if backend == "local" else request.getfixturevalue("seaweedfs_endpoint"))
    lake = scene.lake
    for key, data in DAMAGE.items():
        lake.store.write(key, data)
    app, admin = client(scene), as_user("admin")
    for path in PAGES:
        response = app.get(path, headers=admin, params={"now": str(scene.now_ms)})
        assert response.status_code == 200, (path, response.text[:500])
    topics = {t["topic"]: t for t in app.get("/api/topics", headers=admin).json()["topics"]}
    assert "topics/scratch/topic.json" in topics["scratch"]["error"] and "repair" in topics["scratch"]["error"]
    assert topics["page-views"].get("error") is None and topics["customers"].get("error") is None
    unreadable = app.get("/api/topics/customers", headers=admin).json()["unreadable_partitions"]
    assert list(unreadable) == ["1"] and "partition=1/manifest.json is corrupt" in unreadable["1"]
    assert "lakecleaner repair" in unreadable["1"]
    runs = {r["run_id"]: r for r in app.get("/api/topics/page-views/runs", headers=admin).json()}
    for run_id in ("r-not-json", "r-wrong-types", "r-nested"):
        assert runs[run_id]["result"].startswith("unreadable report"), runs[run_id]


def test_the_erasure_overview_lists_the_readable_topics_deadlines_soonest_first(scene: Scene) -> None:
    """`/erasure` (issue 50): the deletion deadlines of the topics the user may read, soonest first,
    each as planned from the manifests at the page's now; `within_hours` keeps the overdue and
    those due by then."""
    app, lake, now = client(scene), scene.lake, scene.now_ms
    facts = [facts_of_state(load_topic(lake, t, now)) for t in lake.list_topics()]
    expected = [{k: v for k, v in d.to_dict().items() if k != "from"} for d in lake_deadlines(facts, now)]
    assert len(expected) > 1  # the scene has compacted partitions with deadlines
    page = app.get("/api/erasure", params={"now": str(now)}, headers=as_user("viewer")).json()
    assert [{k: v for k, v in d.items() if k not in ("at", "from")} for d in page["deadlines"]] == expected
    mine = app.get("/api/erasure", params={"now": str(now)}, headers=as_user("customers-only")).json()
    assert {d["topic"] for d in mine["deadlines"]} == {"customers"} & {d["topic"] for d in expected}
    soonest = expected[0]["seconds_left"] // 3600
    within = app.get(
        "/api/erasure", params={"now": str(now), "within_hours": max(soonest, 0)}, headers=as_user("viewer")
    )
    kept = [d for d in expected if d["seconds_left"] <= max(soonest, 0) * 3600]
    assert [(d["topic"], d["partition"]) for d in within.json()["deadlines"]] == [
        (d["topic"], d["partition"]) for d in kept
    ]
    second = app.get("/api/erasure", params={"now": str(now), "per_page": 1, "page": 2}, headers=as_user("viewer"))
    assert [(d["topic"], d["partition"]) for d in second.json()["deadlines"]] == [
        (d["topic"], d["partition"]) for d in expected[1:2]
    ]
    assert second.json()["paging"]["deadlines"] == len(expected)
    html = app.get("/erasure", params={"now": str(now)}, headers=as_user("viewer")).text
    assert all(f'data-topic="{d["topic"]}" data-partition="{d["partition"]}"' in html for d in expected)
    assert app.get("/api/erasure", params={"within_hours": -1}, headers=as_user("viewer")).status_code == 422
