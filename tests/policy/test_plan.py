"""Partition and topic plans: the planning order, JSON output and the rendered table."""

from __future__ import annotations

import json
from dataclasses import replace

from click.testing import CliRunner
from rich.console import Console

from lakecleaner.cli import cli
from lakecleaner.offsets import ConsumedPosition
from lakecleaner.policy import TopicPlan, plan_partition, plan_topic
from lakecleaner.policy.cleanable import MAX_COMPACTION_LAG, assess_compaction
from lakecleaner.policy.render import render_topic_plan
from lakecleaner.policy.retention import RETENTION_MS
from lakecleaner.policy.roll import apply_roll
from tests.policy.policy_builders import COMPACT, COMPACT_DELETE, DAY, HOUR, NOW, active, manifest, segment


def test_an_idle_partition_older_than_max_compaction_lag_is_rolled_and_becomes_due() -> None:
    config = replace(COMPACT, max_compaction_lag_ms=HOUR, min_cleanable_dirty_ratio=0.9)
    idle = manifest(segment(0, size=10_000), active(10, size=10, first_ts=NOW - 2 * HOUR), checkpoint=10)
    # as it is, its only dirty data sits in the active segment, which is never cleaned (Kafka never rolls it)
    assert not assess_compaction(idle, config, NOW).due
    plan = plan_partition(idle, config, None, NOW)
    assert plan.roll.roll
    assert plan.compaction.due and plan.compaction.triggers == (MAX_COMPACTION_LAG,)
    assert plan.compaction.reason == "overdue by 3600 s (max.compaction.lag.ms)"
    assert plan.compaction.range is not None and plan.compaction.range.first_uncleanable_offset == 20
    # planning again on the rolled manifest gives the same compaction and no further roll
    again = plan_partition(apply_roll(idle, NOW), config, None, NOW)
    assert not again.roll.roll and again.compaction == plan.compaction


def test_retention_is_planned_on_the_rolled_manifest() -> None:
    config = replace(COMPACT_DELETE, retention_ms=DAY, max_compaction_lag_ms=HOUR)
    log = manifest(segment(0), active(10, first_ts=NOW - 2 * DAY, max_ts=NOW - 2 * DAY))
    plan = plan_partition(log, config, None, NOW)
    assert plan.roll.roll
    assert [(d.segment_id, d.rule) for d in plan.retention.deletions] == [("s0", RETENTION_MS), ("s10", RETENTION_MS)]
    assert not plan.retention.roll_first  # already rolled


def sample_topic_plan() -> TopicPlan:
    config = replace(COMPACT_DELETE, max_compaction_lag_ms=HOUR, retention_ms=7 * DAY, retention_commitoffset_ms=DAY)
    recent = NOW - HOUR // 2
    logs = {
        # expired s0 (retention.ms), dirty ratio 0.9, not overdue
        0: manifest(
            segment(0, size=100, max_ts=NOW - 8 * DAY), segment(10, size=900, max_ts=recent), active(20), checkpoint=10
        ),
        # idle active segment: rolled, then overdue by one hour
        1: manifest(segment(0, size=1000, max_ts=recent), active(10, size=10, max_ts=NOW - 2 * HOUR), partition=1),
    }
    consumed = {0: ConsumedPosition(None, {"reporting": None}, reason="group reporting has no committed offset")}
    return plan_topic("t", logs, config, consumed, NOW)


def test_a_topic_plan_is_json() -> None:
    plan = sample_topic_plan()
    data = plan.to_dict()
    assert json.loads(json.dumps(data)) == data
    assert data["selection"] == {"selected": [1, 0], "deferred": [], "forced": []}
    assert data["config"]["cleanup.policy"] == "compact,delete"
    assert data["metrics"]["partitions-due"] == 2
    first = data["partitions"][0]
    assert [d["rule"] for d in first["retention"]["deletions"]] == ["retention.ms"]
    assert first["retention"]["held_back_by"] == ["reporting"]
    assert first["compaction"]["range"]["first_dirty_offset"] == 10
    second = data["partitions"][1]
    assert second["roll"]["roll"] is True
    assert second["compaction"]["triggers"] == ["dirty_ratio", "max_compaction_lag"]
    assert second["deadline"]["seconds_left"] == -3600


def test_the_rendered_plan_shows_every_partition_and_the_gauges() -> None:
    console = Console(record=True, width=400)
    console.print(render_topic_plan(sample_topic_plan()))
    text = console.export_text()
    assert "cleanup.policy=compact,delete" in text
    assert "dirty ratio 0.90 > min.cleanable.dirty.ratio 0.5" in text
    assert "s0 [0, 10): retention.ms" in text
    assert "consumed retention skipped: group reporting has no committed offset" in text
    assert "overdue by 3600 s" in text
    assert "max-compaction-delay-secs=3600" in text and "compaction order: 1, 0" in text
    assert "yes #1" in text and "yes #2" in text


def test_the_plan_fits_120_columns_unless_wide_and_its_help_says_what_f_and_u_are() -> None:
    narrow = Console(record=True, width=120)
    narrow.print(render_topic_plan(sample_topic_plan()))
    text = narrow.export_text()
    assert max(len(line) for line in text.splitlines()) <= 120
    assert "not yet cleanable B" not in text and "retention.ms" in text and "dirty ratio 0.90" in text
    wide = Console(record=True, width=400)
    wide.print(render_topic_plan(sample_topic_plan(), wide=True))
    every = wide.export_text()
    assert "not yet cleanable B" in every and "max delay s" in every
    shown = CliRunner().invoke(cli, ["plan", "--help"], terminal_width=120).output
    assert "firstDirtyOffset" in shown and "firstUncleanableOffset" in shown and "--wide" in shown
