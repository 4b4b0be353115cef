"""The dashboard in a real browser: Debian's Chromium, headless, driven by Playwright, against the
session's Airflow. Sign in through Airflow's login form, open "Lake retention" from the UI's
navigation, follow the links, check the drawing against the manifest, and trigger a dry run that
Airflow then runs. Screenshots of every page go to tests/artifacts/dashboard/.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import pytest
from playwright.sync_api import Browser, Page

from lakecleaner.clock import wall_clock_ms
from lakecleaner.runs.naming import report_run_id
from tests.dashboard.conftest import ARTIFACTS, Scene, StatsdListener
from tests.dashboard.scene import ANALYTICS, BILLING, CHECKPOINT
from tests.support.browser import signed_in_page
from tests.support.local_airflow import LocalAirflow

DAG = "lakecleaner__page-views"


@pytest.fixture
def page(browser: Browser, airflow: LocalAirflow) -> Iterator[Page]:
    """A fresh browser session signed in to Airflow as admin."""
    with signed_in_page(browser, airflow, ARTIFACTS) as signed_in:
        yield signed_in


def _offsets(element: Any, *names: str) -> tuple[int, ...]:
    return tuple(int(element.get_attribute(name) or -1) for name in names)


def drawing(page: Page) -> dict[str, Any]:
    """The offsets the partition's SVG carries: segments, regions, markers, retention deletions."""
    root = page.locator("#log-bar svg")
    regions = root.locator("rect.region").all()
    return {
        "segments": [_offsets(s, "data-base-offset", "data-next-offset") for s in root.locator("rect.segment").all()],
        "regions": {r.get_attribute("data-kind"): _offsets(r, "data-start", "data-end") for r in regions},
        "markers": [
            (m.get_attribute("data-marker"), m.get_attribute("data-group"), *_offsets(m, "data-offset"))
            for m in root.locator("g.marker").all()
        ],
        "deleted": [
            (s.get_attribute("data-retention-rule"), *_offsets(s, "data-next-offset"))
            for s in root.locator("rect.retention-delete").all()
        ],
    }


def test_the_dashboard_opens_from_airflows_navigation(page: Page, airflow: LocalAirflow, scene: Scene) -> None:
    page.get_by_role("button", name="Browse").click()
    page.get_by_role("menuitem", name="Lake retention").click()
    page.wait_for_url(f"{airflow.base_url}/plugin/lake-retention**")
    frame = page.frame_locator("iframe")
    rows = frame.locator("#topics tr.topic")
    rows.first.wait_for()
    assert rows.evaluate_all("rows => rows.map(r => r.dataset.topic)") == ["customers", "page-views", "scratch"]
    manifests = scene.lake.topic("page-views").manifests()
    records = frame.locator("tr[data-topic=page-views] [data-records]").get_attribute("data-records")
    assert records == str(sum(m.record_count for m in manifests.values()))
    assert frame.locator("tr[data-topic=customers] td[data-partitions-due]").get_attribute("data-partitions-due") == "2"
    page.screenshot(path=ARTIFACTS / "overview-in-airflow.png")


def test_a_partitions_drawing_matches_its_manifest(page: Page, airflow: LocalAirflow, scene: Scene) -> None:
    page.goto(f"{airflow.base_url}/lakecleaner/")
    page.get_by_role("link", name="customers", exact=True).click()
    page.locator("#partitions").wait_for()
    page.screenshot(path=ARTIFACTS / "topic-customers.png", full_page=True)
    page.locator("tr.partition[data-partition='0'] a").first.click()
    page.locator("#log-bar svg").wait_for()
    manifest = scene.lake.topic("customers").partition(0).manifest()
    drawn = drawing(page)
    assert drawn["segments"] == [(s.base_offset, s.next_offset) for s in manifest.segments]
    active = manifest.segments[-1].base_offset
    assert drawn["regions"] == {
        "clean": (0, CHECKPOINT),
        "dirty": (CHECKPOINT, 300),
        "uncleanable": (300, active),
        "active": (active, manifest.next_offset),
    }
    assert drawn["markers"] == [("log-start", None, 0), ("cleaner-checkpoint", None, CHECKPOINT)]
    assert page.locator("[data-field=first_dirty_offset]").inner_text() == str(CHECKPOINT)
    page.screenshot(path=ARTIFACTS / "partition-customers-0.png", full_page=True)

    page.goto(f"{airflow.base_url}/lakecleaner/topics/page-views/partitions/0")
    drawn = drawing(page)
    assert sorted(drawn["markers"]) == [
        ("consumer-group", "analytics", ANALYTICS),
        ("consumer-group", "billing", BILLING),
        ("log-start", None, 0),
        ("min-committed", None, BILLING),
    ]
    assert drawn["deleted"] == [("retention.ms", 100), ("consumed", 200)]
    page.screenshot(path=ARTIFACTS / "partition-page-views-0.png", full_page=True)


