"""The config file's Iceberg side (issue 48): topics as Iceberg tables, lake-wide or per topic.

    iceberg:
      enabled: true               # every topic; a topic's `iceberg: {enabled: …}` overrides it
      namespace: lakecleaner      # the tables are <namespace>.<table name of the topic>
      catalog:                    # pyiceberg catalog properties, as load_catalog takes them;
        type: sql                 # default for file:// lakes: SQL on SQLite in the lake's _lakecleaner/
        uri: postgresql+psycopg2://…/iceberg   # ${VAR} reads the environment
    topics:
      orders:
        iceberg: {enabled: false}

Catalog properties may hold credentials under any name (a database password, `s3.secret-access-key`,
a REST token): they are never shown, in a repr, a message or a report (`iceberg.shown`, by
allow-list).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from lakecleaner.config.sections import check_keys, client_properties
from lakecleaner.config.values import shown
from lakecleaner.names import table_name

_ICEBERG_KEYS = {"enabled", "namespace", "catalog"}
_TOPIC_ICEBERG_KEYS = {"enabled"}
DEFAULT_NAMESPACE = "lakecleaner"
#: A namespace of one or more levels of letters, digits and underscores (what every catalog takes).
_NAMESPACE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


@dataclass(frozen=True)
class IcebergSettings:
    """The lake-level `iceberg:` section; `catalog`: pyiceberg catalog properties (empty: the
    embedded default, which only a file:// lake has)."""

    enabled: bool = False
    namespace: str = DEFAULT_NAMESPACE
    catalog: Mapping[str, str] = field(default_factory=dict, repr=False)


def parse_iceberg(raw: object, where: str, problems: list[str]) -> IcebergSettings:
    section = check_keys(raw, _ICEBERG_KEYS, where, problems)
    enabled = _enabled(section, where, problems)
    namespace = section.get("namespace", DEFAULT_NAMESPACE)
    if not isinstance(namespace, str) or not _NAMESPACE.match(namespace):
        problems.append(
            f"{where}.namespace={shown(namespace)}: must be letters, digits and underscores, levels joined by dots"
        )
        namespace = DEFAULT_NAMESPACE
    catalog = section.get("catalog") or {}
    if not isinstance(catalog, dict):
        problems.append(f"{where}.catalog: must be a mapping of pyiceberg catalog properties (type: sql, uri: …)")
        catalog = {}
    properties = client_properties(catalog, f"{where}.catalog", "pyiceberg catalog property", problems)
    return IcebergSettings(enabled, namespace, properties)


def parse_topic_iceberg(raw: object, where: str, problems: list[str]) -> bool | None:
    """`topics.<t>.iceberg: {enabled: …}`; None: the lake's setting."""
    if raw is None:
        return None
    return _enabled(check_keys(raw, _TOPIC_ICEBERG_KEYS, where, problems), where, problems)


def _enabled(section: Mapping[str, object], where: str, problems: list[str]) -> bool:
    enabled = section.get("enabled", False)
    if not isinstance(enabled, bool):
        problems.append(f"{where}.enabled={shown(enabled)}: must be true or false")
        return False
    return enabled


def colliding_tables(topics: Iterable[str], tabled: Callable[[str], bool], where: str) -> list[str]:
    """A problem per set of topics kept as tables whose table names are one (`names.table_name`:
    `orders.v1` and `orders_v1`): each would overwrite the other's table."""
    by_table: dict[str, list[str]] = {}
    for topic in topics:
        if tabled(topic):
            by_table.setdefault(table_name(topic), []).append(topic)
    return [
        f"{where}: topics {' and '.join(sorted(names))} are both kept as Iceberg table {table}; rename one, or turn "
        f"its table off (iceberg: {{enabled: false}})"
        for table, names in sorted(by_table.items())
        if len(names) > 1
    ]


__all__ = ["DEFAULT_NAMESPACE", "IcebergSettings", "colliding_tables", "parse_iceberg", "parse_topic_iceberg"]
