"""The process's I/O pool: `map_bounded` keeps items and weight in flight under its limits."""

from __future__ import annotations

import os
import threading
import time

import pytest

from lakecleaner.io.concurrent import executor, map_bounded, map_ordered


class Gauge:
    """Counts items and weight running at once, and the most of each seen."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.items = self.weight = self.most_items = self.most_weight = 0

    def run(self, weight: int) -> int:
        with self.lock:
            self.items += 1
            self.weight += weight
            self.most_items = max(self.most_items, self.items)
            self.most_weight = max(self.most_weight, self.weight)
        time.sleep(0.02)
        with self.lock:
            self.items -= 1
            self.weight -= weight
        return weight * 10


def test_items_overlap_under_the_limit_and_every_result_comes_back_with_its_index() -> None:
    gauge = Gauge()
    weights = [1] * 40
    results = dict(map_bounded(gauge.run, weights, weights, budget=100, limit=6, max_workers=16))
    assert results == {i: 10 for i in range(40)}
    assert 1 < gauge.most_items <= 6


def test_weight_in_flight_stays_under_the_budget_and_a_heavier_item_runs_alone() -> None:
    gauge = Gauge()
    weights = [3, 3, 3, 50, 3, 3, 3, 3]
    results = dict(map_bounded(gauge.run, weights, weights, budget=10, limit=8, max_workers=16))
    assert results == {i: w * 10 for i, w in enumerate(weights)}
    assert gauge.most_weight == 50  # the heavy item alone; the light ones at most 3 at once (9)
    gauge = Gauge()
    light = [3] * 8
    list(map_bounded(gauge.run, light, light, budget=10, limit=8, max_workers=16))
    assert gauge.most_weight == 9


def test_the_first_exception_is_raised() -> None:
    def fail_on_three(item: int) -> int:
        if item == 3:
            raise ValueError("item 3")
        return item

    with pytest.raises(ValueError, match="item 3"):
        list(map_bounded(fail_on_three, list(range(10)), [1] * 10, budget=100, limit=4, max_workers=8))


def test_inside_a_pool_task_items_run_inline_one_at_a_time() -> None:
    """A fan-out nested in one of the pool's tasks runs in that task (no waiting on a full pool)."""

    def nested(outer: int) -> int:
        gauge = Gauge()
        list(map_bounded(gauge.run, [1, 1, 1], [1, 1, 1], budget=100, limit=3, max_workers=2))
        return gauge.most_items

    assert map_ordered(nested, [0, 1], max_workers=2) == [1, 1]


def test_an_item_heavier_than_the_budget_runs_in_the_callers_thread_and_its_own_fan_out_uses_the_pool() -> None:
    """A heavy item runs alone, not as one of the pool's tasks: a fan-out of its own (a partition's
    files fetched at once) then runs on the pool's threads rather than inline, one after another."""
    caller = threading.current_thread()
    seen: dict[int, tuple[bool, set[str]]] = {}

    def run(weight: int) -> int:
        threads = map_ordered(lambda _: (time.sleep(0.02), threading.current_thread().name)[1], range(4), 16)
        seen[weight] = (threading.current_thread() is caller, set(threads))
        return weight

    assert dict(map_bounded(run, [3, 50, 3], [3, 50, 3], budget=10, limit=8, max_workers=16)) == {0: 3, 1: 50, 2: 3}
    in_caller, fan_out_threads = seen[50]
    assert in_caller and len(fan_out_threads) > 1 and caller.name not in fan_out_threads
    light_in_caller, light_threads = seen[3]
    assert not light_in_caller and len(light_threads) == 1  # a light item's fan-out runs inline


def _io_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name.startswith("lakecleaner-io"))


def test_a_process_using_two_pool_sizes_in_turn_keeps_one_pool_of_each() -> None:
    """Lakes of two `max_concurrency`s read in turn reuse their pools: no pool started per turn,
    no idle threads left behind."""
    sizes = (3, 5)
    for size in sizes:
        map_ordered(lambda x: x, range(20), size)
    pools, threads = {size: executor(size) for size in sizes}, _io_threads()
    for _ in range(10):
        for size in sizes:
            assert map_ordered(lambda x: x * 2, range(20), size) == [x * 2 for x in range(20)]
            assert executor(size) is pools[size]
    assert _io_threads() == threads


def test_a_forked_child_gets_pools_of_its_own() -> None:
    """A child of a fork holds none of its parent's pool threads: it gets a new pool, which runs."""
    parent = executor(3)
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        ok = executor(3) is not parent and map_ordered(lambda x: x + 1, range(10), 3) == list(range(1, 11))
        os.write(write, b"1" if ok else b"0")
        os._exit(0)
    os.close(write)
    assert os.read(read, 1) == b"1"
    os.waitpid(child, 0)
    os.close(read)
    assert executor(3) is parent
