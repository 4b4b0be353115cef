"""Iceberg table names of topics.

A topic name may hold `.` and `-` and capitals (Kafka's legal characters); Glue and Hive catalogs
take lowercase letters, digits and underscores only, and a `.` in a string identifier separates
namespaces. So a topic's table is named by lowercasing it and writing `.` and `-` as `_`
(`Orders.v1-eu` → `orders_v1_eu`). Two topics that map to one name cannot both be tables: the
table records its topic (`lakecleaner.topic`), and a sync refuses a table of another topic.
"""

from __future__ import annotations

import re

#: The table property naming the topic a table follows.
TOPIC_PROPERTY = "lakecleaner.topic"


def table_name(topic: str) -> str:
    """The Iceberg table name of `topic` (see the module's rule)."""
    return re.sub(r"[.-]", "_", topic.lower())


def table_identifier(namespace: str, topic: str, suffix: str = "") -> tuple[str, ...]:
    """The catalog identifier of `topic`'s table (`suffix`: `_latest` for its latest values): its
    namespace's levels, then its name."""
    return (*namespace.split("."), table_name(topic) + suffix)


__all__ = ["TOPIC_PROPERTY", "table_identifier", "table_name"]
