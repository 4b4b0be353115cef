"""Compactions racing other writers: appends during a run are kept (rebase), and of two runs
compacting the same partition one commits and the other aborts cleanly."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from lakecleaner.engine.report import ABORTED, COMMITTED, FAILED, RunReport
from lakecleaner.faults import on_crash_point
from lakecleaner.lake import Lake
from lakecleaner.log.records import Record
from lakecleaner.log.repair import RepairReport, repair_partition
from tests.engine.helpers import compact, keyed, new_topic, requests, rows, unreferenced_files
from tests.engine.reference_model import expected_pass
from tests.support.backends import ALL_BACKENDS

pytestmark = pytest.mark.backends(*ALL_BACKENDS)  # racing compactions on the real object store too (issue #15)


def _two_segments_and_an_active_one(lake: Lake):  # type: ignore[no-untyped-def]
    topic = new_topic(lake, delete_retention_ms=1000)
    log = topic.partition(0)
    log.append(keyed({"a": "1", "b": "1", "c": "1"}), now_ms=100)
    log.roll(now_ms=100)
    log.append(keyed({"a": "2", "b": None}), now_ms=100)
    log.roll(now_ms=100)
    log.append(keyed({"a": "3"}), now_ms=100)
    return topic


def test_records_appended_during_a_compaction_are_kept(spark: SparkSession, lake: Lake) -> None:
    topic = _two_segments_and_an_active_one(lake)
    log = topic.partition(0)
    request = requests(topic, 500)[0]
    expected = expected_pass(rows(topic), log.manifest(), request.first_uncleanable_offset, topic.config, 500)
    appended = [Record(f"new{i}".encode(), b"v", 200) for i in range(3)]

    def append_meanwhile() -> None:
        log.append(appended[:2], now_ms=200)
        log.roll(now_ms=200)
        log.append(appended[2:], now_ms=200)

    with on_crash_point("engine.after_staging", append_meanwhile):
        report = compact(spark, lake, topic, 500)
    assert report.partition(0).status == COMMITTED, report.partition(0).message
    after = rows(topic)
    assert after[: len(expected.rows)] == expected.rows
    assert [(r["key"], r["offset"]) for r in after[len(expected.rows) :]] == [(b"new0", 6), (b"new1", 7), (b"new2", 8)]
    manifest = log.manifest()
    assert manifest.problems() == [] and manifest.next_offset == 9
    assert unreferenced_files(lake, topic) == []


def test_of_two_racing_compactions_one_commits_and_the_other_aborts(spark: SparkSession, lake: Lake) -> None:
    topic = _two_segments_and_an_active_one(lake)
    log = topic.partition(0)
    request = requests(topic, 500)[0]
    expected = expected_pass(rows(topic), log.manifest(), request.first_uncleanable_offset, topic.config, 500)
    winner: list[RunReport] = []
    started: list[bool] = []

    def the_other_run() -> None:
        if not started:
            started.append(True)
            winner.append(compact(spark, lake, topic, 500))

    with on_crash_point("engine.after_validation", the_other_run):
        loser = compact(spark, lake, topic, 500)
    assert winner[0].partition(0).status == COMMITTED
    assert loser.partition(0).status == ABORTED
    assert "replaced or deleted by another writer" in loser.partition(0).message
    assert loser.partition(0).files_written and winner[0].partition(0).files_written
    assert rows(topic) == expected.rows
    assert log.manifest().problems() == []
    assert unreferenced_files(lake, topic) == []


def test_a_repair_during_a_compaction_never_adopts_its_staged_files(spark: SparkSession, lake: Lake) -> None:
    """`repair --force` while a run holds its lease leaves the run's staged outputs out; the run then
    finds its inputs gone and aborts, and says so (issue #44: it reported `committed`)."""
    topic = _two_segments_and_an_active_one(lake)
    log = topic.partition(0)
    before = rows(topic)
    repaired: list[RepairReport] = []

    def repair_meanwhile() -> None:
        repaired.append(repair_partition(lake.store, topic.name, 0, topic.config, force=True, now_ms=500))

    with on_crash_point("engine.after_staging", repair_meanwhile):
        report = compact(spark, lake, topic, 500)
    assert repaired[0].in_flight and not repaired[0].left_out
    assert report.partition(0).status == ABORTED, report.partition(0).message
    assert rows(topic) == before and log.manifest().problems() == []
    assert not set(repaired[0].in_flight) & log.manifest().referenced_paths()
    assert unreferenced_files(lake, topic) == []  # the aborted run deleted what it staged


def test_a_compaction_whose_outputs_a_repair_adopted_reports_it(spark: SparkSession, lake: Lake) -> None:
    """Where a repair did take a run's outputs in (its lease expired, and its inputs carry no commit
    record, as in a lake written before records), the run reports that, not `committed`, and
    deletes nothing: the log references the files now."""
    topic = _two_segments_and_an_active_one(lake)
    log = topic.partition(0)
    request = requests(topic, 500)[0]
    expected = expected_pass(rows(topic), log.manifest(), request.first_uncleanable_offset, topic.config, 500)

    def repair_as_if_the_run_were_dead() -> None:
        for obj in lake.store.list(log.prefix + "_commits/") + lake.store.list(log.prefix + "_staging/"):
            if obj.key.endswith(".lease") or "/_commits/" in obj.key:
                lake.store.delete(obj.key)
        repair_partition(lake.store, topic.name, 0, topic.config, force=True, now_ms=500)

    with on_crash_point("engine.after_staging", repair_as_if_the_run_were_dead):
        report = compact(spark, lake, topic, 500)
    outcome = report.partition(0)
    assert outcome.status == FAILED and "took this writer's files into the log" in outcome.message, outcome.message
    adopted = set(outcome.files_written) & log.manifest().referenced_paths()
    assert adopted and all(lake.store.exists(log.prefix + path) for path in adopted)
    assert rows(topic) == expected.rows and log.manifest().problems() == []  # the log the repair took in
