"""Iceberg table names of topics.

A topic name may hold `.` and `-` and capitals (Kafka's legal characters); Glue and Hive catalogs
take lowercase letters, digits and underscores only, and a `.` in a string identifier separates
namespaces. So a topic's table is named by lowercasing it and writing `.` and `-` as `_`
(`Orders.v1-eu` → `orders_v1_eu`; `names.table_name`). Two topics that map to one name cannot both
be tables: the config refuses them, the table records its topic (`lakecleaner.topic`), and a sync
refuses a table of another topic. It records its lake too (its URI and id), so that two lakes
sharing a catalog and namespace never write, expire or drop each other's tables.
"""

from __future__ import annotations

from lakecleaner.names import table_name

#: The table property naming the topic a table follows.
TOPIC_PROPERTY = "lakecleaner.topic"
#: The table properties naming the lake that owns the table: its root URI and its id
#: (`_lakecleaner/lake-id`, `Lake.lake_id`).
LAKE_URI_PROPERTY = "lakecleaner.lake.uri"
LAKE_ID_PROPERTY = "lakecleaner.lake.id"


def table_identifier(namespace: str, topic: str, suffix: str = "") -> tuple[str, ...]:
    """The catalog identifier of `topic`'s table (`suffix`: `_latest` for its latest values): its
    namespace's levels, then its name."""
    return (*namespace.split("."), table_name(topic) + suffix)


__all__ = ["LAKE_ID_PROPERTY", "LAKE_URI_PROPERTY", "TOPIC_PROPERTY", "table_identifier", "table_name"]
