"""The config file's model (lake, storage, topics, spark, airflow, cleaner) and its parsing: every
problem collected, each on its own line naming the file, the key, the value and the rule."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lakecleaner.config.adopt import ConnectSource, parse_adopt
from lakecleaner.config.environment import (
    ENV_DEDUPE_BUFFER_SIZE,
    ENV_LAKE_URI,
    ENV_MAX_CONCURRENCY,
    ENV_S3_ENDPOINT,
    ENV_SPARK_REMOTE,
)
from lakecleaner.config.iceberg import IcebergSettings, colliding_tables, parse_iceberg, parse_topic_iceberg
from lakecleaner.config.kafka import (
    ClusterOffsets,
    KafkaCluster,
    MirrorSpec,
    parse_clusters,
    parse_mirror,
    parse_offsets_source,
    unknown_clusters,
)
from lakecleaner.config.sections import check_keys, expand_env
from lakecleaner.config.topic_keys import BROKER_KEYS, TopicConfig, resolve_topic_config
from lakecleaner.config.values import at_least, parse_double, shown
from lakecleaner.errors import ConfigError, InvalidTopicName
from lakecleaner.names import validate_topic_name

SHIP_PACKAGE = ("auto", "always", "never")

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
    #: Where the topic's records come from (`lakecleaner mirror`), if from a Kafka cluster.
    mirror: MirrorSpec | None = None
    #: The cluster and Kafka topic whose committed offsets of `consumer_groups` consumed retention
    #: reads; None: the lake's own store.
    consumer_offsets: ClusterOffsets | None = None
    #: Whether the topic is an Iceberg table (`iceberg: {enabled: …}`); None: the lake's `iceberg.enabled`.
    iceberg: bool | None = None
    #: Where Kafka Connect's S3 sink writes the topic, if its records come from there (`lakecleaner adopt`).
    adopt: ConnectSource | None = None


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


def is_local_master(master: str) -> bool:
    """Whether `master` runs Spark inside the driver's process (`local`, `local[N]`, `local[*]`)."""
    return master == "local" or master.startswith("local[")


def spark_loopback_env(master: str, environ: Mapping[str, str]) -> dict[str, str]:
    """What a Spark driver on a `local` master needs in its environment to stay on this machine:
    SPARK_LOCAL_IP=127.0.0.1, unless the environment sets it. Otherwise Spark picks the first
    non-loopback interface (warning "Your hostname … resolves to a loopback address") and its UI
    and block manager listen there, reachable from the network for a job that uses none."""
    return {"SPARK_LOCAL_IP": "127.0.0.1"} if is_local_master(master) and "SPARK_LOCAL_IP" not in environ else {}


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
    bounds how many Spark applications (compact tasks) run at once, and its slot count; and the
    pool of the mirrored topics' `mirror` tasks (Kafka consumers), and its slot count."""

    pool: str = "lakecleaner_spark"
    pool_slots: int = 2
    mirror_pool: str = "lakecleaner_mirror"
    mirror_pool_slots: int = 4


#: How long run reports are kept by default (`lake.report_retention_days`).
DEFAULT_REPORT_RETENTION_DAYS = 30
#: The most partitions a topic may have by default (`lake.max_partitions_per_topic`): a topic.json
#: naming a billion would have every lake-wide reader build a billion partition objects.
DEFAULT_MAX_PARTITIONS_PER_TOPIC = 10_000
#: The most `lake.max_partitions_per_topic` may be set to.
MAX_PARTITIONS_PER_TOPIC = 1_000_000
HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS


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
    kafka_clusters: Mapping[str, KafkaCluster] = field(default_factory=dict)
    iceberg: IcebergSettings = field(default_factory=IcebergSettings)

    def iceberg_enabled(self, topic: str) -> bool:
        """Whether `topic` is kept as an Iceberg table: its own `iceberg.enabled`, else the lake's."""
        spec = self.topics.get(topic)
        own = None if spec is None else spec.iceberg
        return self.iceberg.enabled if own is None else own

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


_TOP_KEYS = {"lake", "defaults", "topics", "spark", "airflow", "cleaner", "kafka", "iceberg"}
_CLEANER_KEYS = {"log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.load.factor"}
_LAKE_KEYS = {"uri", "storage", "report_retention_days", "max_partitions_per_topic"}
_STORAGE_KEYS = {f for f in StorageSettings.__dataclass_fields__}
_TOPIC_SPEC_KEYS = {
    "partitions",
    "schedule",
    "config",
    "consumer_groups",
    "mirror",
    "consumer_offsets",
    "iceberg",
    "adopt",
}
_SPARK_KEYS = {"master", "conf", "ship_package", "remote"}
_AIRFLOW_KEYS = {"pool", "pool_slots", "mirror_pool", "mirror_pool_slots"}
_POOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,256}$")


