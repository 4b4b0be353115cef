"""The dashboard's figures and drawing, checked against the manifests and the planning code."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from lakecleaner.charts.units import human_bytes, human_seconds
from lakecleaner.dashboard.partition_view import partition_view
from lakecleaner.dashboard.svg import render_partition_svg
from lakecleaner.lake import Lake
from lakecleaner.policy import plan_topic
from lakecleaner.policy.retention import CONSUMED, RETENTION_MS
from lakecleaner.summaries.facts import facts_of_state, load_topic
from lakecleaner.summaries.overview import topic_overview
from tests.dashboard.conftest import Scene
from tests.dashboard.scene import ANALYTICS, BILLING, CHECKPOINT, expected_regions

SVG = "{http://www.w3.org/2000/svg}"


def _svg(scene: Scene, topic: str, partition: int, **kwargs: object) -> ET.Element:
    view = partition_view(load_topic(scene.lake, topic, scene.now_ms), partition)
    return ET.fromstring(render_partition_svg(view, **kwargs))  # type: ignore[arg-type]


def _by(root: ET.Element, css_class: str) -> list[ET.Element]:
    return [e for e in root.iter() if css_class in (e.get("class") or "").split()]


def _range(element: ET.Element) -> tuple[int, int]:
    return int(element.get("data-start", -1)), int(element.get("data-end", -1))


def test_the_overview_shows_the_plans_figures(scene: Scene) -> None:
    lake = scene.lake
    topic = lake.topic("customers")
    manifests = topic.manifests()
    plan = plan_topic(
        "customers", manifests, topic.config, lake.offsets.consumed_positions("customers", [0, 1]), scene.now_ms
    )
    row = topic_overview(facts_of_state(load_topic(lake, "customers", scene.now_ms)), [], scene.now_ms)
    assert row["metrics"] == plan.metrics.to_dict()
    assert row["max_compaction_delay_secs"] == plan.metrics.max_compaction_delay_secs > 0
    assert row["records"] == sum(m.record_count for m in manifests.values())
    assert row["bytes"] == sum(m.size_bytes for m in manifests.values())
    assert [d["partition"] for d in row["partitions_due"]] == [p.partition for p in plan.partitions if p.compaction.due]
    deadlines = [p.deadline for p in plan.partitions if p.deadline]
    assert row["nearest_deadline"]["deadline_ms"] == min(d.deadline_ms for d in deadlines)
    assert row["last_run"] is None and row["reclaimed_recent"] == {"runs": 0, "bytes": 0, "records": 0}


def test_a_compacted_partition_is_clean_dirty_uncleanable_and_active(scene: Scene) -> None:
    view = partition_view(load_topic(scene.lake, "customers", scene.now_ms), 0)
    cleanable = view.plan.compaction.range
    assert cleanable is not None
    assert (cleanable.first_dirty_offset, cleanable.first_uncleanable_offset) == (CHECKPOINT, 300)
    regions = {r.kind: (r.start, r.end) for r in view.regions}
    assert regions == expected_regions(view.manifest, CHECKPOINT, 300)
    sizes = {r.kind: r.bytes for r in view.regions}
    assert (sizes["clean"], sizes["dirty"]) == (cleanable.clean_bytes, cleanable.cleanable_bytes)
    assert sizes["uncleanable"] + sizes["active"] == cleanable.not_yet_cleanable_bytes


def test_the_drawing_carries_the_manifests_offsets(scene: Scene) -> None:
    manifest = scene.lake.topic("customers").partition(0).manifest()
    root = _svg(scene, "customers", 0)
    segments = _by(root, "segment")
    assert [(int(e.get("data-base-offset", -1)), int(e.get("data-next-offset", -1))) for e in segments] == [
        (s.base_offset, s.next_offset) for s in manifest.segments
    ]
    xs = [float(e.get("x", 0)) for e in segments]
    assert xs == sorted(xs) and len(set(xs)) == len(xs)
    regions = {
        e.get("data-kind"): (int(e.get("data-start", -1)), int(e.get("data-end", -1))) for e in _by(root, "region")
    }
    assert regions == expected_regions(manifest, CHECKPOINT, 300)
    markers = {e.get("data-marker"): int(e.get("data-offset", -1)) for e in _by(root, "marker")}
    assert markers == {"log-start": manifest.log_start_offset, "cleaner-checkpoint": CHECKPOINT}
    assert (root.get("data-axis-start"), root.get("data-axis-end")) == ("0", str(manifest.next_offset))


def test_consumer_groups_and_the_segments_consumed_retention_deletes_are_marked(scene: Scene) -> None:
    root = _svg(scene, "page-views", 0)
    groups = {e.get("data-group"): int(e.get("data-offset", -1)) for e in _by(root, "marker-consumer-group")}
    assert groups == {"analytics": ANALYTICS, "billing": BILLING}
    assert [int(e.get("data-offset", -1)) for e in _by(root, "marker-min-committed")] == [BILLING]
    deleted = [(e.get("data-retention-rule"), e.get("data-next-offset")) for e in _by(root, "retention-delete")]
    assert deleted == [(RETENTION_MS, "100"), (CONSUMED, "200")]
    assert [e.get("data-next-offset") for e in _by(root, "retention-consumed")] == ["200"]
    assert {e.get("data-kind") for e in _by(root, "region")} == {"log", "active"}
    view = partition_view(load_topic(scene.lake, "page-views", scene.now_ms), 0)
    assert view.offsets_source == "the lake's _consumer_offsets/"  # no `consumer_offsets: {cluster}`


def test_the_small_drawing_has_the_same_offsets_without_labels(scene: Scene) -> None:
    root = _svg(scene, "page-views", 0, width=320, compact=True)
    assert {e.get("data-marker") for e in _by(root, "marker")} == {"log-start", "consumer-group", "min-committed"}
    assert not list(root.iter(f"{SVG}text"))


def test_an_empty_partition_draws_an_empty_bar(tmp_path: Path) -> None:
    lake = Lake.open(f"file://{tmp_path}")
    lake.create_topic("empty", partitions=1, now_ms=1_000)
    view = partition_view(load_topic(lake, "empty", 2_000), 0)
    root = ET.fromstring(render_partition_svg(view))
    assert (root.get("data-axis-start"), root.get("data-axis-end")) == ("0", "0")
    assert not _by(root, "segment") and not _by(root, "region")
    assert {e.get("data-marker") for e in _by(root, "marker")} == {"log-start"}


def test_human_units() -> None:
    assert [human_bytes(n) for n in (None, 999, 1_234, 12_345_678)] == ["–", "999 B", "1.2 kB", "12.3 MB"]
    assert [human_seconds(s) for s in (None, 0, 59, 3_725, 2 * 86_400 + 7_200, -90)] == [
        "–",
        "0 s",
        "59 s",
        "1 h 2 min",
        "2 d 2 h",
        "1 min 30 s ago",
    ]
