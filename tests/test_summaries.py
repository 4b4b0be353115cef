"""Issue 50: per-topic summaries. The overview's facts read from summaries equal those planned
from the manifests at the same "now"; a commit, a topic.json change, a damaged summary or a
repair makes the views read the manifests for what the summary no longer answers for; markers
are cleared once a summary covers them, never before; a summary never replaces a newer one."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from lakecleaner.cleaner_state import Failure, cleaner_state_key, mark_uncleanable
from lakecleaner.clock import wall_clock_ms
from lakecleaner.errors import CorruptSummary
from lakecleaner.lake import Lake
from lakecleaner.log.layout import partition_marker_key, summary_key
from lakecleaner.log.records import Record
from lakecleaner.log.repair import repair_partition
from lakecleaner.summaries.facts import facts_of_state, load_facts, load_topic
from lakecleaner.summaries.model import TopicSummary
from lakecleaner.summaries.overview import topic_overview
from lakecleaner.summaries.read import TopicFacts
from lakecleaner.summaries.refresh import build_summary, refresh_summary, summary_store
from lakecleaner.summaries.store import MIN_MARKER_EXPIRY_MS
from tests.support.cli_process import run_cli
from tests.support.s3 import S3Endpoint

HOUR = 3_600_000
T0 = 1_800_000_000_000
NOW = T0 + 48 * HOUR
TOPICS = ("orders", "events")


def build(lake: Lake) -> None:
    """`orders`: compacted, 3 partitions of updated keys in sealed segments (some due, one overdue
    by KIP-354, tombstones); `events`: delete policy, 2 partitions, old segments past retention.ms."""
    orders = lake.create_topic(
        "orders",
        3,
        {
            "cleanup.policy": "compact",
            "segment.ms": HOUR,
            "max.compaction.lag.ms": 24 * HOUR,
            "min.cleanable.dirty.ratio": 0.3,
        },
        now_ms=T0,
    )
    for p in range(3):
        log = orders.partition(p)
        for batch in range(3 + p):
            at = T0 + batch * 2 * HOUR
            records = [Record(f"k{i % (4 + p)}".encode(), f"v{batch}-{i}".encode(), at) for i in range(20)]
            records.append(Record(b"gone", None, at))
            log.append(records, now_ms=at)
            log.roll(now_ms=at + HOUR + 1)
    events = lake.create_topic("events", 2, {"cleanup.policy": "delete", "retention.ms": 30 * HOUR}, now_ms=T0)
    for p in range(2):
        log = events.partition(p)
        for batch in range(3):
            at = T0 + batch * 12 * HOUR
            log.append([Record(None, b"x" * 50, at) for _ in range(10)], now_ms=at)
            log.roll(now_ms=at + HOUR + 1)


def exact_row(lake: Lake, topic: str, now_ms: int) -> dict[str, Any]:
    return topic_overview(facts_of_state(load_topic(lake, topic, now_ms)), [], now_ms)


def summary_row(lake: Lake, topic: str, now_ms: int) -> tuple[dict[str, Any], TopicFacts]:
    facts = load_facts(lake, [topic], now_ms)[topic]
    assert isinstance(facts, TopicFacts), facts
    return topic_overview(facts, [], now_ms), facts


def without_source(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k != "source"}


def markers(lake: Lake, topic: str) -> list[str]:
    return sorted(m.key for m in summary_store(lake).pending(topic).get(topic, type("P", (), {"markers": []})).markers)


@pytest.fixture
def built(lake: Lake) -> Lake:
    build(lake)
    for topic in TOPICS:
        refresh_summary(lake, topic, NOW)
    return lake


def test_the_overview_from_summaries_equals_the_overview_planned_from_the_manifests(built: Lake) -> None:
    lake = built
    for topic in TOPICS:
        row, facts = summary_row(lake, topic, NOW)
        exact = exact_row(lake, topic, NOW)
        assert without_source(row) == without_source(exact)
        assert facts.from_manifests == () and facts.planned_at_ms == NOW
        assert row["source"] == {"summary_planned_at_ms": NOW, "partitions_from_manifests": 0, "why": None}
        assert exact["source"]["partitions_from_manifests"] == len(
            exact_row(lake, topic, NOW)["unreadable_partitions"]
        ) + (3 if topic == "orders" else 2)
        assert markers(lake, topic) == []  # the refresh cleared what its summary covers
    orders = exact_row(lake, "orders", NOW)
    assert orders["partitions_due"] and orders["nearest_deadline"] and orders["metrics"]["max-dirty-percent"] > 0
    events = exact_row(lake, "events", NOW)
    assert any(d["retention"] for d in events["partitions_due"])  # the scene has work due on both kinds


def test_a_commit_after_the_refresh_is_read_from_its_manifest_until_the_next_refresh(built: Lake) -> None:
    lake = built
    lake.topic("orders").partition(1).append([Record(b"new", b"v", NOW)], now_ms=NOW)
    row, facts = summary_row(lake, "orders", NOW)
    assert facts.from_manifests == (1,) and facts.why is not None
    assert without_source(row) == without_source(exact_row(lake, "orders", NOW))
    assert row["source"]["partitions_from_manifests"] == 1
    assert markers(lake, "orders") != []
    refresh_summary(lake, "orders", NOW)
    assert markers(lake, "orders") == []
    row, facts = summary_row(lake, "orders", NOW)
    assert facts.from_manifests == () and without_source(row) == without_source(exact_row(lake, "orders", NOW))


def test_a_marker_of_a_commit_not_landed_yet_is_kept_until_a_summary_covers_it(built: Lake) -> None:
    lake = built
    log = lake.topic("orders").partition(2)
    version = log.manifest().version
    in_flight = partition_marker_key("orders", 2, version + 1)
    lake.store.write(in_flight, b"")  # what a commit writes before its manifest
    _, facts = summary_row(lake, "orders", NOW)
    assert facts.from_manifests == (2,)
    assert refresh_summary(lake, "orders", NOW).markers_deleted == 0
    assert markers(lake, "orders") == [in_flight]  # its manifest may still land: kept
    log.append([Record(b"late", b"v", NOW)], now_ms=NOW)  # the commit of that version lands
    assert log.manifest().version == version + 1
    refresh_summary(lake, "orders", NOW)
    assert markers(lake, "orders") == []


def test_a_marker_no_commit_can_still_land_for_expires(built: Lake) -> None:
    lake = built
    summaries = summary_store(lake)
    version = lake.topic("orders").partition(0).manifest().version
    lake.store.write(partition_marker_key("orders", 0, version + 5), b"")
    stored = summaries.read("orders")
    assert stored is not None
    pending = summaries.pending("orders")["orders"]
    (marker,) = pending.markers
    assert (
        summaries.clear_markers(stored, pending, marker.mtime_ms + MIN_MARKER_EXPIRY_MS - 1000, MIN_MARKER_EXPIRY_MS)
        == 0
    )
    assert (
        summaries.clear_markers(stored, pending, marker.mtime_ms + MIN_MARKER_EXPIRY_MS + 1, MIN_MARKER_EXPIRY_MS) == 1
    )
    assert markers(lake, "orders") == []


def test_a_changed_topic_json_makes_the_views_read_the_whole_topic(built: Lake) -> None:
    lake = built
    lake.alter_topic("orders", {"min.cleanable.dirty.ratio": 0.9})
    row, facts = summary_row(lake, "orders", NOW)
    assert facts.why is not None and "topic.json" in facts.why and facts.planned_at_ms is None
    assert without_source(row) == without_source(exact_row(lake, "orders", NOW))
    lake.add_partitions("events", 3)
    row, facts = summary_row(lake, "events", NOW)
    assert row["partitions"] == 3 and facts.planned_at_ms is None
    for topic in TOPICS:
        refresh_summary(lake, topic, NOW)
        row, facts = summary_row(lake, topic, NOW)
        assert facts.planned_at_ms == NOW and without_source(row) == without_source(exact_row(lake, topic, NOW))


def test_a_damaged_summary_is_reported_and_the_manifests_are_read(built: Lake) -> None:
    lake = built
    good = lake.store.read(summary_key("orders"))
    damaged = json.loads(good)
    damaged["partitions"]["dirty_ratio"][0] = "high"
    lake.store.write(summary_key("orders"), json.dumps(damaged).encode())
    with pytest.raises(CorruptSummary, match=r"column partitions\.dirty_ratio"):
        summary_store(lake).read("orders")
    row, facts = summary_row(lake, "orders", NOW)
    assert facts.why is not None and "corrupt" in facts.why and "summaries refresh --topic orders" in facts.why
    assert without_source(row) == without_source(exact_row(lake, "orders", NOW))
    assert refresh_summary(lake, "orders", NOW).written
    assert summary_row(lake, "orders", NOW)[1].planned_at_ms == NOW


def test_a_summary_never_replaces_one_of_newer_manifests(built: Lake) -> None:
    lake = built
    older = build_summary(lake, "orders", NOW)
    lake.topic("orders").partition(0).append([Record(b"k", b"v", NOW)], now_ms=NOW)
    newer = refresh_summary(lake, "orders", NOW).summary
    assert newer.version(0) == (older.version(0) or 0) + 1
    kept = summary_store(lake).write(older)
    assert kept is not older and kept.version(0) == newer.version(0)
    stored = summary_store(lake).read("orders")
    assert stored is not None and stored.version(0) == newer.version(0)


def test_a_repaired_manifest_takes_a_version_above_every_one_a_summary_names(built: Lake) -> None:
    lake = built
    topic = lake.topic("events")
    log = topic.partition(1)
    before = summary_store(lake).read("events")
    assert before is not None
    announced = (before.version(1) or 0) + 5  # a commit whose marker landed, whose manifest did not
    lake.store.write(partition_marker_key("events", 1, announced), b"")
    assert summary_store(lake).announced_version("events", 1) == announced
    assert summary_store(lake).announced_version("events", 0) == before.version(0)
    lake.store.delete(log.manifest_key)
    report = repair_partition(
        lake.store,
        "events",
        1,
        topic.config,
        now_ms=NOW,
        announced_version=summary_store(lake).announced_version("events", 1),
    )
    assert report.manifest.version == announced + 1
    row, facts = summary_row(lake, "events", NOW)
    assert facts.from_manifests == (1,)
    assert without_source(row) == without_source(exact_row(lake, "events", NOW))


@pytest.mark.backends("local")
def test_summaries_refresh_refreshes_every_topic_and_names_a_missing_one(built: Lake) -> None:
    lake = built
    lake.topic("orders").partition(0).append([Record(b"k", b"v", NOW)], now_ms=NOW)
    base = ["--lake", lake.uri]
    done = run_cli(*base, "summaries", "refresh", "--json")
    assert done.returncode == 0, done.stderr
    rows = {r["topic"]: r for r in json.loads(done.stdout)["summaries"]}
    assert set(rows) == set(TOPICS) and rows["orders"]["written"] and rows["orders"]["markers_deleted"] >= 1
    assert rows["orders"]["partitions"] == 3
    missing = run_cli(*base, "summaries", "refresh", "--topic", "nope")
    assert missing.returncode == 2 and missing.stderr.startswith("error:") and "nope" in missing.stderr


def test_the_stored_form_round_trips(built: Lake) -> None:
    summary = build_summary(built, "orders", NOW)
    again = TopicSummary.from_json(summary.to_json(), "orders", "here")
    assert again == summary


def test_a_summary_stored_before_dead_bytes_reads_them_as_zero(built: Lake) -> None:
    """Issue 79 added the column of the bytes deletion vectors remove: a summary written before
    lacks it, and reads as it was written (no vector then)."""
    summary = build_summary(built, "orders", NOW)
    stored = json.loads(summary.to_json())
    assert stored["partitions"].pop("dead_bytes") == [0] * len(summary.partitions)
    again = TopicSummary.from_json(json.dumps(stored).encode(), "orders", "here")
    assert again == summary


@pytest.mark.backends("local")
def test_the_control_plane_benchmarks_topics_shape_runs(
    backend: str, seaweedfs_endpoint: S3Endpoint, tmp_path: Path
) -> None:
    """bench/control_plane.py --topics at 3 topics of 4 partitions, as a smoke check (no timing
    assertions): each overview has every topic, and reads exactly the manifests it should; the
    erasure overview counts every partition's deadline."""
    from bench.control_plane import main
    from bench.s3_servers import S3Server

    e = seaweedfs_endpoint
    server = S3Server(e.url, e.access_key, e.secret_key, e.bucket, stop=lambda: None, pid=None)
    argv = ["--topics", "3", "--topic-partitions", "4", "--stale-share", "0.25", "--latency-ms", "1"]
    argv += ["--repeat", "1", "--idle-wait-s", "0", "--dir", str(tmp_path)]
    figures = main(argv, given_server=server)
    details = {f.name: f.detail for f in figures}
    assert len(figures) == 6, details
    assert [f.target_s for f in figures] == [5.0, 5.0, 5.0, None, 1.0, None]
    assert details["overview JSON, 3 topics x 4 (summaries)"].endswith("0 partitions read from manifests")
    assert details["erasure deadlines JSON, 3 topics x 4 (summaries)"].endswith("; 12 deadlines")
    assert details["overview JSON, 3 topics x 4, 3 partitions committed since"].endswith(
        "3 partitions read from manifests"
    )
    assert details["overview JSON, 10 topics x 4 (manifests: baseline)"].endswith("40 partitions read from manifests")
    assert all(f.requests > 0 for f in figures)