def _parse_storage(raw: dict[str, Any], where: str, problems: list[str]) -> StorageSettings:
    values: dict[str, Any] = {}
    for text_key in ("endpoint_url", "region", "access_key_id", "secret_access_key", "session_token"):
        if raw.get(text_key) is not None:
            value = expand_env(raw[text_key], f"{where}.{text_key}", problems)
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
                values[int_key] = at_least(minimum)(raw[int_key])
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
    section = check_keys(raw, _TOPIC_SPEC_KEYS, f"{where}.{topic}", problems)
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
    mirror = parse_mirror(topic, section.get("mirror"), f"{where}.{topic}.mirror", problems)
    consumer_offsets = parse_offsets_source(
        topic, section.get("consumer_offsets"), mirror, f"{where}.{topic}.consumer_offsets", problems
    )
    iceberg = parse_topic_iceberg(section.get("iceberg"), f"{where}.{topic}.iceberg", problems)
    adopt = parse_adopt(section.get("adopt"), f"{where}.{topic}.adopt", problems)
    if adopt is not None and mirror is not None:
        problems.append(f"{where}.{topic}: mirror and adopt both bring the topic's records; keep one")
    return TopicSpec(
        topic, partitions, schedule, dict(overrides), tuple(groups), mirror, consumer_offsets, iceberg, adopt
    )


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
    for name in ("pool", "mirror_pool"):
        if name in raw:
            if isinstance(raw[name], str) and _POOL_NAME.match(raw[name]):
                values[name] = raw[name]
            else:
                problems.append(
                    f"{where}.{name}={shown(raw[name])}: must be a pool name of letters, digits, '_', '.', '-'"
                )
    for name in ("pool_slots", "mirror_pool_slots"):
        if name in raw:
            try:
                values[name] = at_least(1)(raw[name])
            except ValueError as exc:
                problems.append(f"{where}.{name}={shown(raw[name])}: {exc}")
    return AirflowSettings(**values)


def _parse_cleaner(raw: dict[str, Any], where: str, problems: list[str]) -> CleanerSettings:
    values: dict[str, Any] = {}
    if os.environ.get(ENV_DEDUPE_BUFFER_SIZE):
        raw = {**raw, "log.cleaner.dedupe.buffer.size": os.environ[ENV_DEDUPE_BUFFER_SIZE]}
    if "log.cleaner.dedupe.buffer.size" in raw:
        value = raw["log.cleaner.dedupe.buffer.size"]
        try:
            values["dedupe_buffer_size"] = at_least(MIN_DEDUPE_BUFFER_SIZE)(value)
        except ValueError as exc:
            problems.append(
                f"{where}.log.cleaner.dedupe.buffer.size={shown(value)}: {exc} (bytes of offset map per task)"
            )
    if "log.cleaner.io.buffer.load.factor" in raw:
        value = raw["log.cleaner.io.buffer.load.factor"]
        try:
            factor = parse_double(value)
            if not 0.0 < factor <= 1.0:
                raise ValueError("must be greater than 0 and at most 1")
            values["io_buffer_load_factor"] = factor
        except ValueError as exc:
            problems.append(f"{where}.log.cleaner.io.buffer.load.factor={shown(value)}: {exc}")
    return CleanerSettings(**values)


def parse_config(data: object, source: str = "<config>") -> LakeConfig:
    """Validate a parsed YAML document into a LakeConfig.

    Args:
        data: the document (mappings, lists and scalars, as a YAML loader returns them).
        source: what the messages call the document (a file's path).

    Returns:
        The validated config, `${VAR}` references expanded.

    Raises:
        ConfigError: every problem found, each naming its key and the fix.
    """
    problems: list[str] = []
    top = check_keys(data, _TOP_KEYS, source, problems)
    lake = check_keys(top.get("lake"), _LAKE_KEYS, f"{source}: lake", problems)
    uri = os.environ.get(ENV_LAKE_URI) or lake.get("uri") or "file://./lake"
    uri = expand_env(uri, f"{source}: lake.uri", problems)
    if not isinstance(uri, str) or not re.match(r"^(s3|file)://.+", uri):
        problems.append(f"{source}: lake.uri={shown(uri)}: must start with s3://bucket/prefix or file:///path")
        uri = "file://./lake"
    storage = _parse_storage(
        check_keys(lake.get("storage"), _STORAGE_KEYS, f"{source}: lake.storage", problems),
        f"{source}: lake.storage",
        problems,
    )
    if os.environ.get(ENV_S3_ENDPOINT):
        storage = StorageSettings(**{**storage.__dict__, "endpoint_url": os.environ[ENV_S3_ENDPOINT]})
    report_retention_ms = _parse_report_retention(lake, f"{source}: lake.report_retention_days", problems)
    max_partitions = _parse_max_partitions(lake, f"{source}: lake.max_partitions_per_topic", problems)
    defaults = check_keys(top.get("defaults"), BROKER_KEYS, f"{source}: defaults", problems)
    raw_topics = top.get("topics") or {}
    topics: dict[str, TopicSpec] = {}
    if not isinstance(raw_topics, dict):
        problems.append(f"{source}: topics: must be a mapping of topic name to settings")
        raw_topics = {}
    for name, raw in raw_topics.items():
        spec = _parse_topic_spec(name, raw, f"{source}: topics", problems)
        if spec is not None:
            topics[spec.name] = spec
    clusters = parse_clusters(top.get("kafka"), f"{source}: kafka", problems)
    problems.extend(unknown_clusters(topics, clusters, f"{source}: topics"))
    iceberg = parse_iceberg(top.get("iceberg"), f"{source}: iceberg", problems)
    if (
        not iceberg.catalog
        and not uri.startswith("file://")
        and (iceberg.enabled or any(spec.iceberg for spec in topics.values()))
    ):
        problems.append(
            f"{source}: iceberg.catalog: an s3:// lake's tables need a catalog (type: sql with a database uri, "
            "rest, glue): only a file:// lake has the embedded SQLite one"
        )
    spark = _parse_spark(check_keys(top.get("spark"), _SPARK_KEYS, f"{source}: spark", problems), source, problems)
    airflow = _parse_airflow(
        check_keys(top.get("airflow"), _AIRFLOW_KEYS, f"{source}: airflow", problems), f"{source}: airflow", problems
    )
    cleaner = _parse_cleaner(
        check_keys(top.get("cleaner"), _CLEANER_KEYS, f"{source}: cleaner", problems), f"{source}: cleaner", problems
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
        clusters,
        iceberg,
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
    problems.extend(colliding_tables(topics, config.iceberg_enabled, f"{source}: topics"))
    if problems:
        raise ConfigError(problems)
    return config
