"""The storage interface: one object store over s3:// and file:// (DESIGN section 3).

Keys are '/'-separated paths relative to the lake root. Data files are written once under
new names; the only objects ever replaced are small JSON documents (manifests, offsets),
and only by a conditional write: create-if-absent or replace-if-etag-matches.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import pyarrow.fs as pafs

from lakecleaner.config import StorageSettings
from lakecleaner.errors import ConcurrentModification, ConditionFailed, ObjectNotFound, StorageError

T = TypeVar("T")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ObjectInfo:
    """An object's key, size and modification time, and a tag that changes whenever the object is
    written again (a local file's inode, size and modification time; on S3, from `stat`, its ETag
    and the id of the write that stored it, `io.s3`: a single-part ETag alone is the MD5 of the
    bytes; a listing's tag is the ETag only, so compare tags from `stat` with tags from `stat`)."""

    key: str
    size: int
    mtime_ms: int
    version_tag: str = ""


@dataclass(frozen=True)
class UnfinishedWrite:
    """A write that started and never finished (its writer crashed), invisible to `list`: an S3
    multipart upload neither completed nor aborted, whose parts the bucket keeps and bills and
    which hold the records written so far, or a local temporary file never renamed over its
    object. `key` is the object it was writing, `started_ms` when it began, `handle` the
    backend's name for it (the upload id; the temporary file's name)."""

    key: str
    started_ms: int
    handle: str


class Transient(Exception):
    """Raised by a backend's classifier for an error worth retrying (never escapes the store)."""


@dataclass(frozen=True)
class RetryPolicy:
    """One policy for every retry (E4 of shared/STYLE.md): exponential backoff with full jitter
    (attempt n sleeps up to min(max, base × 2^n)), at most `max_attempts` attempts and, all pauses
    included, `timeout_s` seconds. Storage operations retry transient errors by
    `lake.storage.max_attempts` / `backoff_*_ms`; conditional writes that lose a race to another
    writer (a manifest commit, offsets, the cleaner state) by `lake.storage.commit_attempts`; both
    within `lake.storage.retry_timeout_ms`. Each retry is logged with what was retried."""

    max_attempts: int = 5
    base_delay_s: float = 0.1
    max_delay_s: float = 5.0
    timeout_s: float = 300.0

    @staticmethod
    def from_settings(settings: StorageSettings) -> RetryPolicy:
        """Transient storage errors."""
        return RetryPolicy(
            settings.max_attempts,
            settings.backoff_base_ms / 1000,
            settings.backoff_max_ms / 1000,
            settings.retry_timeout_ms / 1000,
        )

    @staticmethod
    def for_commits(settings: StorageSettings) -> RetryPolicy:
        """Lost races of conditional writes: short pauses (another writer just committed), many tries."""
        return RetryPolicy(settings.commit_attempts, 0.01, 0.5, settings.retry_timeout_ms / 1000)

    def delay(self, attempt: int) -> float:
        return random.uniform(0, min(self.max_delay_s, self.base_delay_s * (2 ** min(attempt, 30))))

    def next_delay(self, attempt: int, started: float) -> float | None:
        """The pause after the failed attempt `attempt` (0-based) of an operation that started at
        `started` (time.monotonic()), or None when its attempts or its time are spent."""
        if attempt + 1 >= self.max_attempts:
            return None
        pause = self.delay(attempt)
        return None if time.monotonic() - started + pause > self.timeout_s else pause


class ObjectStore(ABC):
    """Read, write, list, delete and conditionally write objects under one lake root."""

    def __init__(self, root_uri: str, retry: RetryPolicy, commit_retry: RetryPolicy | None = None) -> None:
        self.root_uri = root_uri.rstrip("/")
        self.retry_policy = retry
        #: How writers that lost a race for a conditional write retry (`RetryPolicy.for_commits`).
        self.commit_policy = commit_retry or RetryPolicy(50, 0.01, 0.5, retry.timeout_s)
        self._retries = 0
        self._retries_lock = threading.Lock()

    @property
    def retries(self) -> int:
        """How many times an operation of this store was retried after a transient error (run
        reports count the difference over a run)."""
        return self._retries

    def location(self, key: str) -> str:
        """The object's URI, for messages (never carries credentials)."""
        return f"{self.root_uri}/{key}"

    def error_location(self, key: str) -> str:
        """The object's URI and where the store is, for error messages (never credentials)."""
        return self.location(key)

    # -- retry ------------------------------------------------------------------------------
    def _retrying(self, operation: str, key: str, fn: Callable[[], T]) -> T:
        """Run `fn`, retrying transient errors by `retry_policy`; raise StorageError when its
        attempts or its time are spent."""
        started = time.monotonic()
        attempt = 0
        while True:
            try:
                return self._classified(operation, key, fn)
            except Transient as exc:
                pause = self.retry_policy.next_delay(attempt, started)
                if pause is None:
                    raise StorageError(
                        operation,
                        self.error_location(key),
                        f"still failing after {attempt + 1} attempts: {exc} ({time.monotonic() - started:.1f} s); "
                        "check that the storage endpoint is reachable",
                    ) from None
                with self._retries_lock:
                    self._retries += 1
                log.warning(
                    "%s %s failed (%s), attempt %d of %d; retrying",
                    operation,
                    self.location(key),
                    exc,
                    attempt + 1,
                    self.retry_policy.max_attempts,
                )
                time.sleep(pause)
                attempt += 1

    @abstractmethod
    def _classified(self, operation: str, key: str, fn: Callable[[], T]) -> T:
        """Run `fn`, translating backend errors: Transient (retry), ObjectNotFound,
        ConditionFailed or StorageError (permanent)."""

    # -- the interface ----------------------------------------------------------------------
    @abstractmethod
    def read(self, key: str) -> bytes: ...

    @abstractmethod
    def read_with_etag(self, key: str) -> tuple[bytes, str]:
        """The object's bytes and its etag, for a later `replace`."""

    @abstractmethod
    def write(self, key: str, data: bytes, *, synced: bool = True) -> None:
        """Write an object unconditionally (for new, never-reused names), durable when this returns;
        or, `synced=False`, an object that nothing references yet (a run's staged output, its
        scratch files) that may stay in the machine's buffers until `sync`, which the run calls
        before a commit names it: a local directory then makes each file durable with one fsync at
        the commit, not one per write inside the tasks (see `sync`)."""

    @abstractmethod
    def sync(self, key: str) -> None:
        """Make an object written with `synced=False` durable; a missing object is not an error
        (nothing to sync)."""

    @abstractmethod
    def create(self, key: str, data: bytes) -> str:
        """Write only if absent (If-None-Match: *); raise ConditionFailed if it exists. Returns the etag."""

    @abstractmethod
    def replace(self, key: str, data: bytes, etag: str) -> str:
        """Write only if the current etag is `etag` (If-Match); raise ConditionFailed otherwise."""

    def update(self, key: str, change: Callable[[bytes | None], bytes | None], *, what: str) -> bool:
        """Read the object (None when absent), and write `change(data)` with a conditional write:
        create-if-absent, or replace-if-the-etag-read-matches; retried by `commit_policy` when
        another writer got there first (then ConcurrentModification naming `what`). `change`
        returns None to write nothing. Returns whether it wrote."""
        started = time.monotonic()
        attempt = 0
        while True:
            try:
                data: bytes | None
                data, etag = self.read_with_etag(key)
            except ObjectNotFound:
                data, etag = None, None
            updated = change(data)
            if updated is None:
                return False
            try:
                if etag is None:
                    self.create(key, updated)
                else:
                    self.replace(key, updated, etag)
                return True
            except ConditionFailed:
                pause = self.commit_policy.next_delay(attempt, started)
                if pause is None:
                    raise ConcurrentModification(
                        f"{what}: lost {attempt + 1} races in a row to other writers; retry later"
                    ) from None
                log.info(
                    "%s: another writer changed %s first (attempt %d); retrying", what, self.location(key), attempt + 1
                )
                time.sleep(pause)
                attempt += 1

    @abstractmethod
    def list(self, prefix: str) -> list[ObjectInfo]:
        """Every object whose key starts with `prefix` (recursive), sorted by key."""

    @abstractmethod
    def list_unfinished(self, prefix: str) -> tuple[UnfinishedWrite, ...]:
        """Every unfinished write of an object whose key starts with `prefix`, sorted by key."""

    @abstractmethod
    def discard_unfinished(self, write: UnfinishedWrite) -> None:
        """Discard an unfinished write and what it stored (idempotent); the object it was writing,
        if one exists, is left as it is."""

    @abstractmethod
    def list_here(self, prefix: str) -> tuple[ObjectInfo, ...]:
        """The objects directly under `prefix` (which ends with "/"), not those in its folders,
        sorted by key: one delimited LIST per page of a thousand."""

    @abstractmethod
    def list_folders(self, prefix: str) -> tuple[str, ...]:
        """The names of the folders directly under `prefix` (which ends with "/"), sorted: one
        delimited LIST per page of a thousand, however many objects lie below them."""

    @abstractmethod
    def delete(self, key: str) -> None:
        """Delete an object; deleting a missing object is not an error (idempotent)."""

    def delete_many(self, keys: Sequence[str]) -> None:
        """Delete every object of `keys` (idempotent, as `delete`); a store that can deletes many in
        one request."""
        for key in keys:
            self.delete(key)

    def delete_unchanged(self, listed: Mapping[str, str]) -> tuple[str, ...]:
        """Delete each object of `listed` (key → the `version_tag` a listing gave it) only if it is
        still that object; the keys kept because they changed since (or are gone). A store without
        conditional deletes compares a fresh `stat` first; S3 sends If-Match with the DELETE where
        the store honours it (`io/s3`), leaving no window between the comparison and the delete."""
        changed: tuple[str, ...] = ()
        for key, tag in listed.items():
            now = self.stat_if_present(key)
            if now is None or now.version_tag != tag:
                changed += (key,)
            else:
                self.delete(key)
        return changed

    @abstractmethod
    def stat(self, key: str) -> ObjectInfo: ...

    def stat_if_present(self, key: str) -> ObjectInfo | None:
        """The object's `stat`, or None when there is no such object."""
        try:
            return self.stat(key)
        except ObjectNotFound:
            return None

    def exists(self, key: str) -> bool:
        return self.stat_if_present(key) is not None

    @property
    @abstractmethod
    def arrow_fs(self) -> pafs.FileSystem:
        """A pyarrow filesystem reaching the same objects (for column-projected Parquet reads)."""

    @abstractmethod
    def arrow_path(self, key: str) -> str:
        """The path of `key` in `arrow_fs`."""

    def versioning_enabled(self) -> bool:
        """Whether deletes keep old versions (S3 bucket versioning). Local directories: never."""
        return False


__all__ = [
    "ConditionFailed",
    "ObjectInfo",
    "ObjectNotFound",
    "ObjectStore",
    "RetryPolicy",
    "StorageError",
    "Transient",
    "UnfinishedWrite",
]