@pytest.mark.backends("local")
def test_status_reads_summaries_and_the_manifests_of_partitions_committed_since(backend: str, built: Lake) -> None:
    lake = built
    for topic in TOPICS:
        refresh_summary(lake, topic, wall_clock_ms())  # status decides at the wall-clock time
    lake.topic("orders").partition(1).append([Record(b"new", b"v", NOW)], now_ms=NOW)
    base = ["--lake", lake.uri]
    done = run_cli(*base, "status", "--json")
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    for topic in TOPICS:
        manifests = lake.topic(topic).manifests()
        rows = {r["partition"]: r for r in shown[topic]}
        assert {p: (r["records"], r["bytes"], r["next_offset"], r["segments"]) for p, r in rows.items()} == {
            p: (m.record_count, m.size_bytes, m.next_offset, len(m.segments)) for p, m in manifests.items()
        }
        assert {p: r["cleaner_checkpoint"] for p, r in rows.items()} == {
            p: m.cleaner_checkpoint for p, m in manifests.items()
        }
        changed = {1} if topic == "orders" else set()
        assert {p for p, r in rows.items() if r["source"] == "manifest"} == changed
    human = run_cli(*base, "status", "--topic", "orders")
    assert "from the topic's summary of" in human.stdout and "1 partition from the manifests" in human.stdout


