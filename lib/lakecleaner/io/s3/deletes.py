"""Deleting from an S3 store: one object, many with DeleteObjects (a thousand keys to a request,
a DELETE each where the store has none), and with lake.storage.delete_all_versions every version
and delete marker of each key (a versioned bucket keeps a deleted object's bytes)."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any
from xml.sax.saxutils import escape

from lakecleaner.errors import ConditionFailed, NotSupported, ObjectNotFound, StorageError
from lakecleaner.io.base import Transient
from lakecleaner.io.concurrent import map_ordered
from lakecleaner.io.s3.connection import S3Connection
from lakecleaner.io.s3.replies import TRANSIENT_CODES, delete_errors

if TYPE_CHECKING:
    from types_boto3_s3.type_defs import ObjectIdentifierTypeDef

_S3_XMLNS = "http://s3.amazonaws.com/doc/2006-03-01/"
#: DeleteObjects takes at most a thousand keys.
_KEYS_PER_DELETE = 1000
#: An object of the lake, or one version of it: (key, version id; None for the current object).
_Version = tuple[str, str | None]


class S3Deletes(S3Connection):
    """The deletes of an S3 store."""

    def delete(self, key: str) -> None:
        """DELETE the object (a lean signed request, as reads and writes are); an object already
        gone is deleted. With lake.storage.delete_all_versions, every version of it
        (`delete_many`)."""
        if self._every_version:
            self.delete_many([key])
        else:
            self._delete_current(key)

    def _delete_if_match(self, key: str, etag: str) -> bool:
        """DELETE the object only if its ETag is still `etag` (If-Match): whether it was deleted
        (False: it was written again, or is gone)."""

        def attempt() -> None:
            if self._signed("delete", "DELETE", key, headers={"If-Match": etag}) is None:
                self._client.delete_object(Bucket=self.bucket, Key=self._key(key), IfMatch=etag)

        try:
            self._retrying("delete", key, attempt)
        except (ConditionFailed, ObjectNotFound):
            return False
        return True

    def _delete_current(self, key: str) -> None:
        """DELETE the object's current version (on a versioned bucket: a delete marker over it)."""

        def attempt() -> None:
            try:
                if self._signed("delete", "DELETE", key) is not None:
                    return
            except ObjectNotFound:
                return
            self._client.delete_object(Bucket=self.bucket, Key=self._key(key))

        self._retrying("delete", key, attempt)

    def delete_many(self, keys: Sequence[str]) -> None:
        """Delete the objects with S3's DeleteObjects, a thousand keys to a request (quiet: the reply
        names only the keys it could not delete, and the first of them raises, naming it). A store
        that answers it does not implement DeleteObjects gets a DELETE per key from then on, as many
        at once as lake.storage.max_concurrency. Any other failure (an outage that outlasted the
        retries) raises: the store still takes DeleteObjects once it is back.

        With lake.storage.delete_all_versions every version and delete marker of each key goes (a
        versioned bucket keeps a deleted object's bytes as an old version), whoever deletes it: gc,
        a compaction discarding what it staged or spilled, an append discarding what it wrote. The
        versions are found by one listing of each folder that holds several of the keys
        (ListObjectVersions, a thousand versions to a request; a key alone in its folder is listed
        by itself) and deleted as above, naming each version — not a listing and a DELETE per
        version."""
        items = self._versions_of(keys) if self._every_version else [(key, None) for key in keys]
        self._delete_versions(items)

    def _versions_of(self, keys: Sequence[str]) -> Sequence[_Version]:
        """Each version (and delete marker) of `keys`, by its version id, listed by the prefixes they
        lie under: the folder of several keys, a key alone in its folder (or at the root) itself. A
        prefix under another listed one is not listed again: its versions would come twice."""
        wanted = {self._key(k) for k in keys}
        by_folder: dict[str, list[str]] = {}
        for key in keys:
            by_folder.setdefault(key.rpartition("/")[0] + "/" if "/" in key else "", []).append(key)
        prefixes = {p for f, inside in by_folder.items() for p in (inside if not f or len(inside) == 1 else [f])}
        listing = sorted(p for p in prefixes if not any(p != o and p.startswith(o) for o in prefixes))  # once each

        def listed(prefix: str) -> Sequence[_Version]:
            def attempt() -> Sequence[_Version]:
                paginator = self._client.get_paginator("list_object_versions")
                return [
                    (self._lake_key(v["Key"]), v["VersionId"])
                    for page in paginator.paginate(Bucket=self.bucket, Prefix=self._key(prefix))
                    for v in [*page.get("Versions", []), *page.get("DeleteMarkers", [])]
                    if v["Key"] in wanted
                ]

            return self._retrying("list versions of", prefix, attempt)

        return [v for found in map_ordered(listed, listing, self._max_concurrency) for v in found]

    def _delete_versions(self, items: Sequence[_Version]) -> None:
        for start in range(0, len(items), _KEYS_PER_DELETE):
            self._delete_chunk(items[start : start + _KEYS_PER_DELETE])

    def _delete_chunk(self, chunk: Sequence[_Version]) -> None:
        """Up to a thousand objects (or versions): one DeleteObjects, or a DELETE each where the
        store has none."""
        if self._multi_delete:
            try:
                refused = self._retrying("delete", chunk[0][0], partial(self._delete_objects, chunk))
            except NotSupported:
                self._multi_delete = False
            else:
                if refused:
                    key, code, message = refused[0]
                    raise StorageError("delete", self.error_location(key), f"{code}: {message or 'not deleted'}")
                return
        map_ordered(self._delete_one, chunk, self._max_concurrency)

    def _delete_one(self, item: _Version) -> None:
        """DELETE one object, or one version of it."""
        key, version = item
        if version is None:
            self._delete_current(key)
            return

        def attempt() -> None:
            self._client.delete_object(Bucket=self.bucket, Key=self._key(key), VersionId=version)

        self._retrying("delete a version of", key, attempt)

    def _delete_objects(self, items: Sequence[_Version]) -> tuple[tuple[str, str, str | None], ...]:
        """One DeleteObjects request: the (key, code, message) of each object (or version) the store
        would not delete. One it could not delete for now raises Transient (the request is made
        again); a reply that is not about keys raises NotSupported."""
        objects = "".join(
            f"<Object><Key>{escape(self._key(k))}</Key>"
            + ("" if v is None else f"<VersionId>{escape(v)}</VersionId>")
            + "</Object>"
            for k, v in items
        )
        body = f'<Delete xmlns="{_S3_XMLNS}"><Quiet>true</Quiet>{objects}</Delete>'.encode()
        headers = {"Content-MD5": base64.b64encode(hashlib.md5(body, usedforsecurity=False).digest()).decode()}
        first = items[0][0]
        response = self._signed("delete", "POST", first, body, headers, url=self._bucket_url() + "?delete")
        if response is None:
            named: list[ObjectIdentifierTypeDef] = [
                {"Key": self._key(k), "VersionId": v} if v is not None else {"Key": self._key(k)} for k, v in items
            ]
            reply: dict[str, Any] = dict(
                self._client.delete_objects(Bucket=self.bucket, Delete={"Objects": named, "Quiet": True})
            )
            errors = [(e.get("Key", ""), e.get("Code", ""), e.get("Message")) for e in reply.get("Errors", [])]
        else:
            errors = delete_errors(response.content)
        refused: tuple[tuple[str, str, str | None], ...] = ()
        for bucket_key, code, message in errors:
            if not bucket_key:  # not an answer about keys: the store does not take DeleteObjects
                raise NotSupported("delete", self.error_location(first), message or "DeleteObjects failed")
            key = self._lake_key(bucket_key)
            if code in TRANSIENT_CODES:
                raise Transient(f"{code} deleting {self.location(key)}")
            refused += ((key, code, message),)
        return refused
