"""Issue #47: a mirrored topic's DAG under the real scheduler starts with `mirror`, in the pool
`lakecleaner airflow setup` created, which brings the Kafka topic's records into the lake at their
own offsets before the topic is assessed and compacted; the run's summary carries each
partition's lag. Issue #74: a partition the mirror cannot store fails the task (once: no retry)
after the others were mirrored, and the run's summary says which and why."""

from __future__ import annotations

from lakecleaner.runs.naming import report_run_id
from lakecleaner.runs.outcome import failures as summary_failures
from lakecleaner.runs.reports import load_report
from tests.scheduler.conftest import World
from tests.scheduler.topics import MIRRORED
from tests.test_mirror import lake_view, sample


def test_a_mirrored_topics_run_mirrors_first_and_reports_the_lag(world: World) -> None:
    world.kafka.produce(world.mirrored_source, sample(300))
    run_id, states = world.run_now(MIRRORED)
    assert states["mirror"] == ("success", "lakecleaner_mirror") and states["assess"][0] == "success"
    kafka_view, lake = world.kafka.read_all(world.mirrored_source), lake_view(world.lake, MIRRORED)
    for p, records in kafka_view.items():  # mirrored byte for byte, then compacted by the same run
        assert set(lake[p]) <= set(records)
        assert {r.key: r for r in lake[p]} == {r.key: r for r in records}  # every key's latest record stays
        assert world.lake.topic(MIRRORED).partition(p).manifest().next_offset == records[-1].offset + 1
    summary = load_report(world.lake.store, MIRRORED, report_run_id(run_id), "run")
    assert summary["mirror"]["records"] == 300 and summary["mirror"]["source_topic"] == world.mirrored_source
    assert [p["lag"] for p in summary["mirror"]["partitions"]] == [0, 0, 0, 0]
    assert summary["compaction"] is not None  # the mirrored records were compacted in the same run
    status, shown = world.airflow.api("GET", f"/lakecleaner/api/topics/{MIRRORED}", user="admin")
    assert status == 200 and shown["mirror_lag"] == 0  # the dashboard's "records behind Kafka"
    page_status, page = world.airflow.api("GET", f"/lakecleaner/topics/{MIRRORED}", user="admin", raw=True)
    assert page_status == 200 and 'data-metric="mirror-lag"' in page

    ends = {p: world.lake.topic(MIRRORED).partition(p).manifest().next_offset for p in range(4)}
    more = sample(40, start=300)
    keyless = next(r for r in more if r["partition"] == 2)
    keyless["key"] = None  # the compacted lake topic cannot hold it
    world.kafka.produce(world.mirrored_source, more)
    failed_id, tries = world.run_failing(MIRRORED)
    assert tries["mirror"] == ("failed", 1) and tries["assess"][0] == "success"
    summary = load_report(world.lake.store, MIRRORED, report_run_id(failed_id), "run")
    statuses = {p["partition"]: p["status"] for p in summary["mirror"]["partitions"]}
    assert statuses == {0: "mirrored", 1: "mirrored", 2: "failed", 3: "mirrored"}
    (failure,) = [f for f in summary_failures(summary) if f.startswith("mirror of partition 2")]
    assert f"record at offset {ends[2]}" in failure and "has no key" in failure
    for p in (0, 1, 3):
        assert world.lake.topic(MIRRORED).partition(p).manifest().next_offset > ends[p]
    assert world.lake.topic(MIRRORED).partition(2).manifest().next_offset == ends[2]
