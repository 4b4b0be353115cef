"""Config validation: one clear error per problem, naming file, key, value and the rule."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lakecleaner.config import LONG_MAX, TopicConfig, load_config, parse_config, shown
from lakecleaner.config.topic_keys import resolve_topic_config
from lakecleaner.errors import ConfigError
from tests.support.samples import write_sample


def problems_of(data: object) -> list[str]:
    with pytest.raises(ConfigError) as exc:
        parse_config(data, "lakecleaner.yaml")
    return exc.value.problems


def test_kafka_defaults() -> None:
    config = resolve_topic_config({}, {})
    assert config == TopicConfig()
    assert config.segment_bytes == 1073741824 and config.segment_ms == 604800000
    assert config.min_cleanable_dirty_ratio == 0.5 and config.delete_retention_ms == 86400000
    assert config.max_compaction_lag_ms == LONG_MAX and config.retention_ms == 604800000
    assert config.retention_bytes == -1 and config.file_delete_delay_ms == 60000
    assert config.cleanup_policy == frozenset({"delete"}) and config.compaction_strategy == "offset"


def test_topic_override_beats_broker_default_beats_kafka_default() -> None:
    config = resolve_topic_config(
        {"log.retention.hours": 1, "log.cleaner.min.cleanable.ratio": 0.2}, {"min.cleanable.dirty.ratio": "0.7"}
    )
    assert config.retention_ms == 3_600_000
    assert config.min_cleanable_dirty_ratio == 0.7


def test_broker_ms_beats_minutes_beats_hours() -> None:
    config = resolve_topic_config({"log.retention.hours": 1, "log.retention.minutes": 2, "log.retention.ms": 3}, {})
    assert config.retention_ms == 3
    assert resolve_topic_config({"log.retention.hours": 1, "log.retention.minutes": 2}, {}).retention_ms == 120_000


def test_max_segment_ms_is_bounded_by_max_compaction_lag_on_compacted_topics() -> None:
    compacted = resolve_topic_config(
        {}, {"cleanup.policy": "compact", "segment.ms": 1000, "max.compaction.lag.ms": 500}
    )
    assert compacted.max_segment_ms == 500
    deleted = resolve_topic_config({}, {"segment.ms": 1000, "max.compaction.lag.ms": 500})
    assert deleted.max_segment_ms == 1000


def test_unknown_topic_key_suggests_the_right_one() -> None:
    problems = problems_of({"topics": {"orders": {"config": {"segment.byte": 10}}}})
    assert problems == [
        "lakecleaner.yaml: topics.orders.config: unknown topic-level key 'segment.byte' (did you mean 'segment.bytes'?)"
    ]


def test_unknown_broker_key_suggests_the_right_one() -> None:
    (problem,) = problems_of({"defaults": {"log.retention.hour": 5}})
    assert "log.retention.hour" in problem and "did you mean 'log.retention.hours'?" in problem


def test_unknown_section_key() -> None:
    (problem,) = problems_of({"topic": {}})
    assert "unknown key 'topic'" in problem and "did you mean 'topics'?" in problem


@pytest.mark.parametrize(
    ("key", "value", "rule"),
    [
        ("segment.bytes", "lots", "must be an integer"),
        ("segment.bytes", True, "not a boolean"),
        ("segment.bytes", 3, "must be at least 14"),
        ("min.cleanable.dirty.ratio", 1.5, "between 0 and 1"),
        ("min.cleanable.dirty.ratio", "half", "must be a number"),
        ("max.compaction.lag.ms", 0, "must be at least 1"),
        ("retention.ms", -2, "-1 (unlimited) or at least 0"),
        ("cleanup.policy", "compact,archive", "'compact' and 'delete'"),
        ("compaction.strategy", "newest", "offset, timestamp, header"),
    ],
)
def test_bad_values_name_file_key_value_and_rule(key: str, value: object, rule: str) -> None:
    (problem,) = problems_of({"topics": {"orders": {"config": {key: value}}}})
    assert problem.startswith("lakecleaner.yaml: topics.orders.config: ")
    assert f"{key}={value!r}" in problem
    assert rule in problem


def test_max_lag_below_min_lag_is_rejected() -> None:
    (problem,) = problems_of(
        {"topics": {"t": {"config": {"min.compaction.lag.ms": 1000, "max.compaction.lag.ms": 999}}}}
    )
    assert "max.compaction.lag.ms=999 is less than min.compaction.lag.ms=1000" in problem


def test_consumed_retention_above_forced_retention_is_rejected() -> None:
    (problem,) = problems_of({"topics": {"t": {"config": {"retention.ms": 1000, "retention.commitoffset.ms": 2000}}}})
    assert "retention.commitoffset.ms=2000 is greater than retention.ms=1000" in problem
    parse_config({"topics": {"t": {"config": {"retention.ms": -1, "retention.commitoffset.ms": 2000}}}})


def test_header_strategy_needs_a_header_name() -> None:
    (problem,) = problems_of({"topics": {"t": {"config": {"compaction.strategy": "header"}}}})
    assert "compaction.strategy.header" in problem


def test_illegal_topic_name_in_config() -> None:
    (problem,) = problems_of({"topics": {"bad name!": {}}})
    assert "bad name!" in problem and "illegal characters" in problem


def test_every_problem_is_reported_at_once() -> None:
    problems = problems_of(
        {
            "lake": {"uri": "ftp://x", "storage": {"max_attempts": 0}},
            "topics": {"a": {"partitions": 0, "config": {"segment.ms": -5, "retention.bytes": "x"}}},
        }
    )
    assert len(problems) == 5, problems
    assert any("lake.uri='ftp://x'" in p for p in problems)
    assert any("max_attempts=0" in p for p in problems)
    assert any("partitions=0" in p for p in problems)


def test_env_references_and_missing_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_ENDPOINT", "http://127.0.0.1:9000")
    config = parse_config({"lake": {"uri": "s3://b/p", "storage": {"endpoint_url": "${MY_ENDPOINT}"}}})
    assert config.storage.endpoint_url == "http://127.0.0.1:9000"
    monkeypatch.delenv("MY_ENDPOINT")
    (problem,) = problems_of({"lake": {"storage": {"endpoint_url": "${MY_ENDPOINT}"}}})
    assert "MY_ENDPOINT is not set" in problem


def test_secrets_never_in_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    config = parse_config({"lake": {"uri": "s3://b/p", "storage": {"secret_access_key": "TOPSECRET"}}})
    assert "TOPSECRET" not in repr(config)


def test_load_config_file_and_yaml_errors(tmp_path: Path) -> None:
    path = tmp_path / "lakecleaner.yaml"
    path.write_text("lake: {uri: 'file:///tmp/x'}\ntopics:\n  orders:\n    partitions: 3\n")
    config = load_config(path)
    assert config.topics["orders"].partitions == 3 and config.lake_uri == "file:///tmp/x"
    path.write_text("lake: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(path)
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "missing.yaml")


def test_the_packaged_sample_config_is_valid_and_defines_the_demo_topics(tmp_path: Path) -> None:
    config = load_config(write_sample(tmp_path))
    assert set(config.topics) == {"customers-cdc", "page-views"}
    assert config.lake_uri == f"file://{tmp_path / 'lake'}"  # the lake beside the file, whatever the cwd


def test_the_config_is_found_by_option_then_environment_then_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #15: --config, $LAKECLEANER_CONFIG, ./lakecleaner.yaml, else an error naming all three."""
    monkeypatch.chdir(tmp_path)
    three = "pass --config PATH, set LAKECLEANER_CONFIG, or create ./lakecleaner.yaml"
    with pytest.raises(ConfigError, match=re.escape(three)):
        load_config()
    local = write_sample(tmp_path)
    assert load_config().source == str(local)
    other = write_sample(tmp_path / "other")
    monkeypatch.setenv("LAKECLEANER_CONFIG", str(other))
    assert load_config().source == str(other)
    third = write_sample(tmp_path / "third")
    assert load_config(third).source == str(third)
    monkeypatch.setenv("LAKECLEANER_CONFIG", str(tmp_path / "gone.yaml"))
    with pytest.raises(ConfigError, match=re.escape("gone.yaml: config file not found (named by LAKECLEANER_CONFIG")):
        load_config()