def test_a_partly_stale_topic_is_planned_with_the_marks_and_config_its_summary_holds(built: Lake) -> None:
    lake = built
    topic = lake.topic("orders")
    manifest = topic.partition(0).manifest()
    failure = Failure(0, "a segment file is missing", manifest)
    lake.cleaner_state.update(
        "orders", lambda s: replace(s, uncleanable=mark_uncleanable(s, [failure], topic.config, NOW))
    )
    refresh_summary(lake, "orders", NOW)
    topic.partition(0).append([Record(b"k0", b"late", NOW)], now_ms=NOW)  # the sealed segments stay: still marked
    lake.store.delete(cleaner_state_key("orders"))  # the view must not need it: the summary holds the marks
    lake.store.write(cleaner_state_key("orders"), lake.store.read(summary_key("orders")))  # nor read this
    row, facts = summary_row(lake, "orders", NOW)
    assert facts.from_manifests == (0,)
    assert list(row["uncleanable_partitions"]) == ["0"]
    assert "a segment file is missing" in row["uncleanable_partitions"]["0"]


def test_a_topic_json_write_that_does_not_land_leaves_no_marker(built: Lake) -> None:
    """`topics create --if-not-exists` on an existing topic writes nothing: the views keep using
    its summary (a marker of a write that never lands would keep them off it for an hour)."""
    lake = built
    lake.create_topic("orders", 3, exist_ok=True, now_ms=NOW)
    _, facts = summary_row(lake, "orders", NOW)
    assert facts.planned_at_ms == NOW and facts.from_manifests == ()
    assert markers(lake, "orders") == []


