"""What a process keeps of immutable objects it read (`io.kept`): the last used, bounded by weight."""

from __future__ import annotations

import threading

from lakecleaner.io.kept import Kept


def test_the_least_recently_used_go_first_once_the_count_passes_the_limit() -> None:
    kept: Kept[str, int] = Kept(3)
    for i in range(5):
        kept.put(f"k{i}", i)
        assert kept.get("k0") == 0  # used each time: never the least recently used
    assert len(kept) == 3 and kept.get("k1") is None and kept.get("k2") is None
    assert (kept.get("k3"), kept.get("k4")) == (3, 4)


def test_values_are_weighed_and_one_heavier_than_the_limit_is_not_kept() -> None:
    kept: Kept[str, bytes] = Kept(10, len)
    kept.put("a", b"1234")
    kept.put("b", b"1234")
    kept.put("c", b"123")  # 11 > 10: `a` goes
    assert kept.get("a") is None and kept.get("b") == b"1234" and kept.get("c") == b"123"
    kept.put("huge", b"x" * 11)
    assert kept.get("huge") is None and len(kept) == 2


def test_a_key_put_again_is_weighed_once() -> None:
    kept: Kept[str, bytes] = Kept(10, len)
    for _ in range(5):
        kept.put("a", b"12345")
    kept.put("b", b"12345")
    assert kept.get("a") == b"12345" and kept.get("b") == b"12345"


def test_threads_putting_and_getting_keep_the_bound() -> None:
    kept: Kept[int, bytes] = Kept(1000, len)

    def work(base: int) -> None:
        for i in range(2000):
            kept.put(base + i % 300, b"x" * 7)
            kept.get(base + (i * 7) % 300)

    threads = [threading.Thread(target=work, args=(n * 1000,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(kept) * 7 <= 1000
