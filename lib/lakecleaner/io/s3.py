"""The s3:// backend: boto3 for objects and conditional writes, pyarrow's S3FileSystem for
column-projected Parquet reads. Small-object reads (manifests, offsets, topic configs: the control
plane reads one per partition), HEADs and PUTs (a commit's checks and its conditional manifest
write) are requests signed with the client's own credentials and sent on its own connection pool,
without boto3's per-call machinery (a third of its CPU per request); their error replies mean
what boto3's do (one classification, `_reply_error`), and a redirect is left to boto3, which
follows S3's region redirects. Each PUT carries its Content-MD5, which the store checks.
Works with AWS S3, MinIO and any S3-compatible endpoint that supports conditional writes
(If-None-Match / If-Match on PutObject).

Before the first write, a process probes that the store honours conditional writes (a store that
ignores If-None-Match / If-Match would let concurrent writers overwrite each other's commits and
lose acknowledged data) and refuses to write to one that does not (`lake.storage.conditional_writes`).

For custom endpoints (MinIO, SeaweedFS, Ceph...) the SDKs' request checksums default to "when
required": the newer AWS SDKs otherwise upload with aws-chunked encoding and trailing checksums,
which some S3-compatible stores do not understand (they keep the chunk framing in the object, or
refuse the upload). boto3 takes the setting directly; pyarrow's AWS SDK reads it from the
environment variable AWS_REQUEST_CHECKSUM_CALCULATION, set (unless already set) before its
filesystem is made.

Credentials come from the config's storage section, else the standard AWS environment
variables and credential chain. They are never formatted into a message: every error is
built from the bucket, key, operation and the service's error code only.
"""

from __future__ import annotations

import base64
import hashlib
import os
import threading
import uuid
from collections.abc import Callable, Sequence
from email.utils import parsedate_to_datetime
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, TypeVar
from urllib.parse import quote
from xml.etree import ElementTree
from xml.sax.saxutils import escape

import boto3
import botocore.exceptions as bexc
import pyarrow.fs as pafs
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest, AWSResponse
from botocore.config import Config as BotoConfig

from lakecleaner.clock import epoch_ms
from lakecleaner.config import ENV_AWS_DEFAULT_REGION, ENV_AWS_REGION, StorageSettings
from lakecleaner.errors import ConditionFailed, NotSupported, ObjectNotFound, StorageError, UnsafeStore
from lakecleaner.io.base import ObjectInfo, ObjectStore, RetryPolicy, Transient, UnfinishedWrite
from lakecleaner.io.concurrent import map_ordered

if TYPE_CHECKING:
    from types_boto3_s3 import S3Client
    from types_boto3_s3.type_defs import ObjectIdentifierTypeDef
else:
    S3Client = Any

T = TypeVar("T")

_TRANSIENT_CODES = {
    "InternalError",
    "ServiceUnavailable",
    "SlowDown",
    "RequestTimeout",
    "RequestTimeTooSkewed",
    "Throttling",
    "ThrottlingException",
    "RequestLimitExceeded",
    "OperationAborted",
    "500",
    "502",
    "503",
    "504",
}
#: Replies of a store that does not implement the request (a 501 is not an outage to ride out).
_NOT_SUPPORTED_CODES = {"NotImplemented", "MethodNotAllowed"}
_CONDITION_HEADERS = {"IfNoneMatch": "If-None-Match", "IfMatch": "If-Match"}
#: User metadata every write of this store carries: a new id per PUT, so that an object's version
#: tag (`stat`) tells two writes apart even when their bytes, and so their MD5 ETags, are equal.
_WRITE_ID = "lakecleaner-write"
_S3_XMLNS = "http://s3.amazonaws.com/doc/2006-03-01/"
#: DeleteObjects takes at most a thousand keys.
_KEYS_PER_DELETE = 1000
#: An object of the lake, or one version of it: (key, version id; None for the current object).
_Version = tuple[str, str | None]
_NOT_FOUND_CODES = {"NoSuchKey", "404", "NotFound"}
_CONDITION_CODES = {"PreconditionFailed", "412", "ConditionalRequestConflict", "409"}
_HINTS = {
    "NoSuchBucket": "the bucket does not exist; create it or fix lake.uri",
    "AccessDenied": "access denied; check the credentials and the bucket policy",
    "InvalidAccessKeyId": "the access key is not known to the endpoint; check AWS_ACCESS_KEY_ID",
    "SignatureDoesNotMatch": "the secret key does not match; check AWS_SECRET_ACCESS_KEY",
}


