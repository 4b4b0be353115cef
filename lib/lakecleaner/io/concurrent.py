"""A bounded thread pool per process for metadata I/O (manifests, offsets files, footers).

Reading a topic's state means one small GET per partition; on a bucket 20 ms away, 1,000 of them
one after another take 20 s, so they fan out over this pool. It is sized by
`lake.storage.max_concurrency` (the HTTP connection pool is sized to match, `io/s3/connection.py`),
one pool per size in use, and rebuilt after a fork (Spark's Python workers and Airflow's task
processes are forked; a child inherits a pool whose threads are gone), as pyiceberg's
`ExecutorFactory` does. `map_ordered` keeps the input order, so plans built from its results stay
deterministic.

A `map_ordered` called from inside one of the pool's tasks runs its items in that thread, one
after another: a task waiting for tasks queued behind it on a full pool would wait forever. So a
fan-out across topics should flatten its work (all topics' partitions in one `map_ordered`), as
`Lake.read_topics` and `Lake.read_manifests_of` do, rather than nest one fan-out in another.

`map_bounded` is the same pool for work items of uneven size (a Spark task's partitions): it
yields each result as it finishes and keeps both the number of items and their total weight in
flight under limits, so small items overlap their requests and a large one runs alone, in the
calling thread: not one of the pool's tasks, its own fan-out (a partition's files fetched at once,
`FetchedFiles.prefetch`) runs on the pool.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

_lock = threading.Lock()
#: The pools of this process, by (process id, size).
_pools: dict[tuple[int, int], ThreadPoolExecutor] = {}
_in_task = threading.local()


def executor(max_workers: int) -> ThreadPoolExecutor:
    """The process's pool of `max_workers` threads: one per size in use, kept (a process that
    reads lakes of two `max_concurrency`s in turn would otherwise start a pool at every turn and
    leave the last one's threads idle), and new ones after a fork, whose child holds none of the
    parent's threads."""
    key = (os.getpid(), max_workers)
    with _lock:
        pool = _pools.get(key)
        if pool is None:
            for inherited in [k for k in _pools if k[0] != key[0]]:
                del _pools[inherited]
            pool = _pools[key] = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="lakecleaner-io")
        return pool


def map_ordered(fn: Callable[[T], R], items: Iterable[T], max_workers: int) -> list[R]:
    """`fn` over `items` on the pool, results in input order; the first exception is raised.
    Called from one of the pool's own tasks, it runs the items in that task (see above)."""
    work = list(items)
    if len(work) <= 1 or getattr(_in_task, "active", False):
        return [fn(item) for item in work]
    return list(executor(max_workers).map(_pool_task(fn), work))


def map_bounded(
    fn: Callable[[T], R], items: Sequence[T], weights: Sequence[int], budget: int, limit: int, max_workers: int
) -> Iterator[tuple[int, R]]:
    """(index, `fn(item)`) for every item, as each finishes, on the pool: at most `limit` items and
    at most `budget` of weight at once (an item heavier than the budget runs alone, in this
    thread, so that its own fan-outs may use the pool). The first exception is raised; items not
    yet started are then dropped."""
    if len(items) <= 1 or limit <= 1 or getattr(_in_task, "active", False):
        yield from ((index, fn(item)) for index, item in enumerate(items))
        return
    pool, task = executor(max_workers), _pool_task(fn)
    waiting, running = deque(range(len(items))), dict[Future[R], int]()
    in_flight = 0
    try:
        while waiting or running:
            if not running and weights[waiting[0]] > budget:
                index = waiting.popleft()
                yield index, fn(items[index])  # alone, in this thread: its own fan-outs use the pool
                continue
            while waiting and len(running) < limit and (not running or in_flight + weights[waiting[0]] <= budget):
                index = waiting.popleft()
                running[pool.submit(task, items[index])] = index
                in_flight += weights[index]
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                index = running.pop(future)
                in_flight -= weights[index]
                yield index, future.result()
    finally:
        for future in running:
            future.cancel()


def _pool_task(fn: Callable[[T], R]) -> Callable[[T], R]:
    """`fn`, marked while it runs as one of the pool's tasks (its own fan-outs then run inline)."""

    def task(item: T) -> R:
        _in_task.active = True
        try:
            return fn(item)
        finally:
            _in_task.active = False

    return task