@pytest.mark.backends("local")
def test_plan_all_shows_every_topic_as_planning_its_manifests_would_and_says_where_from(
    backend: str, built: Lake
) -> None:
    """`plan --all` (issue 50): a line per topic from its summary, with a partition committed since
    read from its manifest; each line's due partitions, size, dirty percent and deadline equal the
    plan of the topic's manifests at the same now; the table fits 120 columns."""
    lake = built
    lake.topic("orders").partition(1).append([Record(b"new", b"v", NOW)], now_ms=NOW)
    base = ["--lake", lake.uri, "plan", "--all", "--now", str(NOW)]
    done = run_cli(*base, "--json")
    assert done.returncode == 0, done.stderr
    rows = {r["topic"]: r for r in json.loads(done.stdout)["topics"]}
    assert sorted(rows) == sorted(TOPICS)
    for topic in TOPICS:
        exact, row = exact_row(lake, topic, NOW), rows[topic]
        assert row["compaction_due"] == exact["compaction_order"]
        assert row["retention_due"] == [d["partition"] for d in exact["partitions_due"] if d["retention"]]
        assert (row["records"], row["bytes"], row["nearest_deadline"]) == (
            exact["records"],
            exact["bytes"],
            exact["nearest_deadline"],
        )
        assert row["max_dirty_percent"] == exact["metrics"]["max-dirty-percent"]
    assert rows["orders"]["compaction_due"] and rows["events"]["retention_due"]  # work due of both kinds
    assert [rows[t]["source"]["partitions_from_manifests"] for t in TOPICS] == [1, 0]
    human = run_cli(*base).stdout
    assert "summary+1" in human and max(len(line) for line in human.splitlines()) <= 120