def test_the_suite_never_writes_into_a_lake_exported_in_the_shell(tmp_path: Path) -> None:
    """STYLE E8: with LAKECLEANER_LAKE_URI exported, a "local" test still writes only its own lake."""
    exported = tmp_path / "exported-lake"
    env = {**os.environ, "LAKECLEANER_LAKE_URI": f"file://{exported}", "LAKECLEANER_CONFIG": str(tmp_path / "no.yaml")}
    only_local = "local and not s3 and not seaweedfs"  # a test id holds its backend's name
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/test_storage_contract.py",
            "-k",
            only_local,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert not exported.exists() or not any(exported.rglob("*"))


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"spark": {"conf": ["a", "b"]}}, "lakecleaner.yaml: spark.conf: must be a mapping of Spark setting names"),
        ({"spark": {"master": ["local"]}}, "lakecleaner.yaml: spark.master=['local']: must be a master URL"),
        ({"topics": {"t": {"config": {1: "x"}}}}, "lakecleaner.yaml: topics.t.config: must be a mapping of topic"),
        ({"topics": {"t": ["compact"]}}, "lakecleaner.yaml: topics.t: must be a mapping, got list"),
        ({"lake": "s3://b"}, "lakecleaner.yaml: lake: must be a mapping, got str"),
        # A unit alias is reported under the name written in the file, and defaults are checked
        # even when no topic is declared.
        ({"defaults": {"log.retention.hours": -5}}, "lakecleaner.yaml: defaults: log.retention.hours=-5: must be -1"),
    ],
)
def test_every_yaml_shape_mistake_is_one_line_naming_the_key(data: object, problem: str) -> None:
    problems = problems_of(data)
    assert len(problems) == 1 and problems[0].startswith(problem), problems


