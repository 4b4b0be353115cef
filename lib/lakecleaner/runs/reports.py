"""Run reports, stored under `_lakecleaner/runs/<topic>/<run id>/<name>.json`."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable
from typing import Any

from lakecleaner.clock import wall_clock_ms
from lakecleaner.errors import LakeCleanerError
from lakecleaner.io import ObjectInfo, ObjectStore
from lakecleaner.io.concurrent import map_ordered

RUNS_PREFIX = "_lakecleaner/runs/"


def new_run_id(now_ms: int | None = None) -> str:
    """A sortable, unique run id: UTC time of `now` (or the wall clock) plus a random suffix."""
    ms = wall_clock_ms() if now_ms is None else now_ms
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime(ms / 1000)) + f"-{uuid.uuid4().hex[:8]}"


def report_key(topic: str, run_id: str, name: str) -> str:
    return f"{runs_prefix(topic)}{run_id}/{name}.json"


def store_report(store: ObjectStore, topic: str, run_id: str, name: str, report: dict[str, Any]) -> str:
    """Write a report (JSON) and return its location."""
    key = report_key(topic, run_id, name)
    store.write(key, json.dumps(report, indent=1, default=str).encode())
    return store.location(key)


#: No run report of ours comes near this (a compaction of thousands of partitions writes a few MB).
MAX_REPORT_BYTES = 64 * 1024 * 1024


class CorruptReport(LakeCleanerError):
    """A stored run report that is not a JSON object of ours."""


def load_report(store: ObjectStore, topic: str, run_id: str, name: str) -> dict[str, Any]:
    """A run report as a JSON object; CorruptReport naming it when it is not one (too large, not
    JSON, nested past what Python parses, not an object). Its fields are read by those who show
    them, each of which must bear a report of another shape (`runs/records.py`)."""
    key = report_key(topic, run_id, name)
    data = store.read(key)
    try:
        if len(data) > MAX_REPORT_BYTES:
            raise ValueError(f"{len(data)} bytes, more than a report of ours holds")
        raw = json.loads(data)
        if not isinstance(raw, dict):
            raise ValueError("not a JSON object")
    except (ValueError, RecursionError) as exc:
        raise CorruptReport(f"run report {store.location(key)} is unreadable ({str(exc)[:200]})") from None
    return raw


def runs_prefix(topic: str) -> str:
    """The folder of a topic's run folders."""
    return f"{RUNS_PREFIX}{topic}/"


def expired_runs(listing: Iterable[ObjectInfo], topic: str, now_ms: int, retention_ms: int) -> dict[str, list[str]]:
    """The objects of each run of `topic` (from a listing of `runs_prefix(topic)`) whose newest
    object was written at least `retention_ms` before `now_ms`, by run id — never the run written
    last, whatever its age: a topic whose DAG stopped keeps its last word."""
    prefix = runs_prefix(topic)
    runs: dict[str, list[ObjectInfo]] = {}
    for obj in listing:
        run_id, slash, _ = obj.key[len(prefix) :].partition("/")
        if obj.key.startswith(prefix) and slash:
            runs.setdefault(run_id, []).append(obj)
    newest = {run_id: max(o.mtime_ms for o in objects) for run_id, objects in runs.items()}
    last = max(newest, key=lambda run_id: (newest[run_id], run_id), default=None)
    return {
        run_id: [o.key for o in objects]
        for run_id, objects in runs.items()
        if run_id != last and newest[run_id] + retention_ms <= now_ms
    }


def prune_runs(
    store: ObjectStore, topic: str, now_ms: int, retention_ms: int, *, dry_run: bool, concurrency: int
) -> int:
    """Delete the folders of `topic`'s runs older than `retention_ms` (`expired_runs`), their
    objects `concurrency` at a time; how many runs went (or would go, with `dry_run`)."""
    expired = expired_runs(store.list(runs_prefix(topic)), topic, now_ms, retention_ms)
    if not dry_run:
        map_ordered(store.delete, [key for keys in expired.values() for key in keys], concurrency)
    return len(expired)