def test_a_dry_run_started_from_the_dashboard_runs_in_airflow(
    page: Page, airflow: LocalAirflow, statsd: StatsdListener
) -> None:
    """The DAG is paused (Airflow creates DAGs paused): the page says so, its button offers to unpause
    it, and accepting unpauses it through Airflow's API before starting the run (issue 51)."""
    assert airflow.api("PATCH", f"/api/v2/dags/{DAG}", user="admin", body={"is_paused": True})[0] == 200
    page.goto(f"{airflow.base_url}/lakecleaner/topics/page-views")
    button = page.locator("button[data-trigger=dry_run]")
    assert button.inner_text() == "Unpause and dry run"
    assert page.locator(f"[data-paused-pill='{DAG}']").count() == 1
    started_first = wall_clock_ms()
    asked: list[str] = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
    button.click()
    result = page.locator("#trigger-result a")
    result.wait_for()
    run_id = page.locator("#trigger-result").get_attribute("data-run-id") or ""
    assert result.get_attribute("href") == f"/dags/{DAG}/runs/{quote(run_id, safe='')}"
    status, run = airflow.api("GET", f"/api/v2/dags/{DAG}/dagRuns/{quote(run_id, safe='')}", user="admin")
    assert status == 200 and run["conf"] == {"dry_run": True, "force": False, "partitions": []}
    page.screenshot(path=ARTIFACTS / "trigger-dry-run.png")
    assert asked and "is paused" in asked[0]
    assert airflow.api("GET", f"/api/v2/dags/{DAG}", user="admin")[1]["is_paused"] is False
    assert button.inner_text() == "Dry run" and page.locator(f"[data-paused-pill='{DAG}']").count() == 0
    finished = airflow.wait_for_run(DAG, run_id, timeout_s=240)
    assert finished["state"] == "success"

    page.reload()
    row = page.locator(f"#runs tr.run[data-run-id='{report_run_id(run_id)}']")
    assert "dry run" in row.inner_text()
    assert row.locator("a.dag-run-link").get_attribute("href") == f"/dags/{DAG}/runs/{quote(run_id, safe='')}"
    page.screenshot(path=ARTIFACTS / "run-history.png", full_page=True)
    # Issue 51: a second run at an earlier "now" (a logical date two hours back); both runs are
    # points of the topic page's charts, each at its run's "now" with the figures its report stored
    earlier = (datetime.now(UTC) - timedelta(hours=2)).replace(microsecond=0).isoformat()
    started_second = wall_clock_ms()
    status, second = airflow.api(
        "POST", f"/api/v2/dags/{DAG}/dagRuns", user="admin", body={"logical_date": earlier, "conf": {"dry_run": True}}
    )
    assert status == 200, second
    assert airflow.wait_for_run(DAG, second["dag_run_id"], timeout_s=240)["state"] == "success"
    page.reload()
    status, history = airflow.api("GET", "/lakecleaner/api/topics/page-views/history", user="admin")
    assert status == 200
    topic_points = {p["run_id"]: p for p in history["points"] if p["partition"] is None and p["phase"] == "before"}
    ours = [report_run_id(run_id), report_run_id(second["dag_run_id"])]
    assert set(ours) <= set(topic_points) and topic_points[ours[0]]["time_ms"] > topic_points[ours[1]]["time_ms"]
    for key, started_after in zip(ours, (started_first, started_second), strict=True):
        report = airflow.api("GET", f"/lakecleaner/api/topics/page-views/runs/{key}", user="admin")[1]
        stored = report["reports_content"]["run"]
        # Issue 78: a run's duration is when its tasks ran, not its logical date: the run two hours
        # back took seconds, like the other, and both ran after the test asked for them
        assert started_after <= report["start_ms"] <= report["end_ms"] <= wall_clock_ms()
        assert report["duration_s"] == (report["end_ms"] - report["start_ms"]) / 1000 < 240
        size = page.locator(f"svg[data-chart='log size'] circle[data-run-id='{key}']")
        assert size.count() == 2  # the state the run found, and the state it left
        before, after = (size.nth(i) for i in range(2))
        assert int(before.get_attribute("data-time-ms") or 0) == report["now_ms"] == topic_points[key]["time_ms"]
        assert int(after.get_attribute("data-time-ms") or 0) == report["now_ms"] + round(report["duration_s"] * 1000)
        for circle, part in ((before, "assess"), (after, "after")):
            figures = stored[part]["figures"]
            assert float(circle.get_attribute("data-value") or 0) == sum(f["size_bytes"] for f in figures) > 0
        assert (before.locator("title").text_content() or "").startswith("topic size: ")  # shown on hover
        took = page.locator(f"#runs tr.run[data-run-id='{key}'] [data-duration-s]")
        assert float(took.get_attribute("data-duration-s") or -1) == report["duration_s"]
        duration = page.locator(f"svg[data-chart='run duration and outcome'] circle[data-run-id='{key}']")
        assert float(duration.get_attribute("data-value") or -1) == report["duration_s"]
    page.locator("#history").screenshot(path=ARTIFACTS / "history.png")
    row.locator("a").first.click()
    page.locator("#quality").wait_for()
    page.screenshot(path=ARTIFACTS / "run-report.png", full_page=True)

    gauges = statsd.metrics("airflow.lakecleaner.page-views.")
    assert gauges["airflow.lakecleaner.page-views.partitions_due"] == "0|g"
    assert gauges["airflow.lakecleaner.page-views.bytes_reclaimed"] == "0|c"


