"""Issue #47: a mirrored topic's DAG under the real scheduler starts with `mirror`, in the pool
`lakecleaner airflow setup` created, which brings the Kafka topic's records into the lake at their
own offsets before the topic is assessed and compacted; the run's summary carries each
partition's lag."""

from __future__ import annotations

from lakecleaner.orchestration.naming import report_run_id
from lakecleaner.reports import load_report
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
