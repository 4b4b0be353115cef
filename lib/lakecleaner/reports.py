"""Run reports, stored under `_lakecleaner/runs/<topic>/<run id>/<name>.json`."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from lakecleaner.clock import wall_clock_ms
from lakecleaner.io import ObjectStore

RUNS_PREFIX = "_lakecleaner/runs/"


def new_run_id(now_ms: int | None = None) -> str:
    """A sortable, unique run id: UTC time of `now` (or the wall clock) plus a random suffix."""
    ms = wall_clock_ms() if now_ms is None else now_ms
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime(ms / 1000)) + f"-{uuid.uuid4().hex[:8]}"


def report_key(topic: str, run_id: str, name: str) -> str:
    return f"{RUNS_PREFIX}{topic}/{run_id}/{name}.json"


def store_report(store: ObjectStore, topic: str, run_id: str, name: str, report: dict[str, Any]) -> str:
    """Write a report (JSON) and return its location."""
    key = report_key(topic, run_id, name)
    store.write(key, json.dumps(report, indent=1, default=str).encode())
    return store.location(key)


def load_report(store: ObjectStore, topic: str, run_id: str, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(store.read(report_key(topic, run_id, name)))
    return data
