"""Regenerate the dashboard screenshots of the docs: docs/img/dashboard.png (the README's) and
docs/img/dashboard-topic.png, docs/img/dashboard-partition.png.

    uv run python -m scripts.screenshot_dashboard [--out docs/img]

It builds the sample topics of the packaged sample config (smaller, with 256 kB segments) in a
temporary lake, starts a throwaway local Airflow with lakecleaner's DAGs and plugin
(tests/support/local_airflow.py: 127.0.0.1, SQLite, nothing outside the temporary
directory), and drives Debian's headless Chromium (installed with apt-get when missing):
the partition page first, then one real run of page-views (retention, no Spark needed) and a
dry run of customers-cdc, so that the overview and the run history have something to show.
Takes about three minutes.
"""

from __future__ import annotations

import argparse
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from playwright.sync_api import Page, ViewportSize, sync_playwright
from tests.support.local_airflow import CHROMIUM, CHROMIUM_ARGS, LocalAirflow, ensure_chromium

from lakecleaner.config import load_config, sample_config_text
from lakecleaner.demo import CDC_TOPIC, EVENTS_TOPIC, DemoSizes, build_sample_topics
from lakecleaner.lake import Lake

REPO_ROOT = Path(__file__).resolve().parents[1]
SIZES = DemoSizes(cdc_records=20_000, cdc_keys=3_000, event_records=20_000, batch_records=2_000)
VIEWPORT: ViewportSize = {"width": 1440, "height": 900}


def write_config(directory: Path) -> Path:
    """The sample config with a lake in `directory`, smaller segments and no schedules."""
    config: dict[str, Any] = yaml.safe_load(sample_config_text())
    config["lake"]["uri"] = f"file://{directory / 'lake'}"
    for spec in config["topics"].values():
        spec["schedule"] = None
        spec["config"]["segment.bytes"] = 262_144
    path = directory / "lakecleaner.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def run_dag(airflow: LocalAirflow, topic: str, conf: dict[str, Any]) -> str:
    """Trigger the topic's DAG (unpaused) with `conf`; returns the run id."""
    dag_id = f"lakecleaner__{topic}"
    airflow.api("PATCH", f"/api/v2/dags/{dag_id}", user="admin", body={"is_paused": False})
    body = {"logical_date": datetime.now(UTC).isoformat(), "conf": conf}
    status, run = airflow.api("POST", f"/api/v2/dags/{dag_id}/dagRuns", user="admin", body=body)
    if status != 200:
        raise RuntimeError(f"could not trigger {dag_id}: HTTP {status} {run}")
    return str(run["dag_run_id"])


def open_dashboard(page: Page, airflow: LocalAirflow) -> None:
    """The dashboard as a user finds it: Browse → Lake retention in the Airflow UI."""
    page.goto(f"{airflow.base_url}/")
    page.get_by_role("button", name="Browse").click()
    page.get_by_role("menuitem", name="Lake retention").click()
    page.frame_locator("iframe").locator("#topics tr.topic").first.wait_for()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "docs" / "img", help="where to write the PNGs")
    out = parser.parse_args().out
    missing = ensure_chromium()
    if missing:
        raise SystemExit(missing)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="lakecleaner-screenshots-") as tmp:
        directory = Path(tmp)
        config_path = write_config(directory)
        build_sample_topics(Lake.open(load_config(config_path)), SIZES)
        with LocalAirflow(directory / "airflow", config_path) as airflow, sync_playwright() as playwright:
            airflow.wait_for_dags([f"lakecleaner__{CDC_TOPIC}", f"lakecleaner__{EVENTS_TOPIC}"])
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            page = browser.new_page(viewport=VIEWPORT)
            airflow.sign_in(page, "admin")
            page.goto(f"{airflow.base_url}/lakecleaner/topics/{EVENTS_TOPIC}/partitions/0")
            page.screenshot(path=out / "dashboard-partition.png", full_page=True)
            runs = {
                EVENTS_TOPIC: run_dag(airflow, EVENTS_TOPIC, {"dry_run": False}),
                CDC_TOPIC: run_dag(airflow, CDC_TOPIC, {"dry_run": True}),
            }
            for topic, run_id in runs.items():
                airflow.wait_for_run(f"lakecleaner__{topic}", run_id, timeout_s=300)
            open_dashboard(page, airflow)
            page.screenshot(path=out / "dashboard.png")
            page.goto(f"{airflow.base_url}/lakecleaner/topics/{EVENTS_TOPIC}")
            page.screenshot(path=out / "dashboard-topic.png", full_page=True)
            browser.close()
    print(f"wrote dashboard.png, dashboard-topic.png, dashboard-partition.png to {out}")


if __name__ == "__main__":
    main()
