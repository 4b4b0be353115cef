"""Refusing a store that ignores conditional writes.

A store that ignores If-None-Match / If-Match would let concurrent writers overwrite each other's
commits and lose acknowledged data. Before its first write, a process probes once per (endpoint,
bucket), on a scratch key under the lake's prefix, that the store honours both, and refuses to
write to one that does not (`lake.storage.conditional_writes`).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable

from lakecleaner.errors import ConditionFailed, LakeCleanerError, NotSupported

log = logging.getLogger(__name__)

#: (endpoint, bucket) → None when the store honours conditional writes, else what it lacks.
_PROBED: dict[tuple[str, str], str | None] = {}
_PROBE_LOCK = threading.Lock()

#: A conditional PUT: (operation, key, bytes, If-None-Match / If-Match) → the new etag.
Put = Callable[..., str]

REFUSAL = (
    "concurrent writers would overwrite each other's commits and lose acknowledged data, so lakecleaner "
    "writes nothing there. Use a store with conditional writes (AWS S3, MinIO, SeaweedFS, Ceph RGW), or set "
    "lake.storage.conditional_writes: trust only if a single process ever writes to this lake"
)


def conditional_writes_lacking(endpoint: str, bucket: str, put: Put, delete: Callable[[str], None]) -> str | None:
    """What the store at (endpoint, bucket) lacks of conditional writes, probed once per process
    (None: it honours them)."""
    with _PROBE_LOCK:
        where = (endpoint, bucket)
        if where not in _PROBED:
            _PROBED[where] = probe(put, delete)
        return _PROBED[where]


def probe(put: Put, delete: Callable[[str], None]) -> str | None:
    """Create a scratch object, then try a create over it, a replace with a stale etag and one with
    the right etag; None when the store refused the first two and took the third, else what it
    lacks. The scratch object is deleted whatever happened; a failure to delete it is a warning,
    never in place of what the probe found or the error that stopped it (a store that refuses the
    first write, say, is reported as that)."""
    key = f"_lakecleaner/probe/{uuid.uuid4().hex}"
    try:
        return _probe_writes(put, key)
    finally:
        try:
            delete(key)
        except LakeCleanerError as exc:
            log.warning("could not delete the probe's scratch object %s: %s", key, exc)


def _probe_writes(put: Put, key: str) -> str | None:
    try:
        etag = put("create", key, b"1", IfNoneMatch="*")
        try:
            put("create", key, b"2", IfNoneMatch="*")
            return "ignores If-None-Match (a create over an existing object succeeded)"
        except ConditionFailed:
            pass
        try:
            put("replace", key, b"3", IfMatch=f'"{uuid.uuid4().hex}"')
            return "ignores If-Match (a replace with a stale etag succeeded)"
        except ConditionFailed:
            pass
        put("replace", key, b"4", IfMatch=etag)
        return None
    except ConditionFailed:
        return "refused a conditional write it should have accepted"
    except NotSupported:
        return "does not implement conditional writes"


__all__ = ["REFUSAL", "conditional_writes_lacking", "probe"]
