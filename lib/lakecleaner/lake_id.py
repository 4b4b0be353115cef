"""The lake's id (issue 77): 32 hex digits in `_lakecleaner/lake-id`, made by the first process that
asks (a conditional create, so two racing processes agree on one) and never changed. What a lake
leaves outside its own root records it (an Iceberg table's `lakecleaner.lake.id`), so that a lake
never takes another's table for its own, nor a lake deleted and made again under the same URI
for itself."""

from __future__ import annotations

import re
import uuid

from lakecleaner.errors import ConditionFailed, LakeCleanerError, ObjectNotFound
from lakecleaner.io import ObjectStore

LAKE_ID_KEY = "_lakecleaner/lake-id"
_ID = re.compile(r"[0-9a-f]{32}")


def stored_lake_id(store: ObjectStore) -> str | None:
    """The lake's id as stored, None when it has none yet (nothing is written: for readers); a
    stored object that is no id is an error naming it."""
    try:
        return _checked(store, store.read(LAKE_ID_KEY))
    except ObjectNotFound:
        return None


def lake_id_of(store: ObjectStore) -> str:
    """The lake's id, made now when it has none; a stored object that is no id is an error naming
    it (never replaced: what records the id would no longer know the lake)."""
    stored = stored_lake_id(store)
    if stored is not None:
        return stored
    made = uuid.uuid4().hex
    try:
        store.create(LAKE_ID_KEY, made.encode())
    except ConditionFailed:  # another process made it first: its id is the lake's
        return _checked(store, store.read(LAKE_ID_KEY))
    return made


def _checked(store: ObjectStore, data: bytes) -> str:
    text = data.decode("ascii", errors="replace").strip()
    if not _ID.fullmatch(text):
        raise LakeCleanerError(
            f"{store.location(LAKE_ID_KEY)} is no lake id (32 hex digits): restore it from a backup, or from the "
            "`lakecleaner.lake.id` property of one of the lake's Iceberg tables"
        )
    return text


__all__ = ["LAKE_ID_KEY", "lake_id_of", "stored_lake_id"]