@pytest.mark.backends("local")
def test_plan_all_reports_an_unreadable_partition_shows_the_rest_and_exits_1(backend: str, built: Lake) -> None:
    lake = built
    lake.create_topic("broken", 2, now_ms=NOW)
    lake.store.write("topics/broken/partition=1/manifest.json", b"{not json")
    base = ["--lake", lake.uri, "--json", "plan", "--all"]
    done = run_cli(*base, "--now", str(NOW))
    assert done.returncode == 1 and "broken-1" in done.stderr and "manifest.json" in done.stderr
    rows = {r["topic"]: r for r in json.loads(done.stdout)["topics"]}
    assert sorted(rows) == ["broken", *sorted(TOPICS)] and list(rows["broken"]["unreadable_partitions"]) == ["1"]
    refused = run_cli(*base, "--topic", "orders")
    assert (
        refused.returncode == 2
        and refused.stderr.startswith("error: --all shows every topic")
        and "--topic" in refused.stderr
    )


@pytest.mark.backends("local")
def test_audit_lake_lists_every_deadline_soonest_first_as_the_manifests_plan_them(backend: str, built: Lake) -> None:
    """`audit lake` (issue 50's erasure overview): a row per compacted partition with a deletion
    deadline, soonest first, each equal to the deadline planned from the partition's manifest at
    the same now, from the summary or (a partition committed since, a topic without a summary)
    the manifest; `--within` keeps the overdue and those due by then; a passed deadline exits 1."""
    lake = built
    lake.topic("orders").partition(1).append([Record(b"new", b"v", NOW)], now_ms=NOW)
    fresh = lake.create_topic("fresh", 1, {"cleanup.policy": "compact", "max.compaction.lag.ms": 24 * HOUR}, now_ms=NOW)
    fresh.partition(0).append([Record(b"k", b"v", NOW)], now_ms=NOW)
    base = ["--lake", lake.uri, "audit", "lake", "--now", str(NOW)]
    done = run_cli(*base, "--json")
    assert done.returncode == 1, done.stderr  # a deadline has passed
    rows = json.loads(done.stdout)["deadlines"]
    expected = {
        (topic, p): deadline
        for topic in ("orders", "fresh", "events")
        for p, entry in facts_of_state(load_topic(lake, topic, NOW)).partitions.items()
        if (deadline := entry.deadline(NOW)) is not None
    }
    assert [(r["topic"], r["partition"]) for r in rows] == sorted(
        expected, key=lambda tp: (expected[tp].deadline_ms, *tp)
    )
    for r in rows:
        deadline = expected[r["topic"], r["partition"]]
        assert {k: r[k] for k in deadline.to_dict()} == deadline.to_dict()
        assert r["overdue"] == (deadline.seconds_left < 0)
        assert r["from"] == (
            "summary" if (r["topic"], r["partition"]) in {("orders", 0), ("orders", 2)} else "manifest"
        )
    assert rows[0]["overdue"] and not rows[-1]["overdue"] and rows[-1]["topic"] == "fresh"
    for hours, kept in ((0, rows[:-1]), (24, rows)):
        within = run_cli(*base, "--json", "--within", str(hours))
        assert json.loads(within.stdout)["deadlines"] == kept
    human = run_cli(*base).stdout
    assert "OVERDUE" in human and "max.compaction.lag.ms" in human and max(map(len, human.splitlines())) <= 120
