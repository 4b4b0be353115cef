"""bench/iceberg.py at small sizes, as a smoke check (no timing assertions): it measures appends
with the tables on and off, the bytes each wrote, and commits in a row."""

from __future__ import annotations

from tests.support.bench_loader import bench_module


def test_the_iceberg_benchmark_runs() -> None:
    result = bench_module("iceberg").main(["--keys", "300", "3000", "--runs", "2", "--commits", "12"])
    figures = result["keys"]
    assert set(figures) == {300, 3000}
    for measured in figures.values():
        assert measured["off_s"] > 0 and measured["on_s"] > 0
        assert measured["batch_bytes"] > 0 and measured["latest_bytes"] > 0  # the sync rewrote the partition's rows
    assert len(result["in_a_row"]) == 12
    assert len(result["targets"]) == 3
