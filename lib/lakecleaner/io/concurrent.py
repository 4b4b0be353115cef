"""One bounded thread pool per process for metadata I/O (manifests, offsets files, footers).

Reading a topic's state means one small GET per partition; on a bucket 20 ms away, 1,000 of them
one after another take 20 s, so they fan out over this pool. It is sized by
`lake.storage.max_concurrency` (the HTTP connection pool is sized to match, `io/s3.py`) and
rebuilt after a fork (Spark's Python workers and Airflow's task processes are forked; a child
inherits a pool whose threads are gone), as pyiceberg's `ExecutorFactory` does. `map_ordered`
keeps the input order, so plans built from its results stay deterministic.

A `map_ordered` called from inside one of the pool's tasks runs its items in that thread, one
after another: a task waiting for tasks queued behind it on a full pool would wait forever. So a
fan-out across topics should flatten its work (all topics' partitions in one `map_ordered`), as
`Lake.read_topics` and `Lake.read_manifests_of` do, rather than nest one fan-out in another.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

_lock = threading.Lock()
_state: dict[str, object] = {}
_in_task = threading.local()


def executor(max_workers: int) -> ThreadPoolExecutor:
    """The process's pool of `max_workers` threads (a new one after a fork or a new size)."""
    with _lock:
        pool = _state.get("pool")
        if not isinstance(pool, ThreadPoolExecutor) or _state.get("key") != (os.getpid(), max_workers):
            pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="lakecleaner-io")
            _state.update(pool=pool, key=(os.getpid(), max_workers))
        return pool


def map_ordered(fn: Callable[[T], R], items: Iterable[T], max_workers: int) -> list[R]:
    """`fn` over `items` on the pool, results in input order; the first exception is raised.
    Called from one of the pool's own tasks, it runs the items in that task (see above)."""
    work = list(items)
    if len(work) <= 1 or getattr(_in_task, "active", False):
        return [fn(item) for item in work]

    def task(item: T) -> R:
        _in_task.active = True
        try:
            return fn(item)
        finally:
            _in_task.active = False

    return list(executor(max_workers).map(task, work))
