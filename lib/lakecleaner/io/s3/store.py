"""The s3:// backend: the ObjectStore over S3 (AWS S3, MinIO, SeaweedFS, any S3-compatible endpoint
that supports conditional writes, If-None-Match / If-Match on PutObject). Each PUT carries its
Content-MD5, which the store checks, and a write id that tells two writes of the same bytes apart.

Before the first write, a process probes that the store honours conditional writes
(`probe.py`) and refuses to write to one that does not.
"""

from __future__ import annotations

import base64
import hashlib
import uuid
from collections.abc import Mapping
from email.utils import parsedate_to_datetime

import botocore.exceptions as bexc

from lakecleaner.clock import epoch_ms
from lakecleaner.errors import UnsafeStore
from lakecleaner.io.base import ObjectInfo, UnfinishedWrite
from lakecleaner.io.concurrent import map_ordered
from lakecleaner.io.s3.deletes import S3Deletes
from lakecleaner.io.s3.probe import REFUSAL, conditional_deletes_honoured, conditional_writes_lacking

_CONDITION_HEADERS = {"IfNoneMatch": "If-None-Match", "IfMatch": "If-Match"}
#: User metadata every write of this store carries: a new id per PUT, so that an object's version
#: tag (`stat`) tells two writes apart even when their bytes, and so their MD5 ETags, are equal.
_WRITE_ID = "lakecleaner-write"


