"""Kafka's topic naming rule, enforced before a name reaches a storage path."""

from __future__ import annotations

import re

from lakecleaner.errors import InvalidTopicName

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


def validate_topic_name(name: object) -> str:
    """Return `name` if it is a legal Kafka topic name, else raise InvalidTopicName.

    Kafka's rule (org.apache.kafka.common.internals.Topic.validate): 1 to 249 characters
    from [a-zA-Z0-9._-], and not "." or "..".
    """
    return validate_identifier("topic name", name)


def validate_group_id(group: object) -> str:
    """Return `group` if it can name a consumer group's offsets file (the topic-name rule)."""
    return validate_identifier("consumer group id", group)


def validate_identifier(kind: str, name: object) -> str:
    """Apply the topic-name rule to `name`; the error names `kind`, the value and the rule."""
    if not isinstance(name, str) or name == "":
        raise InvalidTopicName(f"{kind} {name!r} is empty or not a string; use 1-249 characters from [a-zA-Z0-9._-]")
    if name in (".", ".."):
        raise InvalidTopicName(f"{kind} {name!r} is not allowed: '.' and '..' are reserved")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicName(
            f"{kind} {name[:20]!r}... is {len(name)} characters long; the maximum is {MAX_TOPIC_NAME_LENGTH}"
        )
    if not _LEGAL.match(name):
        bad = sorted({c for c in name if not _LEGAL.match(c)})
        raise InvalidTopicName(
            f"{kind} {name!r} contains illegal characters {''.join(bad)!r}; "
            "only ASCII letters, digits, '.', '_' and '-' are allowed"
        )
    return name


def validate_partition(partition: object) -> int:
    """Return `partition` if it is a non-negative int, else raise ValueError."""
    if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
        raise ValueError(f"partition {partition!r} must be a non-negative integer")
    return partition


def table_name(topic: str) -> str:
    """The Iceberg table name of `topic`: lowercased, `.` and `-` written `_` (`Orders.v1-eu` →
    `orders_v1_eu`), what Glue and Hive catalogs take. Two topics may map to one name
    (`orders.v1`, `orders_v1`): the config refuses them (`config.iceberg.colliding_tables`), and a
    sync refuses a table of another topic."""
    return re.sub(r"[.-]", "_", topic.lower())
