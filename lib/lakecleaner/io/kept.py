"""What a process keeps of immutable objects it read, so that a commit's cost follows the change
rather than what is stored (issue 80): values by key, the most recently used first, up to a limit
of their weights in all (a count, entries, bytes), thread-safe. Only for values read from objects
that never change once written (Iceberg metadata, manifest and data files, each at a location of
its own): a kept value is never checked against storage again."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Kept(Generic[K, V]):
    """Values by key, the last used kept, up to `limit` of their `weight` in all (a value heavier
    than the limit is not kept)."""

    def __init__(self, limit: int, weight: Callable[[V], int] = lambda _: 1) -> None:
        self._limit = limit
        self._weight = weight
        self._values: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            kept = self._values.get(key)
            if kept is None:
                return None
            self._values.move_to_end(key)
            return kept[0]

    def put(self, key: K, value: V) -> None:
        weight = self._weight(value)
        if weight > self._limit:
            return
        with self._lock:
            old = self._values.pop(key, None)
            if old is not None:
                self._held -= old[1]
            self._values[key] = (value, weight)
            self._held += weight
            while self._held > self._limit:
                _, (_, gone) = self._values.popitem(last=False)
                self._held -= gone

    def __len__(self) -> int:
        return len(self._values)


__all__ = ["Kept"]
