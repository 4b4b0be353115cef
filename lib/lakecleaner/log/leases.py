"""Run leases: a running compaction's claim on the files it has written but not yet committed.

A compaction writes its output files under `segments/` with new names; until its manifest commit
references them they are unreferenced, exactly like the orphans a crashed run leaves. Age alone
cannot tell the two apart (a long run, a gc host whose clock runs ahead, or `gc --now` in the
future would delete a live run's files, and the run would then commit files that no longer exist).
So a run holds a lease per partition, `_staging/<run id>.lease` (JSON: run id, expiry in wall-clock
epoch ms, host, pid), renewed by a background thread every third of LEASE_TTL_MS and deleted when
the run ends. Physical deletion leaves a partition's orphans alone while any lease on it is live by
the wall clock of the gc host (never by a `--now` given for decisions); a crashed run's lease expires
LEASE_TTL_MS after its last renewal.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from types import TracebackType

from lakecleaner.clock import wall_clock_ms
from lakecleaner.errors import ObjectNotFound, StorageError
from lakecleaner.io import ObjectInfo, ObjectStore
from lakecleaner.io.concurrent import map_ordered

LEASE_TTL_MS = 10 * 60_000
#: How far a lease's writer's clock may run ahead of the store's before an expiry counts as damage.
LEASE_CLOCK_SKEW_MS = 60_000
LEASE_SUFFIX = ".lease"
#: The folder of a partition where runs keep their leases and scratch files (gc leaves it alone
#: while a lease is live).
STAGING = "_staging/"
log = logging.getLogger(__name__)


def lease_key(partition_prefix: str, run_id: str) -> str:
    return f"{partition_prefix}{STAGING}{run_id}{LEASE_SUFFIX}"


@dataclass(frozen=True)
class Lease:
    run_id: str
    expires_ms: int
    holder: str


def live_leases(store: ObjectStore, lease_objects: Iterable[ObjectInfo], wall_now_ms: int | None = None) -> list[Lease]:
    """Those of a partition's lease objects (as listed) that have not expired by the wall clock
    (`lease_expiry`)."""
    now = wall_clock_ms() if wall_now_ms is None else wall_now_ms
    live = []
    for obj in lease_objects:
        try:
            lease = lease_expiry(obj, store.read(obj.key))
        except ObjectNotFound:
            continue  # the run ended meanwhile
        if lease.expires_ms > now:
            live.append(lease)
    return live


def leases_on(store: ObjectStore, prefix: str) -> list[Lease]:
    """The live leases held on `prefix` (a partition's folder, or a table's): its `_staging/`
    lease objects, listed, that have not expired (`live_leases`)."""
    listed = [obj for obj in store.list(prefix + STAGING) if obj.key.endswith(LEASE_SUFFIX)]
    return live_leases(store, listed)


def lease_expiry(obj: ObjectInfo, body: bytes) -> Lease:
    """The lease a lease object holds. A lease is renewed every third of LEASE_TTL_MS, so it never
    ends further than LEASE_TTL_MS (and a little clock skew, LEASE_CLOCK_SKEW_MS) after it was
    last written: a lease that cannot be parsed, or whose expiry lies further ahead than that, is
    damage and counts as live until its object is LEASE_TTL_MS old — a claim is never ignored on a
    guess, and never holds for ever either (an expiry in the year 5138 would block orphan deletion
    and repair for good)."""
    fallback = obj.mtime_ms + LEASE_TTL_MS
    name = obj.key.rsplit("/", 1)[-1]
    try:
        raw = json.loads(body)
        run_id, expires, holder = raw["run_id"], raw["expires_ms"], raw.get("holder", "")
        if not isinstance(run_id, str) or type(expires) is not int or not isinstance(holder, str):
            raise TypeError("run_id, expires_ms or holder has the wrong type")
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        log.warning("lease %s is unreadable (%s): it counts as live until %d", obj.key, exc, fallback)
        return Lease(name, fallback, "unreadable lease")
    if expires > fallback + LEASE_CLOCK_SKEW_MS:
        log.warning(
            "lease %s expires at %d, past what its TTL allows: it counts as live until %d", obj.key, expires, fallback
        )
        return Lease(run_id, fallback, f"{holder} (expiry past the TTL)")
    return Lease(run_id, expires, holder)


class RunLeases:
    """Hold a lease on each of `partition_prefixes` for `run_id` while the `with` block runs."""

    def __init__(self, store: ObjectStore, run_id: str, partition_prefixes: Iterable[str], max_workers: int) -> None:
        """`max_workers`: leases written and deleted at once (`lake.storage.max_concurrency`): a run
        over 1,000 partitions on a bucket 20 ms away would otherwise wait 20 s at its start, its end
        and each renewal."""
        self.store, self.run_id, self.max_workers = store, run_id, max_workers
        self.keys = [lease_key(prefix, run_id) for prefix in partition_prefixes]
        self.holder = f"{socket.gethostname()}:{os.getpid()}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew_until_stopped, name=f"lease-{run_id}", daemon=True)

    def _write_all(self) -> None:
        body = json.dumps(
            {"run_id": self.run_id, "expires_ms": wall_clock_ms() + LEASE_TTL_MS, "holder": self.holder}
        ).encode()
        map_ordered(lambda key: self.store.write(key, body), self.keys, self.max_workers)

    def _renew_until_stopped(self) -> None:
        while not self._stop.wait(LEASE_TTL_MS / 3000):
            try:
                self._write_all()
            except StorageError as exc:  # the next renewal may succeed; the lease has 2/3 of its TTL left
                log.warning("run %s could not renew its leases: %s", self.run_id, exc)

    def __enter__(self) -> RunLeases:
        self._write_all()
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()
        map_ordered(self.store.delete, self.keys, self.max_workers)