class S3Store(S3Deletes):
    """Objects under s3://bucket/prefix."""

    def read(self, key: str) -> bytes:
        return self.read_with_etag(key)[0]

    def read_with_etag(self, key: str) -> tuple[bytes, str]:
        def attempt() -> tuple[bytes, str]:
            response = self._signed("read", "GET", key)
            if response is not None:
                return response.content, str(response.headers["ETag"])
            resp = self._client.get_object(Bucket=self.bucket, Key=self._key(key))
            return resp["Body"].read(), resp["ETag"]

        return self._retrying("read", key, attempt)

    # -- refusing unsafe stores ---------------------------------------------------------------
    def ensure_conditional_writes(self) -> None:
        """Raise UnsafeStore when the store does not honour If-None-Match and If-Match (probed once
        per process and (endpoint, bucket), `probe.conditional_writes_lacking`)."""
        if not self.verify_conditional_writes:
            return
        lacks = conditional_writes_lacking(self.endpoint, self.bucket, self._put, self.delete)
        if lacks is not None:
            raise UnsafeStore("write", self.location(""), f"the object store at {self.endpoint} {lacks}: {REFUSAL}")

    def delete_unchanged(self, listed: Mapping[str, str]) -> tuple[str, ...]:
        """`ObjectStore.delete_unchanged` on S3: a DELETE with If-Match (the listing's ETag) per
        object, as many at once as lake.storage.max_concurrency, where the store honours it
        (`probe.conditional_deletes_honoured`); an object written again after the listing is kept.
        Where it does not, or with lake.storage.delete_all_versions (versions go by id), the
        listing the caller compared is the check (`delete_many`)."""
        if self._every_version or not conditional_deletes_honoured(
            self.endpoint, self.bucket, self._put, self._delete_if_match, self.delete
        ):
            self.delete_many(list(listed))
            return ()
        deleted = map_ordered(lambda item: self._delete_if_match(*item), list(listed.items()), self._max_concurrency)
        return tuple(key for key, done in zip(listed, deleted, strict=True) if not done)

    def _put(self, operation: str, key: str, data: bytes, **condition: str) -> str:
        """PutObject, with the store's retries, and If-None-Match / If-Match when given; the etag.
        Every write goes through here; only the probe calls it without `ensure_conditional_writes`."""

        write_id = uuid.uuid4().hex
        headers = {
            "Content-MD5": base64.b64encode(hashlib.md5(data).digest()).decode(),  # the store checks it
            f"x-amz-meta-{_WRITE_ID}": write_id,
        }
        headers.update({_CONDITION_HEADERS[name]: value for name, value in condition.items()})

        def attempt() -> str:
            response = self._signed(operation, "PUT", key, data, headers)
            if response is not None:
                return str(response.headers["ETag"])
            resp = self._client.put_object(
                Bucket=self.bucket,
                Key=self._key(key),
                Body=data,
                Metadata={_WRITE_ID: write_id},
                **condition,  # type: ignore[arg-type]
            )
            return resp["ETag"]

        return self._retrying(operation, key, attempt)

    def write(self, key: str, data: bytes, *, synced: bool = True) -> None:
        self.ensure_conditional_writes()
        self._put("write", key, data)

    def sync(self, key: str) -> None:
        """Nothing: an object store's PUT is durable when it returns."""

    def create(self, key: str, data: bytes) -> str:
        self.ensure_conditional_writes()
        return self._put("create", key, data, IfNoneMatch="*")

    def replace(self, key: str, data: bytes, etag: str) -> str:
        self.ensure_conditional_writes()
        return self._put("replace", key, data, IfMatch=etag)

    def _listed(self, prefix: str, delimiter: str = "") -> list[ObjectInfo]:
        """The objects a LIST of `prefix` returns (with the delimiter "/": only those directly
        under it)."""
        out: list[ObjectInfo] = []
        paginator = self._client.get_paginator("list_objects_v2")
        key = self._key(prefix)
        pages = (
            paginator.paginate(Bucket=self.bucket, Prefix=key, Delimiter=delimiter)
            if delimiter
            else paginator.paginate(Bucket=self.bucket, Prefix=key)
        )
        for page in pages:
            for obj in page.get("Contents", []):
                modified = epoch_ms(obj["LastModified"])
                out.append(ObjectInfo(self._lake_key(obj["Key"]), int(obj["Size"]), modified, obj.get("ETag", "")))
        return sorted(out, key=lambda o: o.key)

    def list(self, prefix: str) -> list[ObjectInfo]:
        return self._retrying("list", prefix, lambda: self._listed(prefix))

    def list_here(self, prefix: str) -> tuple[ObjectInfo, ...]:
        return self._retrying("list", prefix, lambda: tuple(self._listed(prefix, "/")))

    def list_unfinished(self, prefix: str) -> tuple[UnfinishedWrite, ...]:
        """The multipart uploads under `prefix` never completed nor aborted (pyarrow's output
        stream, which writes the large compacted files, uploads in parts)."""

        def attempt() -> tuple[UnfinishedWrite, ...]:
            out: list[UnfinishedWrite] = []
            paginator = self._client.get_paginator("list_multipart_uploads")
            for page in paginator.paginate(Bucket=self.bucket, Prefix=self._key(prefix)):
                for upload in page.get("Uploads", []):
                    out.append(
                        UnfinishedWrite(
                            self._lake_key(upload["Key"]), epoch_ms(upload["Initiated"]), upload["UploadId"]
                        )
                    )
            return tuple(sorted(out, key=lambda w: (w.key, w.handle)))

        return self._retrying("list unfinished uploads under", prefix, attempt)

    def discard_unfinished(self, write: UnfinishedWrite) -> None:
        def attempt() -> None:
            try:
                self._client.abort_multipart_upload(Bucket=self.bucket, Key=self._key(write.key), UploadId=write.handle)
            except bexc.ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "NoSuchUpload":
                    raise

        self._retrying("abort the unfinished upload of", write.key, attempt)

    def list_folders(self, prefix: str) -> tuple[str, ...]:
        def attempt() -> tuple[str, ...]:
            base = self._key(prefix)
            paginator = self._client.get_paginator("list_objects_v2")
            names: set[str] = set()
            for page in paginator.paginate(Bucket=self.bucket, Prefix=base, Delimiter="/"):
                names.update(p["Prefix"][len(base) :].rstrip("/") for p in page.get("CommonPrefixes", []))
            return tuple(sorted(n for n in names if n))

        return self._retrying("list", prefix, attempt)

    def stat(self, key: str) -> ObjectInfo:
        def attempt() -> ObjectInfo:
            response = self._signed("stat", "HEAD", key)
            if response is not None:
                headers = response.headers
                modified = epoch_ms(parsedate_to_datetime(headers["Last-Modified"]))
                tag = _version_tag(headers.get("ETag", ""), headers.get(f"x-amz-meta-{_WRITE_ID}"))
                return ObjectInfo(key, int(headers["Content-Length"]), modified, tag)
            resp = self._client.head_object(Bucket=self.bucket, Key=self._key(key))
            tag = _version_tag(resp.get("ETag", ""), resp.get("Metadata", {}).get(_WRITE_ID))
            return ObjectInfo(key, int(resp["ContentLength"]), epoch_ms(resp["LastModified"]), tag)

        return self._retrying("stat", key, attempt)

    def versioning_enabled(self) -> bool:
        def attempt() -> bool:
            status = self._client.get_bucket_versioning(Bucket=self.bucket).get("Status")
            return status in ("Enabled", "Suspended")

        return self._retrying("get versioning of", "", attempt)


def _version_tag(etag: str, write_id: str | None) -> str:
    """What tells one write of an object from another: its ETag, and the id this store's writes
    carry (a single-part ETag is the MD5 of the bytes, the same for a rewrite of the same bytes)."""
    return f"{etag};{write_id}" if write_id else etag