def test_a_bad_default_is_reported_once_however_many_topics_use_it() -> None:
    problems = problems_of({"defaults": {"log.cleaner.min.cleanable.ratio": 3}, "topics": {"a": {}, "b": {}}})
    assert len(problems) == 1 and "log.cleaner.min.cleanable.ratio=3" in problems[0]


def test_the_cleaner_section_takes_kafkas_broker_names_and_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """log.cleaner.dedupe.buffer.size and log.cleaner.io.buffer.load.factor keep Kafka's meaning
    and defaults (128 MiB, 0.9); LAKECLEANER_DEDUPE_BUFFER_SIZE overrides the first."""
    default = parse_config({}).cleaner
    assert (default.dedupe_buffer_size, default.io_buffer_load_factor) == (128 * 1024 * 1024, 0.9)
    set_ = parse_config(
        {"cleaner": {"log.cleaner.dedupe.buffer.size": 65536, "log.cleaner.io.buffer.load.factor": 0.5}}
    )
    assert (set_.cleaner.dedupe_buffer_size, set_.cleaner.io_buffer_load_factor) == (65536, 0.5)
    monkeypatch.setenv("LAKECLEANER_DEDUPE_BUFFER_SIZE", "1048576")
    assert parse_config({"cleaner": {"log.cleaner.dedupe.buffer.size": 65536}}).cleaner.dedupe_buffer_size == 1048576


def test_bad_cleaner_values_name_the_key_and_the_rule() -> None:
    with pytest.raises(ConfigError) as error:
        parse_config(
            {
                "cleaner": {
                    "log.cleaner.dedupe.buffer.size": 10,
                    "log.cleaner.io.buffer.load.factor": 0,
                    "log.cleaner.dedup.buffer.size": 1,
                }
            },
            "x.yaml",
        )
    text = str(error.value)
    assert "x.yaml: cleaner.log.cleaner.dedupe.buffer.size=10: must be at least 1024" in text
    assert "cleaner.log.cleaner.io.buffer.load.factor=0: must be greater than 0 and at most 1" in text
    assert "unknown key 'log.cleaner.dedup.buffer.size'" in text and "log.cleaner.dedupe.buffer.size" in text


def test_spark_remote_is_a_connect_url_from_the_file_or_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_config({}).spark.remote is None
    assert parse_config({"spark": {"remote": "sc://spark-connect:15002"}}).spark.remote == "sc://spark-connect:15002"
    monkeypatch.setenv("LAKECLEANER_SPARK_REMOTE", "sc://other:15002")
    assert parse_config({"spark": {"remote": "sc://spark-connect:15002"}}).spark.remote == "sc://other:15002"
    monkeypatch.delenv("LAKECLEANER_SPARK_REMOTE")
    with pytest.raises(ConfigError, match=r"x.yaml: spark.remote='http://h:1': must be a Spark Connect URL"):
        parse_config({"spark": {"remote": "http://h:1"}}, "x.yaml")


@pytest.mark.parametrize("days", [0, -3, "thirty", True, 1.5])
def test_a_bad_report_retention_names_the_key_and_the_rule(days: object) -> None:
    (problem,) = problems_of({"lake": {"report_retention_days": days}})
    assert problem.startswith(f"lakecleaner.yaml: lake.report_retention_days={days!r}: ")
    assert "whole number of days of at least 1, or null" in problem


def test_report_retention_is_days_thirty_by_default_and_null_keeps_every_report() -> None:
    assert parse_config({}).report_retention_ms == 30 * 86_400_000
    assert parse_config({"lake": {"report_retention_days": 7}}).report_retention_ms == 7 * 86_400_000
    assert parse_config({"lake": {"report_retention_days": None}}).report_retention_ms is None


