"""A browser session signed in to a local Airflow (the dashboard's and the UI's browser tests)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import Browser, Page

from tests.support.local_airflow import LocalAirflow


@contextmanager
def signed_in_page(browser: Browser, airflow: LocalAirflow, artifacts: Path) -> Iterator[Page]:
    """A fresh browser session signed in to `airflow` as admin through its login form (screenshots
    go to `artifacts`)."""
    artifacts.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    page.set_default_timeout(30_000)
    airflow.sign_in(page, "admin")
    try:
        yield page
    finally:
        context.close()
