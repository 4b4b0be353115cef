"""The dashboard's JSON API inside a real Airflow API server: Airflow's auth, and the figures.

Anonymous requests get 401, a signed-in user without DAG read permission 403 (Airflow's simple
auth manager, user `outsider` with no role), and the figures equal the planning code's for the
same lake and `now`.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from typing import Any

import pytest

from lakecleaner.audit import audit_topic
from lakecleaner.policy import TopicPlan, plan_topic
from tests.dashboard.conftest import Scene
from tests.dashboard.scene import ACCESS_KEY, SECRET_KEY
from tests.support.local_airflow import LocalAirflow

ROUTES = [
    "/lakecleaner/",
    "/lakecleaner/topics/customers",
    "/lakecleaner/topics/page-views/partitions/0",
    "/lakecleaner/api/topics",
    "/lakecleaner/api/topics/customers",
    "/lakecleaner/api/topics/page-views/partitions/0",
    "/lakecleaner/api/topics/page-views/runs",
]


def plan_of(scene: Scene, topic: str) -> TopicPlan:
    """The topic's plan, computed here as the DAG's assess task computes it."""
    lake = scene.lake
    handle = lake.topic(topic)
    manifests = handle.manifests()
    consumed = lake.offsets.consumed_positions(topic, sorted(manifests))
    return plan_topic(topic, manifests, handle.config, consumed, scene.now_ms)


def get(airflow: LocalAirflow, path: str, user: str | None, scene: Scene) -> tuple[int, Any]:
    return airflow.api("GET", f"{path}?now={scene.now_ms}", user=user)


@pytest.mark.parametrize("path", ROUTES)
def test_anonymous_requests_get_401(airflow: LocalAirflow, scene: Scene, path: str) -> None:
    status, body = get(airflow, path, None, scene)
    assert status == 401, body


@pytest.mark.parametrize("path", ROUTES)
def test_users_who_may_not_read_dags_get_403(airflow: LocalAirflow, scene: Scene, path: str) -> None:
    status, body = get(airflow, path, "outsider", scene)
    assert status == 403, body


def test_a_forged_token_is_refused(airflow: LocalAirflow) -> None:
    forged = airflow.token("viewer")[:-4] + "AAAA"
    headers = {"Authorization": f"Bearer {forged}"}
    request = urllib.request.Request(f"{airflow.base_url}/lakecleaner/api/topics", headers=headers)
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 403


def test_the_overview_equals_the_plans(airflow: LocalAirflow, scene: Scene) -> None:
    status, body = get(airflow, "/lakecleaner/api/topics", "viewer", scene)
    assert status == 200 and body["now_ms"] == scene.now_ms
    topics = {t["topic"]: t for t in body["topics"]}
    assert set(topics) == {"customers", "page-views", "scratch"}
    assert (topics["scratch"]["has_dag"], topics["customers"]["has_dag"]) == (False, True)
    for name in ("customers", "page-views"):
        plan = plan_of(scene, name)
        row = topics[name]
        assert row["metrics"] == plan.metrics.to_dict()
        assert row["policy"] == ",".join(sorted(plan.config.cleanup_policy))
        manifests = scene.lake.topic(name).manifests()
        assert (row["records"], row["bytes"]) == (
            sum(m.record_count for m in manifests.values()),
            sum(m.size_bytes for m in manifests.values()),
        )
        due = {p.partition for p in plan.partitions if p.compaction.due or p.retention.deletions}
        assert {d["partition"] for d in row["partitions_due"]} == due


def test_a_topic_equals_its_plan(airflow: LocalAirflow, scene: Scene) -> None:
    plan = plan_of(scene, "customers")
    status, body = get(airflow, "/lakecleaner/api/topics/customers", "viewer", scene)
    assert status == 200
    assert body["config"] == plan.config.to_kafka_dict()
    assert body["compaction_order"] == list(plan.selection.selected)
    for view, partition in zip(body["partition_views"], plan.partitions, strict=True):
        assert view["plan"] == partition.to_dict()
        cleanable = partition.compaction.range
        assert cleanable is not None
        assert (view["first_dirty_offset"], view["first_uncleanable_offset"]) == (
            cleanable.first_dirty_offset,
            cleanable.first_uncleanable_offset,
        )


def test_a_partition_equals_its_plan_and_its_consumer_groups(airflow: LocalAirflow, scene: Scene) -> None:
    plan = plan_of(scene, "page-views").partitions[0]
    status, view = get(airflow, "/lakecleaner/api/topics/page-views/partitions/0", "viewer", scene)
    assert status == 200
    assert view["plan"] == plan.to_dict()
    position = scene.lake.offsets.consumed_position("page-views", 0)
    assert view["consumer_groups"] == dict(position.groups)
    assert view["min_committed_offset"] == position.offset
    deletions = [(d.segment_id, d.rule) for d in plan.retention.deletions]
    assert [(s["id"], s["retention_rule"]) for s in view["segments"] if s["retention_rule"]] == deletions
    assert view["consumed_deletions"] == [d.segment_id for d in plan.retention.deletions if d.rule == "consumed"]


def test_no_response_contains_the_storage_credentials(airflow: LocalAirflow, scene: Scene) -> None:
    paths = [*ROUTES, "/lakecleaner/topics/scratch", "/lakecleaner/api/topics/nope", "/lakecleaner/topics/x/runs/y"]
    for path in paths:
        for user in ("admin", "viewer", "outsider", None):
            _, text = airflow.api("GET", path, user=user, raw=True)
            assert SECRET_KEY not in text and ACCESS_KEY not in text, (path, user)


def test_only_users_who_may_trigger_get_live_buttons(airflow: LocalAirflow, scene: Scene) -> None:
    _, admin = airflow.api("GET", "/lakecleaner/topics/customers", user="admin", raw=True)
    _, viewer = airflow.api("GET", "/lakecleaner/topics/customers", user="viewer", raw=True)
    assert "may not trigger runs" not in admin
    assert "your Airflow role may not trigger runs of lakecleaner__customers" in viewer
    status, _ = airflow.api(
        "POST", "/api/v2/dags/lakecleaner__customers/dagRuns", user="viewer", body={"logical_date": None}
    )
    assert status == 403


def test_a_topics_erasure_deadlines_equal_the_topic_audit_and_overdue_ones_are_red(
    airflow: LocalAirflow, scene: Scene
) -> None:
    status, body = get(airflow, "/lakecleaner/api/topics/customers", "viewer", scene)
    assert status == 200
    audited = audit_topic(scene.lake, "customers", scene.now_ms)
    assert body["erasure"] == {str(p.partition): p.to_dict() for p in audited}
    # the scene's DAGs have no schedule: nothing removes superseded data unless a run is triggered
    assert [p.partition for p in audited if p.overdue] == [0, 1]
    _, html = airflow.api("GET", f"/lakecleaner/topics/customers?now={scene.now_ms}", user="viewer", raw=True)
    assert 'data-erasure="0" class="overdue"' in html and "has no schedule" in html
