"""Storage: one object-store interface over s3:// and file:// lake roots.

The S3 store (boto3, some 0.7 s to import) is imported when a lake on S3 is opened, so the
commands on a local lake start without it."""

from __future__ import annotations

from pathlib import Path

from lakecleaner.config import StorageSettings
from lakecleaner.errors import StorageError
from lakecleaner.io.base import ObjectInfo, ObjectStore, RetryPolicy, UnfinishedWrite
from lakecleaner.io.local import LocalStore


def open_store(uri: str, settings: StorageSettings | None = None) -> ObjectStore:
    """The object store for a lake URI: s3://bucket/prefix or file:///path (file://./rel is relative)."""
    settings = settings or StorageSettings()
    if uri.startswith("s3://"):
        from lakecleaner.io.s3 import S3Store

        return S3Store(uri, settings)
    if uri.startswith("file://"):  # the folder is made by the first write: reading leaves no trace
        root = Path(uri[len("file://") :])
        return LocalStore(root, RetryPolicy.from_settings(settings), RetryPolicy.for_commits(settings))
    raise StorageError("open", uri, "unsupported lake URI; use s3://bucket/prefix or file:///path")


__all__ = ["LocalStore", "ObjectInfo", "ObjectStore", "RetryPolicy", "UnfinishedWrite", "open_store"]