#: The narrowest window the pages are laid out for (issue 78: a 1,440 px window cut the overview's
#: "Run now" column off).
WINDOW_PX = 1280


def test_every_page_fits_a_1280_pixel_window(page: Page, airflow: LocalAirflow) -> None:
    """Every page's tables fit the window without a horizontal scroll, with their last column
    whole, after the runs above left long run ids and results in them."""
    page.set_viewport_size({"width": WINDOW_PX, "height": 900})
    base = f"{airflow.base_url}/lakecleaner"
    for path in ("/", "/topics/page-views", "/topics/customers", "/topics/customers/partitions/0", "/erasure"):
        page.goto(base + path)
        page.locator("table").first.wait_for()
        widths = page.evaluate(
            "() => [document.documentElement.scrollWidth,"
            " ...[...document.querySelectorAll('table')].map(t => Math.ceil(t.getBoundingClientRect().right))]"
        )
        page.screenshot(path=ARTIFACTS / f"at-{WINDOW_PX}px-{path.strip('/').replace('/', '-') or 'overview'}.png")
        columns = page.evaluate(
            "() => [...document.querySelectorAll('table')].map(t => [...t.querySelectorAll('th')]"
            ".map(h => h.innerText.slice(0, 12) + ':' + Math.round(h.getBoundingClientRect().width)))"
        )
        assert max(widths) <= WINDOW_PX, (path, widths, columns)
    page.goto(base + "/")
    run_now = page.locator("#topics th").last
    assert run_now.inner_text().strip().lower() == "run now"
    box = run_now.bounding_box()
    assert box is not None and box["x"] + box["width"] <= WINDOW_PX