BILLION_LAUGHS = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
lake: {uri: "file:///tmp/lake"}
"""


@pytest.mark.parametrize("where", ["spark:\n  master: *i\n", "defaults:\n  cleanup.policy: *i\n"])
def test_a_billion_laughs_config_is_one_short_error_at_once(tmp_path: Path, where: str) -> None:
    """Issue #45: 1 KB of nested aliases took 45-104 s and 5 GB, then MemoryError, because the
    error message printed the expanded value."""
    path = tmp_path / "lakecleaner.yaml"
    path.write_text(BILLION_LAUGHS + where)
    started = time.monotonic()
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    message = "\n".join(refused.value.problems)
    assert len(message) < 2000 and str(path) in message
    assert time.monotonic() - started < 30  # a bound on the damage, not a benchmark: it took minutes


def test_too_many_aliases_or_too_deep_a_config_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "lakecleaner.yaml"
    path.write_text("x: &x 1\ny: [" + ", ".join(["*x"] * 1001) + "]\n")
    with pytest.raises(ConfigError, match="more than 1000 aliases"):
        load_config(path)
    path.write_text("x: " + "[" * 200 + "]" * 200 + "\n")
    with pytest.raises(ConfigError, match="nested deeper than 50 levels"):
        load_config(path)
    path.write_text("x: " + "[" * 100_000 + "\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(path)


def test_a_share_of_the_topics_is_read_as_the_whole_file_restricted_to_it(tmp_path: Path) -> None:
    """Issue 50: `load_config(keep_topic=...)` (a DAG file's share) gives the config the whole file
    gives, with only the topics accepted; the other topics are not validated; the bounds hold in a
    share too; and an alias to an anchor in a topic left out keeps every topic (nothing changes
    meaning)."""
    path = tmp_path / "lakecleaner.yaml"
    topics = "".join(f"  t{i}:\n    partitions: {i + 1}\n    config: {{cleanup.policy: compact}}\n" for i in range(6))
    path.write_text(f"lake: {{uri: 'file://{tmp_path}/lake'}}\ndefaults: {{log.retention.hours: 5}}\ntopics:\n{topics}")
    whole = load_config(path)
    share = load_config(path, lambda t: t in {"t1", "t4"})
    assert share.topics == {t: whole.topics[t] for t in ("t1", "t4")}
    assert dataclasses.replace(share, topics=whole.topics) == whole

    path.write_text(path.read_text() + "  broken: {config: {cleanup.policy: sometimes}}\n")
    assert set(load_config(path, lambda t: t != "broken").topics) == {f"t{i}" for i in range(6)}
    with pytest.raises(ConfigError, match="broken"):
        load_config(path)

    path.write_text(
        "topics:\n  a: &shared {partitions: 3}\n  b: *shared\n  c: {partitions: 1, extra: ["
        + ", ".join(["*shared"] * 1001)
        + "]}\n"
    )
    with pytest.raises(ConfigError, match="more than 1000 aliases"):
        load_config(path, lambda t: t == "a")
    path.write_text("topics:\n  a: &shared {partitions: 3}\n  b: *shared\n  c: {partitions: 1}\n")
    assert set(load_config(path, lambda t: t == "b").topics) == {"b"}  # b's alias needs a's anchor: still only b
    assert set(load_config(path, lambda t: t == "c").topics) == {"c"}
    assert load_config(path, lambda t: t == "b").topics["b"].partitions == 3


def test_a_value_in_an_error_is_cut_short() -> None:
    assert len(shown("x" * 10_000)) < 80 and len(shown([list(range(1000))] * 1000)) < 200
    assert shown("compact") == "'compact'" and shown(12) == "12"


def test_a_topic_adopted_from_kafka_connect_output_is_configured_and_bad_values_are_named() -> None:
    config = parse_config(
        {
            "topics": {
                "orders": {
                    "adopt": {
                        "connect": {
                            "from": "s3://sink/topics/orders",
                            "format": "avro",
                            "key_field": "after.id",
                            "settle_seconds": 60,
                            "keep_originals": True,
                        }
                    }
                }
            }
        }
    )
    adopt = config.topics["orders"].adopt
    assert adopt is not None and (adopt.uri, adopt.format, adopt.key_field) == (
        "s3://sink/topics/orders",
        "avro",
        "after.id",
    )
    assert (adopt.settle_ms, adopt.keep_originals, adopt.tombstone_partition) == (60_000, True, "tombstone")
    bad = {"from": "sink/topics/orders", "format": "csv", "settle_seconds": -1, "keep_originals": "yes", "flush": 1}
    with pytest.raises(ConfigError) as refused:
        parse_config({"topics": {"orders": {"adopt": {"connect": bad}}}})
    assert "topics.orders.adopt.connect.from" in str(refused.value)
    bad["from"] = "s3://sink/topics/orders"
    with pytest.raises(ConfigError) as refused:
        parse_config({"topics": {"orders": {"adopt": {"connect": bad}}}})
    for named in ("format='csv'", "settle_seconds=-1", "keep_originals='yes'", "unknown key 'flush'"):
        assert named in str(refused.value)
    both = {"adopt": {"connect": {"from": "s3://s/t"}}, "mirror": {"cluster": "main"}}
    with pytest.raises(ConfigError, match="mirror and adopt both"):
        parse_config({"kafka": {"clusters": {"main": {"bootstrap.servers": "k:9092"}}}, "topics": {"orders": both}})
