"""Refusing a store that ignores conditional writes; finding whether it honours conditional deletes.

A store that ignores If-None-Match / If-Match would let concurrent writers overwrite each other's
commits and lose acknowledged data. Before its first write, a process probes once per (endpoint,
bucket), on a scratch key under the lake's prefix, that the store honours both, and refuses to
write to one that does not (`lake.storage.conditional_writes`).

If-Match on DeleteObject (AWS S3 since 2025, SeaweedFS, moto) lets gc delete another system's
object only if it is still the object it compared (`ObjectStore.delete_unchanged`). Stores that
lack it are not refused (a listing compared just before is the check there); the first
conditional delete of a process probes once per (endpoint, bucket) which kind the store is.
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
#: (endpoint, bucket) → whether the store honours If-Match on DeleteObject.
_DELETES_PROBED: dict[tuple[str, str], bool] = {}

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


def conditional_deletes_honoured(
    endpoint: str, bucket: str, put: Put, delete_if: Callable[[str, str], bool], delete: Callable[[str], None]
) -> bool:
    """Whether the store at (endpoint, bucket) honours If-Match on DeleteObject, probed once per
    process: a scratch object is deleted with a stale ETag (refused: it honours it) and then with
    its own (deleted). A store that deletes it with the stale one, or answers the header with an
    error, does not."""
    with _PROBE_LOCK:
        where = (endpoint, bucket)
        if where not in _DELETES_PROBED:
            _DELETES_PROBED[where] = _probe_deletes(put, delete_if, delete)
        return _DELETES_PROBED[where]


def _probe_deletes(put: Put, delete_if: Callable[[str, str], bool], delete: Callable[[str], None]) -> bool:
    key = f"_lakecleaner/probe/{uuid.uuid4().hex}"
    try:
        etag = put("create", key, b"1", IfNoneMatch="*")
        return not delete_if(key, f'"{uuid.uuid4().hex}"') and delete_if(key, etag)
    except LakeCleanerError as exc:  # NotSupported, or an error reply to the header
        log.info("the object store does not take If-Match on DeleteObject (%s): gc compares a listing", exc)
        return False
    finally:
        try:
            delete(key)
        except LakeCleanerError as exc:
            log.warning("could not delete the probe's scratch object %s: %s", key, exc)


__all__ = ["REFUSAL", "conditional_deletes_honoured", "conditional_writes_lacking", "probe"]
