"""The s3:// backend's connection: boto3 for the operations it does well (listings, multipart
uploads, versions), pyarrow's S3FileSystem for column-projected Parquet reads, and lean requests.

Small-object reads (manifests, offsets, topic configs: the control plane reads one per
partition), HEADs and PUTs (a commit's checks and its conditional manifest write) are requests
signed with the client's own credentials and sent on its own connection pool, without boto3's
per-call machinery (a third of its CPU per request); their error replies mean what boto3's do
(one classification, `replies.reply_error`), and a redirect is left to boto3, which follows S3's
region redirects.

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

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TypeVar
from urllib.parse import quote

import boto3
import botocore.exceptions as bexc
import pyarrow.fs as pafs
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest, AWSResponse
from botocore.config import Config as BotoConfig

from lakecleaner.config import ENV_AWS_DEFAULT_REGION, ENV_AWS_REGION, StorageSettings
from lakecleaner.errors import StorageError
from lakecleaner.io.base import ObjectStore, RetryPolicy, Transient
from lakecleaner.io.s3.replies import error_code_and_message, reply_error

if TYPE_CHECKING:
    from types_boto3_s3 import S3Client
else:
    S3Client = Any

T = TypeVar("T")

ENV_CHECKSUM_CALCULATION = "AWS_REQUEST_CHECKSUM_CALCULATION"


def split_s3_uri(uri: str) -> tuple[str, str]:
    """('bucket', 'prefix') from s3://bucket/prefix (prefix without slashes at the ends)."""
    rest = uri[len("s3://") :]
    bucket, _, prefix = rest.partition("/")
    if not bucket:
        raise StorageError("open", uri, "an s3:// URI needs a bucket: s3://bucket/prefix")
    return bucket, prefix.strip("/")


class S3Connection(ObjectStore):
    """A connection to s3://bucket/prefix: the boto3 client (its region, checksums, pool), the
    lake's keys as the bucket's, pyarrow's filesystem, and lean requests signed with the client's
    own credentials. The store's operations are its subclasses' (`S3Deletes`, `S3Store`)."""

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

    def error_location(self, key: str) -> str:
        """The object's URI and the endpoint that answered (AWS S3, or the lake's endpoint_url)."""
        return f"{self.location(key)} (endpoint {self.endpoint})"

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
            raise reply_error(
                operation, self.error_location(key), str(err.get("Code", "")), status, err.get("Message")
            ) from None
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
                self.error_location(key),
                "no credentials found; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or lake.storage",
            ) from None

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
        code, message = error_code_and_message(response.content)
        raise reply_error(operation, self.error_location(key), code, str(status), message)

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

    @property
    def arrow_fs(self) -> pafs.FileSystem:
        """pyarrow's S3 client, made at first use (a store that only reads metadata never needs it)."""
        if self._fs is None:
            self._fs = pafs.S3FileSystem(**self._fs_args)
        return self._fs

    def arrow_path(self, key: str) -> str:
        return f"{self.bucket}/{self._key(key)}"