ENV_CHECKSUM_CALCULATION = "AWS_REQUEST_CHECKSUM_CALCULATION"
#: (endpoint, bucket) → None when the store honours conditional writes, else what it lacks.
_PROBED: dict[tuple[str, str], str | None] = {}
_PROBE_LOCK = threading.Lock()


def _error_code_and_message(body: bytes) -> tuple[str, str | None]:
    """The Code and Message of an S3 error reply's XML (empty for a HEAD's bodiless reply)."""
    try:
        error = ElementTree.fromstring(body)
    except ElementTree.ParseError:
        return "", None
    return error.findtext("Code") or "", error.findtext("Message")


def split_s3_uri(uri: str) -> tuple[str, str]:
    """('bucket', 'prefix') from s3://bucket/prefix (prefix without slashes at the ends)."""
    rest = uri[len("s3://") :]
    bucket, _, prefix = rest.partition("/")
    if not bucket:
        raise StorageError("open", uri, "an s3:// URI needs a bucket: s3://bucket/prefix")
    return bucket, prefix.strip("/")


class S3Store(ObjectStore):
    """Objects under s3://bucket/prefix."""

    def __init__(self, uri: str, settings: StorageSettings, retry: RetryPolicy | None = None) -> None:
        super().__init__(uri, retry or RetryPolicy.from_settings(settings), RetryPolicy.for_commits(settings))
        self.bucket, self.prefix = split_s3_uri(uri)
        region = settings.region or os.environ.get(ENV_AWS_REGION) or os.environ.get(ENV_AWS_DEFAULT_REGION)
        region = region or "us-east-1"
        checksums: Literal["when_supported", "when_required"] = (
            "when_required"
            if settings.request_checksum_calculation == "when_required"
            or (settings.request_checksum_calculation is None and settings.endpoint_url)
            else "when_supported"
        )
        os.environ.setdefault(ENV_CHECKSUM_CALCULATION, checksums)
        self.endpoint = settings.endpoint_url or "AWS S3"
        self.verify_conditional_writes = settings.conditional_writes == "verify"
        self._client: S3Client = boto3.client(
            "s3",
            endpoint_url=settings.endpoint_url,
            region_name=region,
            aws_access_key_id=settings.access_key_id,
            aws_secret_access_key=settings.secret_access_key,
            aws_session_token=settings.session_token,
            config=BotoConfig(
                retries={"total_max_attempts": 1},
                s3={"addressing_style": "path"} if settings.endpoint_url else None,
                connect_timeout=10,
                read_timeout=60,
                max_pool_connections=settings.max_concurrency,
                request_checksum_calculation=checksums,
                response_checksum_validation="when_required",
            ),
        )
        self._region = region
        self._fs_args = self._arrow_fs_args(settings, region)
        self._fs: pafs.S3FileSystem | None = None
        self._bucket_url_base: str | None = None
        #: Whether the store takes DeleteObjects (until it answers that it does not).
        self._multi_delete = True
        self._max_concurrency = settings.max_concurrency
        self._every_version = settings.delete_all_versions

    @staticmethod
    def _arrow_fs_args(settings: StorageSettings, region: str) -> dict[str, Any]:
        fs_args: dict[str, Any] = {"region": region}
        if settings.endpoint_url:
            scheme, _, host = settings.endpoint_url.partition("://")
            fs_args.update(endpoint_override=host.rstrip("/"), scheme=scheme)
        if settings.access_key_id and settings.secret_access_key:
            fs_args.update(access_key=settings.access_key_id, secret_key=settings.secret_access_key)
            if settings.session_token:
                fs_args["session_token"] = settings.session_token
        # Parquet reads go through pyarrow's S3 client: the same attempts and timeouts as boto3's.
        fs_args.update(
            retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=settings.max_attempts),
            connect_timeout=10,
            request_timeout=60,
        )
        return fs_args

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _lake_key(self, bucket_key: str) -> str:
        """The inverse of `_key`: a bucket's key as the lake names it."""
        return bucket_key[len(self.prefix) + 1 :] if self.prefix else bucket_key

    def _classified(self, operation: str, key: str, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except bexc.ClientError as exc:
            err = exc.response.get("Error", {})
            status = str(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))
            raise self._reply_error(operation, key, str(err.get("Code", "")), status, err.get("Message")) from None
        except (
            bexc.EndpointConnectionError,
            bexc.ConnectionClosedError,
            bexc.ReadTimeoutError,
            bexc.ConnectTimeoutError,
            bexc.ResponseStreamingError,
        ) as exc:
            raise Transient(type(exc).__name__) from None
        except (bexc.NoCredentialsError, bexc.PartialCredentialsError):
            raise StorageError(
                operation,
                self.location(key),
                "no credentials found; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or lake.storage",
            ) from None

    def _reply_error(self, operation: str, key: str, code: str, status: str, message: str | None) -> Exception:
        """What an error reply of the store means: ObjectNotFound, ConditionFailed, NotSupported,
        Transient (to retry) or StorageError (permanent), from its error code and HTTP status."""
        if code in _NOT_FOUND_CODES or (status == "404" and code != "NoSuchBucket"):
            return ObjectNotFound(operation, self.location(key), "no such object")
        if code in _CONDITION_CODES or status in ("412", "409"):
            return ConditionFailed(operation, self.location(key), f"condition not met ({code or status})")
        if code in _NOT_SUPPORTED_CODES or status in ("501", "405"):
            return NotSupported(operation, self.location(key), f"{code or status}: {message or 'not implemented'}")
        if code in _TRANSIENT_CODES or status.startswith("5") or status == "429":
            return Transient(f"{code or status}")
        reason = _HINTS.get(code, f"{code or status}: {message or 'request failed'}")
        return StorageError(operation, self.location(key), reason)

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

    def _signed(
        self,
        operation: str,
        method: str,
        key: str,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
        url: str | None = None,
    ) -> AWSResponse | None:
        """One request on an object, signed with the client's credentials (SigV4) and sent on the
        client's own connection pool: the reply when it is a success (2xx); an error reply raises
        what `_reply_error` makes of its code and status, as boto3's would. None for a redirect
        (boto3 follows S3's region redirects) and when the client's credentials or pool cannot be
        reached, so that boto3 makes the request. `url`: another URL than the object's (`key` then
        only names the request in errors)."""
        credentials = getattr(getattr(self._client, "_request_signer", None), "_credentials", None)
        http = getattr(getattr(self._client, "_endpoint", None), "http_session", None)
        if credentials is None or http is None:
            return None
        request = AWSRequest(method=method, url=url or self._object_url(key), data=body, headers=headers or {})
        S3SigV4Auth(credentials.get_frozen_credentials(), "s3", self._region).add_auth(request)
        response: AWSResponse = http.send(request.prepare())
        status = response.status_code
        if 200 <= status < 300:
            return response
        if 300 <= status < 400:
            return None
        code, message = _error_code_and_message(response.content)
        raise self._reply_error(operation, key, code, str(status), message)

    def _object_url(self, key: str) -> str:
        """The object's URL: the bucket's and the key."""
        return self._bucket_url() + quote(self._key(key), safe="/~")

    def _bucket_url(self) -> str:
        """The bucket's URL, ending with "/", in the addressing style botocore chose (path-style for
        a custom endpoint, virtual-hosted on AWS): taken once from a presigned URL of a placeholder
        key."""
        if self._bucket_url_base is None:
            placeholder = self._client.generate_presigned_url("get_object", Params={"Bucket": self.bucket, "Key": "k"})
            self._bucket_url_base = placeholder.split("?", 1)[0][: -len("k")]
        return self._bucket_url_base

    # -- refusing unsafe stores ---------------------------------------------------------------
    def ensure_conditional_writes(self) -> None:
        """Probe once per process and (endpoint, bucket) that the store honours If-None-Match and
        If-Match, on a scratch key under the lake's prefix; raise UnsafeStore when it does not."""
        if not self.verify_conditional_writes:
            return
        with _PROBE_LOCK:
            where = (self.endpoint, self.bucket)
            if where not in _PROBED:
                _PROBED[where] = self._probe()
            lacks = _PROBED[where]
        if lacks is not None:
            raise UnsafeStore(
                "write",
                self.location(""),
                f"the object store at {self.endpoint} {lacks}: concurrent writers would overwrite each other's "
                "commits and lose acknowledged data, so lakecleaner writes nothing there. Use a store with "
                "conditional writes (AWS S3, MinIO, SeaweedFS, Ceph RGW), or set lake.storage.conditional_writes: "
                "trust only if a single process ever writes to this lake",
            )

    def _probe(self) -> str | None:
        key = f"_lakecleaner/probe/{uuid.uuid4().hex}"
        try:
            etag = self._put("create", key, b"1", IfNoneMatch="*")
            try:
                self._put("create", key, b"2", IfNoneMatch="*")
                return "ignores If-None-Match (a create over an existing object succeeded)"
            except ConditionFailed:
                pass
            try:
                self._put("replace", key, b"3", IfMatch=f'"{uuid.uuid4().hex}"')
                return "ignores If-Match (a replace with a stale etag succeeded)"
            except ConditionFailed:
                pass
            self._put("replace", key, b"4", IfMatch=etag)
            return None
        except ConditionFailed:
            return "refused a conditional write it should have accepted"
        except NotSupported:
            return "does not implement conditional writes"
        finally:
            self.delete(key)

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

    def write(self, key: str, data: bytes) -> None:
        self.ensure_conditional_writes()
        self._put("write", key, data)

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

    def delete(self, key: str) -> None:
        """DELETE the object (a lean signed request, as reads and writes are); an object already
        gone is deleted. With lake.storage.delete_all_versions, every version of it
        (`delete_many`)."""
        if self._every_version:
            self.delete_many([key])
        else:
            self._delete_current(key)

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
                    raise StorageError("delete", self.location(key), f"{code}: {message or 'not deleted'}")
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
            errors = _delete_errors(response.content)
        refused: tuple[tuple[str, str, str | None], ...] = ()
        for bucket_key, code, message in errors:
            if not bucket_key:  # not an answer about keys: the store does not take DeleteObjects
                raise NotSupported("delete", self.location(first), message or "DeleteObjects failed")
            key = self._lake_key(bucket_key)
            if code in _TRANSIENT_CODES:
                raise Transient(f"{code} deleting {self.location(key)}")
            refused += ((key, code, message),)
        return refused

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

    @property
    def arrow_fs(self) -> pafs.FileSystem:
        """pyarrow's S3 client, made at first use (a store that only reads metadata never needs it)."""
        if self._fs is None:
            self._fs = pafs.S3FileSystem(**self._fs_args)
        return self._fs

    def arrow_path(self, key: str) -> str:
        return f"{self.bucket}/{self._key(key)}"

    def versioning_enabled(self) -> bool:
        def attempt() -> bool:
            status = self._client.get_bucket_versioning(Bucket=self.bucket).get("Status")
            return status in ("Enabled", "Suspended")

        return self._retrying("get versioning of", "", attempt)


def _delete_errors(body: bytes) -> list[tuple[str, str, str | None]]:
    """(key, code, message) of each <Error> of a DeleteObjects reply; a reply that is not XML is one
    error without a key."""
    try:
        reply = ElementTree.fromstring(body)
    except ElementTree.ParseError:
        return [("", "", "the store's reply to DeleteObjects is not XML")]
    out = []
    for element in reply.iter():
        if element.tag.rpartition("}")[2] == "Error":
            fields = {child.tag.rpartition("}")[2]: child.text for child in element}
            out.append((fields.get("Key") or "", fields.get("Code") or "", fields.get("Message")))
    return out


def _version_tag(etag: str, write_id: str | None) -> str:
    """What tells one write of an object from another: its ETag, and the id this store's writes
    carry (a single-part ETag is the MD5 of the bytes, the same for a rewrite of the same bytes)."""
    return f"{etag};{write_id}" if write_id else etag
