"""Issue #13: what a `make airflow-ui` user does, in a real browser against the package's Airflow (set up
as `make airflow-ui` sets it up): sign in, start a compacted topic's DAG with the Airflow UI's Trigger
button, and with the dashboard's Force button; the scheduler runs each through `compact` to success.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page

from lakecleaner.clock import epoch_ms
from lakecleaner.runs.naming import dag_id_of
from tests.scheduler.conftest import World
from tests.scheduler.test_compacted import assert_compacted_to_the_winners, finished_runs
from tests.scheduler.topics import CDC_DASHBOARD, CDC_UI
from tests.support.browser import signed_in_page

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts" / "scheduler"


@pytest.fixture
def page(browser: Browser, world: World) -> Iterator[Page]:
    """A fresh browser session signed in to Airflow as admin, through its login form."""
    with signed_in_page(browser, world.airflow, ARTIFACTS) as signed_in:
        yield signed_in


def test_the_airflow_ui_trigger_button_runs_a_compacted_topic_to_success(page: Page, world: World) -> None:
    dag_id = dag_id_of(CDC_UI)
    world.airflow.set_paused(dag_id, False)
    page.goto(f"{world.airflow.base_url}/dags/{dag_id}")
    page.get_by_role("button", name="Trigger").first.click()
    dialog = page.get_by_role("dialog")
    dialog.wait_for()
    page.screenshot(path=ARTIFACTS / "trigger-form.png")
    dialog.get_by_role("button", name="Trigger").click()
    (run,) = finished_runs(world, CDC_UI, 1)
    assert run["run_type"] == "manual"
    assert_compacted_to_the_winners(world, CDC_UI, run, epoch_ms_of(run))
    page.goto(f"{world.airflow.base_url}/dags/{dag_id}/runs/{run['dag_run_id']}")
    page.screenshot(path=ARTIFACTS / "triggered-run.png", full_page=True)


def test_the_dashboards_force_button_runs_a_compacted_topic_to_success(page: Page, world: World) -> None:
    dag_id = dag_id_of(CDC_DASHBOARD)
    world.airflow.set_paused(dag_id, False)
    page.on("dialog", lambda confirm: confirm.accept())  # the button asks before forcing
    page.goto(f"{world.airflow.base_url}/lakecleaner/topics/{CDC_DASHBOARD}")
    page.locator("button[data-trigger=force]").click()
    page.locator("#trigger-result a").wait_for()
    run_id = page.locator("#trigger-result").get_attribute("data-run-id")
    (run,) = finished_runs(world, CDC_DASHBOARD, 1)
    assert run["dag_run_id"] == run_id and run["conf"] == {"dry_run": False, "force": True, "partitions": []}
    assert_compacted_to_the_winners(world, CDC_DASHBOARD, run, epoch_ms_of(run))


def epoch_ms_of(run: dict[str, object]) -> int:
    """A manual run's now: its data interval's end (its logical date), or its run_after without one."""
    when = run["data_interval_end"] or run["run_after"]
    return epoch_ms(datetime.fromisoformat(str(when)))
