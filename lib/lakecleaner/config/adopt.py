"""`topics.<t>.adopt`: where a topic's records come from when Kafka Connect's S3 sink wrote them
(issue 49); the DAG's first task adopts what the sink wrote since its last run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lakecleaner.config.sections import check_keys
from lakecleaner.config.values import shown

#: The connector's default `tombstone.encoded.partition`.
TOMBSTONE_PARTITION = "tombstone"
#: How long a file must have been left alone before it is adopted, by default.
DEFAULT_SETTLE_MS = 5 * 60_000
_ADOPT_KEYS = {"connect"}
_CONNECT_KEYS = {
    "from",
    "format",
    "key_field",
    "timestamp_field",
    "settle_seconds",
    "tombstone_partition",
    "keep_originals",
    "deletes",
}
_FORMATS = ("parquet", "avro", "json")
#: What a change event that deletes (Debezium's `op: d`) becomes on a compacted topic: a tombstone
#: for its key, or the event kept as the value.
DELETES = ("tombstone", "keep")


@dataclass(frozen=True)
class ConnectSource:
    """Where the sink wrote a topic and how: the folder (`<bucket>/<topics.dir>/<topic>`), the
    value format to read (None: every format adoption reads), where keys and timestamps come from
    when not from the sink's sidecars and files (a dotted field of the value), how long a file is
    left alone before it is adopted, the tombstone folder's name, whether gc keeps the sink's
    files once adopted, and what a change event that deletes becomes on a compacted topic
    (`deletes`: a tombstone, or kept as the value; `connect_read.ChangeEvents`)."""

    uri: str
    format: str | None = None
    key_field: str | None = None
    timestamp_field: str | None = None
    settle_ms: int = DEFAULT_SETTLE_MS
    tombstone_partition: str = TOMBSTONE_PARTITION
    keep_originals: bool = False
    deletes: str = "tombstone"


def parse_adopt(raw: object, where: str, problems: list[str]) -> ConnectSource | None:
    """`adopt: {connect: {from, format, key_field, timestamp_field, settle_seconds,
    tombstone_partition, keep_originals, deletes}}`; None when absent."""
    if raw is None:
        return None
    section = check_keys(raw, _ADOPT_KEYS, where, problems)
    connect = check_keys(section.get("connect"), _CONNECT_KEYS, f"{where}.connect", problems)
    where = f"{where}.connect"
    uri = connect.get("from")
    if not isinstance(uri, str) or "://" not in uri:
        problems.append(
            f"{where}.from={shown(uri)}: must be the sink's folder of the topic, e.g. s3://bucket/topics/orders"
        )
        return None
    fmt = connect.get("format")
    if fmt is not None and fmt not in _FORMATS:
        problems.append(f"{where}.format={shown(fmt)}: must be one of {', '.join(_FORMATS)} (or left out: every one)")
    fields = {name: _optional_text(connect, name, where, problems) for name in ("key_field", "timestamp_field")}
    settle = connect.get("settle_seconds", DEFAULT_SETTLE_MS // 1000)
    if isinstance(settle, bool) or not isinstance(settle, int) or settle < 0:
        problems.append(f"{where}.settle_seconds={shown(settle)}: must be a whole number of seconds, 0 or more")
        settle = DEFAULT_SETTLE_MS // 1000
    tombstones = _optional_text(connect, "tombstone_partition", where, problems) or TOMBSTONE_PARTITION
    keep = connect.get("keep_originals", False)
    if not isinstance(keep, bool):
        problems.append(f"{where}.keep_originals={shown(keep)}: must be true or false")
        keep = False
    deletes = connect.get("deletes", DELETES[0])
    if deletes not in DELETES:
        problems.append(f"{where}.deletes={shown(deletes)}: must be one of {', '.join(DELETES)}")
        deletes = DELETES[0]
    return ConnectSource(
        uri, fmt, fields["key_field"], fields["timestamp_field"], settle * 1000, tombstones, keep, deletes
    )


def _optional_text(section: dict[str, Any], name: str, where: str, problems: list[str]) -> str | None:
    value = section.get(name)
    if value is not None and (not isinstance(value, str) or not value):
        problems.append(f"{where}.{name}={shown(value)}: must be a non-empty string")
        return None
    return value


__all__ = ["DEFAULT_SETTLE_MS", "DELETES", "TOMBSTONE_PARTITION", "ConnectSource", "parse_adopt"]
