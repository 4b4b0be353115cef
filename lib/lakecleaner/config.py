"""Configuration: Kafka's own config names, defaults and validation rules.

Topic-level keys (`cleanup.policy`, `segment.bytes`, ...) resolve like Kafka's: a key set on
the topic wins, otherwise the broker-level default (`log.cleaner.*`, `log.retention.*`,
`log.segment.*`, `log.roll.*`) applies, otherwise Kafka's built-in default. Validation collects
every problem and reports each on its own line naming the file, the key, the value and the rule.
"""

from __future__ import annotations

import difflib
import os
import re
import reprlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

import yaml

from lakecleaner.errors import ConfigError, InvalidTopicName
from lakecleaner.names import validate_topic_name

LONG_MAX = 2**63 - 1
STRATEGIES = ("offset", "timestamp", "header")
POLICIES = ("compact", "delete")
SHIP_PACKAGE = ("auto", "always", "never")

#: Environment variables the code reads (docker-compose and the docs must use these names).
ENV_CONFIG_PATH = "LAKECLEANER_CONFIG"
ENV_LAKE_URI = "LAKECLEANER_LAKE_URI"
ENV_S3_ENDPOINT = "LAKECLEANER_S3_ENDPOINT_URL"
ENV_MAX_CONCURRENCY = "LAKECLEANER_MAX_CONCURRENCY"
ENV_DEDUPE_BUFFER_SIZE = "LAKECLEANER_DEDUPE_BUFFER_SIZE"
ENV_SPARK_REMOTE = "LAKECLEANER_SPARK_REMOTE"
ENV_AWS_ACCESS_KEY = "AWS_ACCESS_KEY_ID"
ENV_AWS_SECRET_KEY = "AWS_SECRET_ACCESS_KEY"
ENV_AWS_SESSION_TOKEN = "AWS_SESSION_TOKEN"
ENV_AWS_REGION = "AWS_REGION"
ENV_AWS_DEFAULT_REGION = "AWS_DEFAULT_REGION"
ENVIRONMENT_VARIABLES = (
    ENV_CONFIG_PATH,
    ENV_LAKE_URI,
    ENV_S3_ENDPOINT,
    ENV_MAX_CONCURRENCY,
    ENV_DEDUPE_BUFFER_SIZE,
    ENV_SPARK_REMOTE,
    ENV_AWS_ACCESS_KEY,
    ENV_AWS_SECRET_KEY,
    ENV_AWS_SESSION_TOKEN,
    ENV_AWS_REGION,
    ENV_AWS_DEFAULT_REGION,
)


# --------------------------------------------------------------------------------------------
# Value parsers: each returns the parsed value or raises ValueError with the rule in words.


def _parse_long(value: object) -> int:
    if isinstance(value, bool):
        raise ValueError("must be an integer, not a boolean")
    if isinstance(value, int):
        result = value
    elif isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
        result = int(value)
    else:
        raise ValueError("must be an integer")
    if not -(2**63) <= result <= LONG_MAX:
        raise ValueError("must fit in a signed 64-bit long")
    return result


def _parse_double(value: object) -> float:
    if isinstance(value, bool):
        raise ValueError("must be a number, not a boolean")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise ValueError("must be a number")


def _parse_policy(value: object) -> frozenset[str]:
    if isinstance(value, str):
        items = [v.strip().lower() for v in value.split(",")]
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        items = [v.strip().lower() for v in value]
    else:
        raise ValueError("must be a comma-separated list of 'compact' and 'delete'")
    bad = [v for v in items if v not in POLICIES]
    if bad or not items:
        raise ValueError(f"must be a list of 'compact' and 'delete' (got {', '.join(bad) or 'nothing'})")
    return frozenset(items)


def _parse_strategy(value: object) -> str:
    if not isinstance(value, str) or value.strip().lower() not in STRATEGIES:
        raise ValueError(f"must be one of {', '.join(STRATEGIES)} (KIP-280)")
    return value.strip().lower()


