"""Kafka's topic-level config keys: names, defaults, broker-level defaults, validation.

Topic-level keys (`cleanup.policy`, `segment.bytes`, ...) resolve like Kafka's: a key set on
the topic wins, otherwise the broker-level default (`log.cleaner.*`, `log.retention.*`,
`log.segment.*`, `log.roll.*`) applies, otherwise Kafka's built-in default. Validation collects
every problem and reports each on its own line naming the file, the key, the value and the rule.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from lakecleaner.config.values import (
    LONG_MAX,
    at_least,
    did_you_mean,
    parse_long,
    parse_policy,
    parse_ratio,
    parse_retention_long,
    parse_strategy,
    parse_string,
    shown,
)
from lakecleaner.errors import ConfigError


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
            parse_policy,
            "'delete', 'compact' or 'compact,delete'",
        ),
        ConfigKey(
            "segment.bytes",
            "log.segment.bytes",
            1073741824,
            at_least(14),
            "roll the active segment when it would grow past this many bytes",
        ),
        ConfigKey(
            "segment.ms",
            "log.roll.ms",
            604800000,
            at_least(1),
            "roll the active segment when its first batch is this old",
        ),
        ConfigKey(
            "min.cleanable.dirty.ratio",
            "log.cleaner.min.cleanable.ratio",
            0.5,
            parse_ratio,
            "compact when dirty bytes / (clean + dirty) is above this",
        ),
        ConfigKey(
            "min.compaction.lag.ms",
            "log.cleaner.min.compaction.lag.ms",
            0,
            at_least(0),
            "records stay uncompacted at least this long (KIP-58)",
        ),
        ConfigKey(
            "max.compaction.lag.ms",
            "log.cleaner.max.compaction.lag.ms",
            LONG_MAX,
            at_least(1),
            "records are compacted at most this long after they are written (KIP-354)",
        ),
        ConfigKey(
            "delete.retention.ms",
            "log.cleaner.delete.retention.ms",
            86400000,
            at_least(0),
            "tombstones are kept this long after the first pass that keeps them (KIP-534)",
        ),
        ConfigKey(
            "retention.ms",
            "log.retention.ms",
            604800000,
            parse_retention_long,
            "delete segments older than this (-1: unlimited)",
        ),
        ConfigKey(
            "retention.bytes",
            "log.retention.bytes",
            -1,
            parse_retention_long,
            "delete the oldest segments while the partition is larger than this (-1: unlimited)",
        ),
        ConfigKey(
            "file.delete.delay.ms",
            "log.segment.delete.delay.ms",
            60000,
            at_least(0),
            "removed files are physically deleted this long after they leave the log",
        ),
        ConfigKey(
            "compaction.strategy",
            "log.cleaner.compaction.strategy",
            "offset",
            parse_strategy,
            "which record of a key wins: offset, timestamp or header (KIP-280)",
        ),
        ConfigKey(
            "compaction.strategy.header",
            "log.cleaner.compaction.strategy.header",
            "",
            parse_string,
            "header holding the 8-byte big-endian version for the header strategy",
        ),
        ConfigKey(
            "retention.commitoffset.ms",
            "log.retention.commitoffset.ms",
            -1,
            parse_retention_long,
            "delete consumed segments older than this (KIP-68; -1: off)",
        ),
        ConfigKey(
            "lakecleaner.rewrite.dead.ratio",
            "lakecleaner.rewrite.dead.ratio",
            0.3,
            parse_ratio,
            "a clean removes a group's superseded records by a deletion vector instead of rewriting its files "
            "while its removed records stay below this share of its stored ones (0: always rewrite; not Kafka's)",
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
    lakecleaner_rewrite_dead_ratio: float = 0.3

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
                parsed = parse_long(raw) * factor if parse_long(raw) >= 0 else parse_long(raw)
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