def _parse_string(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError("must be a string")
    return value


def _at_least(minimum: int) -> Callable[[object], int]:
    def parse(value: object) -> int:
        result = _parse_long(value)
        if result < minimum:
            raise ValueError(f"must be at least {minimum}")
        return result

    return parse


def _ratio(value: object) -> float:
    result = _parse_double(value)
    if not 0.0 <= result <= 1.0:
        raise ValueError("must be between 0 and 1 inclusive")
    return result


def _retention_long(value: object) -> int:
    result = _parse_long(value)
    if result < -1:
        raise ValueError("must be -1 (unlimited) or at least 0")
    return result


@dataclass(frozen=True)
class ConfigKey:
    """A topic-level config key, its broker-level default key and Kafka's default."""

    name: str
    broker_key: str | None
    default: object
    parse: Callable[[object], Any]
    doc: str


TOPIC_KEYS: dict[str, ConfigKey] = {
    k.name: k
    for k in [
        ConfigKey(
            "cleanup.policy",
            "log.cleanup.policy",
            "delete",
            _parse_policy,
            "'delete', 'compact' or 'compact,delete'",
        ),
        ConfigKey(
            "segment.bytes",
            "log.segment.bytes",
            1073741824,
            _at_least(14),
            "roll the active segment when it would grow past this many bytes",
        ),
        ConfigKey(
            "segment.ms",
            "log.roll.ms",
            604800000,
            _at_least(1),
            "roll the active segment when its first batch is this old",
        ),
        ConfigKey(
            "min.cleanable.dirty.ratio",
            "log.cleaner.min.cleanable.ratio",
            0.5,
            _ratio,
            "compact when dirty bytes / (clean + dirty) is above this",
        ),
        ConfigKey(
            "min.compaction.lag.ms",
            "log.cleaner.min.compaction.lag.ms",
            0,
            _at_least(0),
            "records stay uncompacted at least this long (KIP-58)",
        ),
        ConfigKey(
            "max.compaction.lag.ms",
            "log.cleaner.max.compaction.lag.ms",
            LONG_MAX,
            _at_least(1),
            "records are compacted at most this long after they are written (KIP-354)",
        ),
        ConfigKey(
            "delete.retention.ms",
            "log.cleaner.delete.retention.ms",
            86400000,
            _at_least(0),
            "tombstones are kept this long after the first pass that keeps them (KIP-534)",
        ),
        ConfigKey(
            "retention.ms",
            "log.retention.ms",
            604800000,
            _retention_long,
            "delete segments older than this (-1: unlimited)",
        ),
        ConfigKey(
            "retention.bytes",
            "log.retention.bytes",
            -1,
            _retention_long,
            "delete the oldest segments while the partition is larger than this (-1: unlimited)",
        ),
        ConfigKey(
            "file.delete.delay.ms",
            "log.segment.delete.delay.ms",
            60000,
            _at_least(0),
            "removed files are physically deleted this long after they leave the log",
        ),
        ConfigKey(
            "compaction.strategy",
            "log.cleaner.compaction.strategy",
            "offset",
            _parse_strategy,
            "which record of a key wins: offset, timestamp or header (KIP-280)",
        ),
        ConfigKey(
            "compaction.strategy.header",
            "log.cleaner.compaction.strategy.header",
            "",
            _parse_string,
            "header holding the 8-byte big-endian version for the header strategy",
        ),
        ConfigKey(
            "retention.commitoffset.ms",
            "log.retention.commitoffset.ms",
            -1,
            _retention_long,
            "delete consumed segments older than this (KIP-68; -1: off)",
        ),
    ]
}

#: Broker-level keys measured in a coarser unit, Kafka's precedence: ms > minutes > hours.
_BROKER_UNIT_ALIASES: dict[str, list[tuple[str, int]]] = {
    "log.retention.ms": [("log.retention.minutes", 60_000), ("log.retention.hours", 3_600_000)],
    "log.roll.ms": [("log.roll.hours", 3_600_000)],
    "log.retention.commitoffset.ms": [
        ("log.retention.commitoffset.minutes", 60_000),
        ("log.retention.commitoffset.hours", 3_600_000),
    ],
}
_TOPIC_UNIT_ALIASES: dict[str, list[tuple[str, int]]] = {
    "retention.commitoffset.ms": [
        ("retention.commitoffset.minutes", 60_000),
        ("retention.commitoffset.hours", 3_600_000),
    ],
}
BROKER_KEYS: set[str] = {k.broker_key for k in TOPIC_KEYS.values() if k.broker_key} | {
    alias for aliases in _BROKER_UNIT_ALIASES.values() for alias, _ in aliases
}
ALL_TOPIC_KEYS: set[str] = set(TOPIC_KEYS) | {a for aliases in _TOPIC_UNIT_ALIASES.values() for a, _ in aliases}


def did_you_mean(key: str, known: set[str] | list[str]) -> str:
    """A ' (did you mean ...?)' hint for an unknown key, or '' when nothing is close."""
    close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


@dataclass(frozen=True)
class TopicConfig:
    """A topic's effective configuration (topic overrides over broker defaults over Kafka's)."""

    cleanup_policy: frozenset[str] = frozenset({"delete"})
    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    delete_retention_ms: int = 86400000
    retention_ms: int = 604800000
    retention_bytes: int = -1
    file_delete_delay_ms: int = 60000
    compaction_strategy: str = "offset"
    compaction_strategy_header: str = ""
    retention_commitoffset_ms: int = -1

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def max_segment_ms(self) -> int:
        """min(segment.ms, max.compaction.lag.ms) for compacted topics, else segment.ms (KIP-354)."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.segment_ms, self.max_compaction_lag_ms)
        return self.segment_ms

    @property
    def consumed_retention_enabled(self) -> bool:
        return self.retention_commitoffset_ms >= 0

    def to_kafka_dict(self) -> dict[str, object]:
        """The config as Kafka key → value (policy as Kafka's comma list)."""
        out: dict[str, object] = {}
        for key in TOPIC_KEYS.values():
            value = getattr(self, _attr(key.name))
            out[key.name] = ",".join(sorted(value)) if key.name == "cleanup.policy" else value
        return out


def _attr(kafka_key: str) -> str:
    return kafka_key.replace(".", "_")


def _fold_unit_aliases(
    values: Mapping[str, object], aliases: dict[str, list[tuple[str, int]]], where: str, problems: list[str]
) -> tuple[dict[str, object], dict[str, tuple[str, object]]]:
    """Replace `*.minutes`/`*.hours` keys by their `*.ms` key, ms winning over minutes over hours.
    Also returns, per `*.ms` key taken from an alias, the alias and the value as written, so a
    problem is reported under the name written in the file."""
    out = dict(values)
    written: dict[str, tuple[str, object]] = {}
    for ms_key, units in aliases.items():
        for alias, factor in units:
            if alias not in out:
                continue
            raw = out.pop(alias)
            try:
                parsed = _parse_long(raw) * factor if _parse_long(raw) >= 0 else _parse_long(raw)
            except ValueError as exc:
                problems.append(f"{where}: {alias}={shown(raw)}: {exc}")
                continue
            if ms_key not in out:
                out[ms_key] = parsed
                written[ms_key] = (alias, raw)
    return out, written


def resolve_topic_config(
    broker_defaults: Mapping[str, object],
    overrides: Mapping[str, object],
    *,
    where: str = "config",
    broker_where: str | None = None,
) -> TopicConfig:
    """Validate and merge broker defaults and topic overrides into a TopicConfig.

    Raises ConfigError listing every problem: unknown keys (with a did-you-mean), wrong types,
    values out of range, and the cross-key rules Kafka enforces in LogConfig.validateValues
    (min.compaction.lag.ms ≤ max.compaction.lag.ms) plus KIP-68's consumed retention ≤ forced
    retention and the header strategy needing a header name.
    """
    problems: list[str] = []
    broker_where = broker_where or where
    broker, broker_written = _fold_unit_aliases(broker_defaults, _BROKER_UNIT_ALIASES, broker_where, problems)
    topic, topic_written = _fold_unit_aliases(overrides, _TOPIC_UNIT_ALIASES, where, problems)
    for name in broker:
        if name not in BROKER_KEYS:
            problems.append(f"{broker_where}: unknown broker-level key '{name}'{did_you_mean(name, BROKER_KEYS)}")
    for name in topic:
        if name not in TOPIC_KEYS:
            problems.append(f"{where}: unknown topic-level key '{name}'{did_you_mean(name, ALL_TOPIC_KEYS)}")
    values: dict[str, Any] = {}
    for key in TOPIC_KEYS.values():
        if key.name in topic:
            source, raw = where, topic[key.name]
        elif key.broker_key in broker:
            source, raw = broker_where, broker[key.broker_key]
        else:
            values[_attr(key.name)] = key.parse(key.default)
            continue
        name = key.name if source == where else str(key.broker_key)
        written, written_raw = (topic_written if source == where else broker_written).get(name, (name, raw))
        try:
            values[_attr(key.name)] = key.parse(raw)
        except ValueError as exc:
            problems.append(f"{source}: {written}={shown(written_raw)}: {exc}")
    if not problems:
        problems.extend(_cross_key_problems(values, where))
    if problems:
        raise ConfigError(problems)
    return TopicConfig(**values)


def _cross_key_problems(values: Mapping[str, Any], where: str) -> list[str]:
    problems = []
    if values["min_compaction_lag_ms"] > values["max_compaction_lag_ms"]:
        problems.append(
            f"{where}: max.compaction.lag.ms={values['max_compaction_lag_ms']} is less than "
            f"min.compaction.lag.ms={values['min_compaction_lag_ms']}: max.compaction.lag.ms must be "
            "at least min.compaction.lag.ms (KIP-354)"
        )
    commit_ms, forced_ms = values["retention_commitoffset_ms"], values["retention_ms"]
    if commit_ms >= 0 and forced_ms >= 0 and commit_ms > forced_ms:
        problems.append(
            f"{where}: retention.commitoffset.ms={commit_ms} is greater than retention.ms={forced_ms}: "
            "consumed retention must not exceed forced retention (KIP-68)"
        )
    if values["compaction_strategy"] == "header" and not values["compaction_strategy_header"]:
        problems.append(
            f"{where}: compaction.strategy=header needs compaction.strategy.header: name the header "
            "that carries the record version (KIP-280)"
        )
    return problems


# --------------------------------------------------------------------------------------------
# The YAML file


@dataclass(frozen=True)
class StorageSettings:
    """How to reach the lake. Secrets are excluded from repr so they never reach a log."""

    endpoint_url: str | None = None
    region: str | None = None
    access_key_id: str | None = field(default=None, repr=False)
    secret_access_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    max_attempts: int = 5
    backoff_base_ms: int = 100
    backoff_max_ms: int = 5000
    # Attempts of a conditional write that lost a race to another writer (a manifest commit,
    # offsets, the cleaner state), and the time limit of any retried operation (io/base.RetryPolicy).
    commit_attempts: int = 50
    retry_timeout_ms: int = 300_000
    delete_all_versions: bool = False
    # Requests in flight at once for metadata I/O (io/concurrent.py) and HTTP connections per client.
    max_concurrency: int = 64
    # s3://: "verify" probes, before the first write, that the store honours If-None-Match and
    # If-Match, and refuses to write to one that does not; "trust" skips the probe.
    conditional_writes: str = "verify"
    # s3://: when the SDKs add request checksums ("when_supported": always, with aws-chunked
    # uploads; "when_required"). None: when_required for a custom endpoint, the SDK default on AWS.
    request_checksum_calculation: str | None = None


@dataclass(frozen=True)
class TopicSpec:
    """A topic declared in the config file: partitions, DAG schedule and topic-level overrides."""

    name: str
    partitions: int = 1
    schedule: str | None = "@hourly"
    overrides: Mapping[str, object] = field(default_factory=dict)
    consumer_groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class SparkSettings:
    """`ship_package`: whether the lakecleaner package goes to the executors as a zip in
    spark.submit.pyFiles — `auto` (for every master but local), `always` or `never` (the workers'
    Python has lakecleaner installed, or a packed environment comes through spark.archives)."""

    master: str = "local[*]"
    conf: Mapping[str, str] = field(default_factory=dict)
    ship_package: str = "auto"
    #: A Spark Connect server (sc://host:port) to send the compaction to instead of starting a
    #: Spark application; None: a classic session on `master`.
    remote: str | None = None

    def ships_package(self, master: str) -> bool:
        """Whether a run on `master` sends the package zip to its executors."""
        if self.ship_package == "auto":
            return not master.startswith("local")
        return self.ship_package == "always"


def spark_loopback_env(master: str, environ: Mapping[str, str]) -> dict[str, str]:
    """What a Spark driver on a `local` master needs in its environment to stay on this machine:
    SPARK_LOCAL_IP=127.0.0.1, unless the environment sets it. Otherwise Spark picks the first
    non-loopback interface (warning "Your hostname … resolves to a loopback address") and its UI
    and block manager listen there, reachable from the network for a job that uses none."""
    is_local = master == "local" or master.startswith("local[")
    return {"SPARK_LOCAL_IP": "127.0.0.1"} if is_local and "SPARK_LOCAL_IP" not in environ else {}


#: Kafka's defaults for the cleaner's offset map (broker configs). Kafka's buffer is shared by its
#: cleaner threads; here each pass-1 task holds one (two per 2-core executor: 256 MiB of maps).
DEFAULT_DEDUPE_BUFFER_SIZE = 128 * 1024 * 1024
DEFAULT_IO_BUFFER_LOAD_FACTOR = 0.9
MIN_DEDUPE_BUFFER_SIZE = 1024


@dataclass(frozen=True)
class CleanerSettings:
    """The cleaner's broker-level settings, with Kafka's names and meaning:
    log.cleaner.dedupe.buffer.size, the bytes of offset map one compaction task may hold, and
    log.cleaner.io.buffer.load.factor, how full that map may get. Kafka shares the buffer among
    its cleaner threads; here each Spark task of pass 1 gets the whole of it."""

    dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE
    io_buffer_load_factor: float = DEFAULT_IO_BUFFER_LOAD_FACTOR


@dataclass(frozen=True)
class AirflowSettings:
    """What the topics' DAGs need in Airflow, created by `lakecleaner airflow setup`: the pool that
    bounds how many Spark applications (compact tasks) run at once, and its slot count."""

    pool: str = "lakecleaner_spark"
    pool_slots: int = 2


#: How long run reports are kept by default (`lake.report_retention_days`).
DEFAULT_REPORT_RETENTION_DAYS = 30
#: The most partitions a topic may have by default (`lake.max_partitions_per_topic`): a topic.json
#: naming a billion would have every lake-wide reader build a billion partition objects.
DEFAULT_MAX_PARTITIONS_PER_TOPIC = 10_000
#: The most `lake.max_partitions_per_topic` may be set to.
MAX_PARTITIONS_PER_TOPIC = 1_000_000
DAY_MS = 86_400_000


@dataclass(frozen=True)
class LakeConfig:
    """The whole config file, validated. `report_retention_ms`: how long a topic's run reports
    stay (gc prunes older runs' folders, never the newest run); None keeps every one."""

    lake_uri: str
    storage: StorageSettings = field(default_factory=StorageSettings)
    defaults: Mapping[str, object] = field(default_factory=dict)
    topics: Mapping[str, TopicSpec] = field(default_factory=dict)
    spark: SparkSettings = field(default_factory=SparkSettings)
    source: str = "<defaults>"
    airflow: AirflowSettings = field(default_factory=AirflowSettings)
    cleaner: CleanerSettings = field(default_factory=CleanerSettings)
    report_retention_ms: int | None = DEFAULT_REPORT_RETENTION_DAYS * DAY_MS
    max_partitions_per_topic: int = DEFAULT_MAX_PARTITIONS_PER_TOPIC

    def topic_config(self, name: str, overrides: Mapping[str, object] | None = None) -> TopicConfig:
        """Effective config of `name`: its overrides here (or `overrides`) over the defaults."""
        spec = self.topics.get(name)
        topic_overrides = dict(spec.overrides) if spec else {}
        topic_overrides.update(overrides or {})
        where = f"{self.source}: topics.{name}.config"
        if overrides:
            where = f"topic {name} config (stored with the topic, over {where})"
        return resolve_topic_config(
            self.defaults, topic_overrides, where=where, broker_where=f"{self.source}: defaults"
        )


_TOP_KEYS = {"lake", "defaults", "topics", "spark", "airflow", "cleaner"}
_CLEANER_KEYS = {"log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.load.factor"}
_LAKE_KEYS = {"uri", "storage", "report_retention_days", "max_partitions_per_topic"}
_STORAGE_KEYS = {f for f in StorageSettings.__dataclass_fields__}
_TOPIC_SPEC_KEYS = {"partitions", "schedule", "config", "consumer_groups"}
_SPARK_KEYS = {"master", "conf", "ship_package", "remote"}
_AIRFLOW_KEYS = {"pool", "pool_slots"}
_POOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,256}$")
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _expand_env(value: object, where: str, problems: list[str]) -> object:
    """Expand ${VAR} references in a string from the environment."""
    if not isinstance(value, str):
        return value

    def sub(match: re.Match[str]) -> str:
        var = match.group(1)
        if var not in os.environ:
            problems.append(f"{where}: environment variable {var} is not set; export it or remove the reference")
            return ""
        return os.environ[var]

    return _ENV_REF.sub(sub, value)


def _check_keys(section: object, allowed: set[str], where: str, problems: list[str]) -> dict[str, Any]:
    if section is None:
        return {}
    if not isinstance(section, dict):
        problems.append(f"{where}: must be a mapping, got {type(section).__name__}")
        return {}
    for key in section:
        if key not in allowed:
            problems.append(f"{where}: unknown key '{key}'{did_you_mean(str(key), allowed)}")
    return section


def _parse_storage(raw: dict[str, Any], where: str, problems: list[str]) -> StorageSettings:
    values: dict[str, Any] = {}
    for text_key in ("endpoint_url", "region", "access_key_id", "secret_access_key", "session_token"):
        if raw.get(text_key) is not None:
            value = _expand_env(raw[text_key], f"{where}.{text_key}", problems)
            if not isinstance(value, str):
                problems.append(f"{where}.{text_key}: must be a string")
            else:
                values[text_key] = value or None
    if os.environ.get(ENV_MAX_CONCURRENCY):
        raw = {**raw, "max_concurrency": os.environ[ENV_MAX_CONCURRENCY]}
    for int_key, minimum in (
        ("max_attempts", 1),
        ("backoff_base_ms", 0),
        ("backoff_max_ms", 0),
        ("commit_attempts", 1),
        ("retry_timeout_ms", 1),
        ("max_concurrency", 1),
    ):
        if int_key in raw:
            try:
                values[int_key] = _at_least(minimum)(raw[int_key])
            except ValueError as exc:
                problems.append(f"{where}.{int_key}={shown(raw[int_key])}: {exc}")
    for choice_key, choices in (
        ("conditional_writes", ("verify", "trust")),
        ("request_checksum_calculation", ("when_supported", "when_required")),
    ):
        if choice_key in raw:
            if raw[choice_key] in choices:
                values[choice_key] = raw[choice_key]
            else:
                problems.append(f"{where}.{choice_key}={shown(raw[choice_key])}: must be one of {', '.join(choices)}")
    if "delete_all_versions" in raw:
        if isinstance(raw["delete_all_versions"], bool):
            values["delete_all_versions"] = raw["delete_all_versions"]
        else:
            problems.append(f"{where}.delete_all_versions={shown(raw['delete_all_versions'])}: must be true or false")
    return StorageSettings(**values)


def _parse_report_retention(lake: Mapping[str, Any], where: str, problems: list[str]) -> int | None:
    """lake.report_retention_days in ms: a whole number of days (at least 1), or null to keep
    every report; absent: DEFAULT_REPORT_RETENTION_DAYS."""
    days = lake.get("report_retention_days", DEFAULT_REPORT_RETENTION_DAYS)
    if days is None:
        return None
    if isinstance(days, bool) or not isinstance(days, int) or days < 1:
        problems.append(
            f"{where}={shown(days)}: must be a whole number of days of at least 1, or null to keep every report"
        )
        return DEFAULT_REPORT_RETENTION_DAYS * DAY_MS
    return days * DAY_MS


def _parse_max_partitions(lake: Mapping[str, Any], where: str, problems: list[str]) -> int:
    """lake.max_partitions_per_topic: a whole number in [1, MAX_PARTITIONS_PER_TOPIC]."""
    value = lake.get("max_partitions_per_topic", DEFAULT_MAX_PARTITIONS_PER_TOPIC)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_PARTITIONS_PER_TOPIC:
        problems.append(f"{where}={shown(value)}: must be a whole number from 1 to {MAX_PARTITIONS_PER_TOPIC}")
        return DEFAULT_MAX_PARTITIONS_PER_TOPIC
    return value


def _parse_topic_spec(name: object, raw: object, where: str, problems: list[str]) -> TopicSpec | None:
    try:
        topic = validate_topic_name(name)
    except InvalidTopicName as exc:
        problems.append(f"{where}: {exc}")
        return None
    section = _check_keys(raw, _TOPIC_SPEC_KEYS, f"{where}.{topic}", problems)
    partitions = section.get("partitions", 1)
    if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
        problems.append(f"{where}.{topic}.partitions={shown(partitions)}: must be an integer of at least 1")
        partitions = 1
    schedule = section.get("schedule", "@hourly")
    if schedule is not None and not isinstance(schedule, str):
        problems.append(f"{where}.{topic}.schedule={shown(schedule)}: must be a cron expression, a preset or null")
    overrides = section.get("config") or {}
    if not isinstance(overrides, dict) or not all(isinstance(k, str) for k in overrides):
        problems.append(f"{where}.{topic}.config: must be a mapping of topic-level keys (names like cleanup.policy)")
        overrides = {}
    groups = section.get("consumer_groups") or []
    if not isinstance(groups, list) or not all(isinstance(g, str) and g for g in groups):
        problems.append(f"{where}.{topic}.consumer_groups: must be a list of group names")
        groups = []
    return TopicSpec(topic, partitions, schedule, dict(overrides), tuple(groups))


def _parse_spark(raw: dict[str, Any], source: str, problems: list[str]) -> SparkSettings:
    master = raw.get("master", "local[*]")
    if not isinstance(master, str) or not master:
        problems.append(
            f"{source}: spark.master={shown(master)}: must be a master URL such as local[*] or spark://host:7077"
        )
        master = "local[*]"
    conf = raw.get("conf") or {}
    scalar = (str, int, float, bool)
    if not isinstance(conf, dict) or not all(isinstance(k, str) and isinstance(v, scalar) for k, v in conf.items()):
        problems.append(
            f"{source}: spark.conf: must be a mapping of Spark setting names to values, "
            "e.g. spark.sql.shuffle.partitions: 8"
        )
        conf = {}
    ship = raw.get("ship_package", "auto")
    if ship not in SHIP_PACKAGE:
        problems.append(f"{source}: spark.ship_package={shown(ship)}: must be one of {', '.join(SHIP_PACKAGE)}")
        ship = "auto"
    remote = os.environ.get(ENV_SPARK_REMOTE) or raw.get("remote")
    if remote is not None and (not isinstance(remote, str) or not remote.startswith("sc://")):
        problems.append(
            f"{source}: spark.remote={shown(remote)}: must be a Spark Connect URL such as sc://spark-connect:15002"
        )
        remote = None
    return SparkSettings(master=master, conf={k: str(v) for k, v in conf.items()}, ship_package=ship, remote=remote)


def _parse_airflow(raw: dict[str, Any], where: str, problems: list[str]) -> AirflowSettings:
    values: dict[str, Any] = {}
    if "pool" in raw:
        if isinstance(raw["pool"], str) and _POOL_NAME.match(raw["pool"]):
            values["pool"] = raw["pool"]
        else:
            problems.append(f"{where}.pool={shown(raw['pool'])}: must be a pool name of letters, digits, '_', '.', '-'")
    if "pool_slots" in raw:
        try:
            values["pool_slots"] = _at_least(1)(raw["pool_slots"])
        except ValueError as exc:
            problems.append(f"{where}.pool_slots={shown(raw['pool_slots'])}: {exc}")
    return AirflowSettings(**values)


def _parse_cleaner(raw: dict[str, Any], where: str, problems: list[str]) -> CleanerSettings:
    values: dict[str, Any] = {}
    if os.environ.get(ENV_DEDUPE_BUFFER_SIZE):
        raw = {**raw, "log.cleaner.dedupe.buffer.size": os.environ[ENV_DEDUPE_BUFFER_SIZE]}
    if "log.cleaner.dedupe.buffer.size" in raw:
        value = raw["log.cleaner.dedupe.buffer.size"]
        try:
            values["dedupe_buffer_size"] = _at_least(MIN_DEDUPE_BUFFER_SIZE)(value)
        except ValueError as exc:
            problems.append(
                f"{where}.log.cleaner.dedupe.buffer.size={shown(value)}: {exc} (bytes of offset map per task)"
            )
    if "log.cleaner.io.buffer.load.factor" in raw:
        value = raw["log.cleaner.io.buffer.load.factor"]
        try:
            factor = _parse_double(value)
            if not 0.0 < factor <= 1.0:
                raise ValueError("must be greater than 0 and at most 1")
            values["io_buffer_load_factor"] = factor
        except ValueError as exc:
            problems.append(f"{where}.log.cleaner.io.buffer.load.factor={shown(value)}: {exc}")
    return CleanerSettings(**values)


def parse_config(data: object, source: str = "<config>") -> LakeConfig:
    """Validate a parsed YAML document into a LakeConfig, or raise ConfigError with every problem."""
    problems: list[str] = []
    top = _check_keys(data, _TOP_KEYS, source, problems)
    lake = _check_keys(top.get("lake"), _LAKE_KEYS, f"{source}: lake", problems)
    uri = os.environ.get(ENV_LAKE_URI) or lake.get("uri") or "file://./lake"
    uri = _expand_env(uri, f"{source}: lake.uri", problems)
    if not isinstance(uri, str) or not re.match(r"^(s3|file)://.+", uri):
        problems.append(f"{source}: lake.uri={shown(uri)}: must start with s3://bucket/prefix or file:///path")
        uri = "file://./lake"
    storage = _parse_storage(
        _check_keys(lake.get("storage"), _STORAGE_KEYS, f"{source}: lake.storage", problems),
        f"{source}: lake.storage",
        problems,
    )
    if os.environ.get(ENV_S3_ENDPOINT):
        storage = StorageSettings(**{**storage.__dict__, "endpoint_url": os.environ[ENV_S3_ENDPOINT]})
    report_retention_ms = _parse_report_retention(lake, f"{source}: lake.report_retention_days", problems)
    max_partitions = _parse_max_partitions(lake, f"{source}: lake.max_partitions_per_topic", problems)
    defaults = _check_keys(top.get("defaults"), BROKER_KEYS, f"{source}: defaults", problems)
    raw_topics = top.get("topics") or {}
    topics: dict[str, TopicSpec] = {}
    if not isinstance(raw_topics, dict):
        problems.append(f"{source}: topics: must be a mapping of topic name to settings")
        raw_topics = {}
    for name, raw in raw_topics.items():
        spec = _parse_topic_spec(name, raw, f"{source}: topics", problems)
        if spec is not None:
            topics[spec.name] = spec
    spark = _parse_spark(_check_keys(top.get("spark"), _SPARK_KEYS, f"{source}: spark", problems), source, problems)
    airflow = _parse_airflow(
        _check_keys(top.get("airflow"), _AIRFLOW_KEYS, f"{source}: airflow", problems), f"{source}: airflow", problems
    )
    cleaner = _parse_cleaner(
        _check_keys(top.get("cleaner"), _CLEANER_KEYS, f"{source}: cleaner", problems), f"{source}: cleaner", problems
    )
    config = LakeConfig(
        uri,
        storage,
        {k: v for k, v in defaults.items() if k in BROKER_KEYS},
        topics,
        spark,
        source,
        airflow,
        cleaner,
        report_retention_ms,
        max_partitions,
    )
    try:  # the defaults are checked even when no topic uses them yet
        resolve_topic_config(config.defaults, {}, broker_where=f"{source}: defaults")
    except ConfigError as exc:
        problems.extend(exc.problems)
    for name in topics:
        try:
            config.topic_config(name)
        except ConfigError as exc:
            problems.extend(p for p in exc.problems if p not in problems)
    if problems:
        raise ConfigError(problems)
    return config


#: The config file looked for in the working directory when neither --config nor
#: $LAKECLEANER_CONFIG names one.
LOCAL_CONFIG = "lakecleaner.yaml"


def find_config(path: str | Path | None = None) -> Path | None:
    """The config file, looked for in this order: `path` (the CLI's --config), $LAKECLEANER_CONFIG,
    ./lakecleaner.yaml; None when none is given and ./lakecleaner.yaml does not exist. A file that
    is named but missing is a ConfigError."""
    named = path or os.environ.get(ENV_CONFIG_PATH)
    if named:
        chosen = Path(named)
        if not chosen.is_file():
            raise ConfigError([f"{chosen}: config file not found (named by {'--config' if path else ENV_CONFIG_PATH})"])
        return chosen.resolve()
    local = Path(LOCAL_CONFIG)
    return local.resolve() if local.is_file() else None


def locate_config(path: str | Path | None = None) -> Path:
    """`find_config`, or a ConfigError naming the three places and how to get a config file."""
    found = find_config(path)
    if found is None:
        raise ConfigError(
            [
                f"no config file: pass --config PATH, set {ENV_CONFIG_PATH}, or create ./{LOCAL_CONFIG} "
                "(`lakecleaner init` writes the sample one)"
            ]
        )
    return found


#: Bounds on a config file, which is input like any other: a 1 KB "billion laughs" of nested aliases
#: expands to gigabytes wherever the value is walked or printed, and deep nesting exhausts the stack.
MAX_CONFIG_BYTES = 1 << 20
MAX_CONFIG_ALIASES = 1000
MAX_CONFIG_DEPTH = 50


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing more than MAX_CONFIG_ALIASES aliases and nesting deeper than
    MAX_CONFIG_DEPTH."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.aliases, self.depth = 0, 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_CONFIG_ALIASES:
                raise yaml.YAMLError(f"more than {MAX_CONFIG_ALIASES} aliases (*name): a config file needs far fewer")
        self.depth += 1
        try:
            if self.depth > MAX_CONFIG_DEPTH:
                raise yaml.YAMLError(f"nested deeper than {MAX_CONFIG_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def shown(value: object) -> str:
    """A value as an error message shows it: its repr, cut to a few dozen characters, built without
    walking more of it than it shows (a value of nested aliases may stand for gigabytes)."""
    return _SHOWN.repr(value)


_SHOWN = reprlib.Repr()
_SHOWN.maxstring = _SHOWN.maxother = _SHOWN.maxlong = 60
_SHOWN.maxlevel, _SHOWN.maxlist, _SHOWN.maxdict = 2, 4, 4


def load_config(path: str | Path | None = None) -> LakeConfig:
    """Load and validate the config file `locate_config(path)` finds (bounded: MAX_CONFIG_BYTES,
    MAX_CONFIG_ALIASES, MAX_CONFIG_DEPTH)."""
    chosen = locate_config(path)
    text = chosen.read_text()
    if len(text) > MAX_CONFIG_BYTES:
        raise ConfigError([f"{chosen}: {len(text)} characters, more than a config file may have ({MAX_CONFIG_BYTES})"])
    try:
        data = yaml.load(text, Loader=_BoundedLoader)  # a SafeLoader, with bounds
    except (yaml.YAMLError, RecursionError) as exc:
        raise ConfigError([f"{chosen}: not valid YAML: {str(exc)[:500]}"]) from None
    return parse_config(data or {}, str(chosen))


def sample_config_text() -> str:
    """The sample config file shipped with the package (the demo's two topics, a local lake at ./lake)."""
    return files("lakecleaner").joinpath("samples", LOCAL_CONFIG).read_text()
