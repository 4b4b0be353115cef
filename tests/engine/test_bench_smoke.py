"""bench/compaction.py at 100k records, as a smoke check (no timing assertions)."""

from __future__ import annotations

import re
import shutil
from functools import partial
from pathlib import Path
from types import ModuleType

import pytest
from pyspark.sql import SparkSession

from tests.support.bench_loader import bench_module
from tests.support.s3 import S3Endpoint

BENCH = Path(__file__).resolve().parents[2] / "bench" / "compaction.py"


def _bench() -> ModuleType:
    return bench_module("compaction")


def test_the_benchmark_runs(spark: SparkSession, tmp_path: Path) -> None:
    argv = [
        "--records",
        "100000",
        "--keys",
        "10000",
        "--partitions",
        "2",
        "--segment-bytes",
        "2000000",
        "--batch-records",
        "20000",
        "--runs",
        "2",
        "--dir",
        str(tmp_path),
        "--json",
        str(tmp_path / "results.json"),
    ]
    (result,) = _bench().main(argv, spark=spark)
    ours, floor, duck = result["measures"]
    assert ours["detail"].startswith("ok: 10000 records kept")
    assert floor["detail"] == "100000 records copied"
    assert duck["detail"] == "10000 records kept"
    assert result["a_over_b"] > 0 and result["a_over_c"] > 0
    assert [len(seconds) for seconds in result["seconds_per_run"].values()] == [2, 2, 2]
    assert (tmp_path / "results.json").exists()


@pytest.mark.classic_pass("the bench's incremental case; test_the_benchmark_runs runs the bench on Connect")
def test_the_incremental_case_measures_the_second_compaction(spark: SparkSession, tmp_path: Path) -> None:
    argv = ["--case", "incremental", "--records", "40000", "--keys", "20000", "--appended", "4000"]
    argv += ["--segment-bytes", "1000000", "--batch-records", "10000", "--runs", "1", "--dir", str(tmp_path)]
    (result,) = _bench().main(argv, spark=spark)
    assert "first compaction" in result["setup"]
    ours, floor, _ = result["measures"]
    kept_first = int(result["setup"].split(", ")[1].split()[0].replace(",", ""))
    assert result["input_records"] == kept_first + 4000  # the second run reads the cleaned log and the new records
    assert floor["detail"] == f"{kept_first + 4000} records copied"
    assert ours["detail"].startswith("ok:")
    names = [name for name, _ in result["targets"]]
    assert names == [
        "every run of (a) compacts the topic (no failed partition)",
        "a/b <= 1.25",
        "a/c <= 0.5",
        "second compaction / first <= 0.2",
    ]
    assert result["targets"][0][1] and result["failures"] == [] and result["second_over_first"] > 0


@pytest.mark.classic_pass("the bench's gdpr case; test_the_benchmark_runs runs the bench on Connect")
def test_the_gdpr_case_measures_the_compaction_at_the_erasure_deadline(spark: SparkSession, tmp_path: Path) -> None:
    """Issue 79: one key erased on a topic with max.compaction.lag.ms: the compaction at the
    tombstone's deadline rewrites the group holding the key and the tombstone's, nothing else."""
    argv = ["--case", "gdpr", "--records", "40000", "--keys", "20000", "--partitions", "1"]
    argv += ["--segment-bytes", "300000", "--batch-records", "5000", "--runs", "1", "--dir", str(tmp_path)]
    (result,) = _bench().main(argv, spark=spark)
    assert "first compaction" in result["setup"] and result["erased_keys"] == 1
    ours = result["measures"][0]
    assert ours["detail"].startswith("ok:") and "by deletion vectors" in ours["detail"]
    unchanged = int(re.search(r"(\d+) kept as they were", ours["detail"]).group(1))  # type: ignore[union-attr]
    assert result["groups_rewritten"] == 2 and unchanged >= 2
    assert ("groups rewritten <= 2 (in every run)", True) in result["targets"]


@pytest.mark.classic_pass("the bench's S3 store; test_the_benchmark_runs runs the bench on Connect")
def test_the_benchmark_runs_on_s3_through_the_latency_proxy(
    spark: SparkSession, seaweedfs_endpoint: S3Endpoint, tmp_path: Path
) -> None:
    """`--store s3` (issue 50): the lake, the copy floor and DuckDB on the same bucket of SeaweedFS,
    through the latency proxy."""
    from bench.s3_servers import S3Server

    e = seaweedfs_endpoint
    server = S3Server(e.url, e.access_key, e.secret_key, e.bucket, stop=lambda: None, pid=None)
    argv = ["--store", "s3", "--latency-ms", "2", "--records", "40000", "--keys", "4000", "--partitions", "2"]
    argv += ["--segment-bytes", "1000000", "--batch-records", "10000", "--runs", "1", "--dir", str(tmp_path)]
    (result,) = _bench().main(argv, spark=spark, s3_server=server)
    ours, floor, duck = result["measures"]
    assert result["store"] == "s3" and result["latency_ms"] == 2
    assert ours["detail"].startswith("ok: 4000 records kept")
    # each run names the S3 requests it made (counted by the latency proxy), and (a) its memory's parts
    assert re.fullmatch(r"40000 records copied; [1-9][\d,]* S3 requests", floor["detail"])
    assert re.fullmatch(r"4000 records kept; [1-9][\d,]* S3 requests", duck["detail"])
    assert re.search(r"; [1-9][\d,]* S3 requests; at the memory peak: .*this process \d", ours["detail"])


def test_a_run_without_room_on_the_disk_stops_before_it_starts_naming_the_space(tmp_path: Path) -> None:
    bench = _bench()
    lakes = bench.LocalLakes(tmp_path)
    free = shutil.disk_usage(tmp_path).free
    try:
        bench.make_room(lakes, free)  # 2.5 times the input is needed, and only the input's size is free
    except SystemExit as stop:
        assert re.search(r"the runs need about \d+ GB free in .* pass --dir on a larger disk", str(stop))
    else:
        raise AssertionError("make_room let a run start without room for it")
    bench.make_room(lakes, 1_000)  # room for a small input: no stop


def test_a_case_compared_with_anothers_memory_is_measured_after_it_each_alone_in_a_process_of_its_own() -> None:
    """`--case huge-partition` also measures high-cardinality, before it; run by the parent, each
    child measures its case alone (`--alone`), with every other option as given."""
    bench = _bench()
    chosen = bench.chosen_cases(bench.parse_args(["--case", "huge-partition"]))
    assert [c.name for c in chosen] == ["high-cardinality", "huge-partition"]
    given = ["--case=huge-partition", "--runs", "1", "--json", "all.json", "--dir", "/d", "--alone"]
    child = bench.case_argv(given, "high-cardinality", "one.json")
    assert child == ["--runs", "1", "--dir", "/d", "--case", "high-cardinality", "--alone", "--json", "one.json"]
    assert [bench.processes_for(c, chosen) for c in chosen] == [bench.REFERENCE_PROCESSES, 1]
    assert bench.processes_for(chosen[0], chosen[:1]) == 1  # high-cardinality alone: nothing compared with it
    assert [c.name for c in bench.chosen_cases(bench.parse_args(child))] == ["high-cardinality"]


def test_a_peak_within_the_reference_cases_spread_meets_the_memory_target_and_one_past_it_misses() -> None:
    """The huge partition's peak is held to the reference's highest peak plus its spread over its
    processes (issue 50): one process's peak varies by tens of MB from run to run."""
    bench = _bench()
    reference = {"measures": [{"peak_rss_mb": 1_850.0}], "peaks_mb": [1_850.0, 1_871.0, 1_841.0]}
    name, met = bench.within_reference_memory("high-cardinality", 1_901.0, reference)
    assert met and name == (
        "peak memory of (a) <= (a) at high-cardinality to within its spread "
        "(1,871 + 30 MB; its peaks: 1,850, 1,871, 1,841 MB)"
    )
    assert not bench.within_reference_memory("high-cardinality", 1_901.5, reference)[1]
    alone = {"measures": [{"peak_rss_mb": 1_850.0}]}  # both cases measured in one process: no spread
    assert bench.within_reference_memory("high-cardinality", 1_850.0, alone)[1]
    assert not bench.within_reference_memory("high-cardinality", 1_850.5, alone)[1]


def test_a_baseline_that_fails_in_its_own_process_fails_the_bench_naming_the_error() -> None:
    from bench.baselines import Apart

    baseline = Apart(partial(int, "not a number"))
    assert baseline.start() > 0
    with pytest.raises(RuntimeError, match=r"a baseline failed in its own process: ValueError: invalid literal"):
        baseline.result()


def test_a_case_that_fails_in_its_own_process_stops_the_bench_naming_it(capfd: pytest.CaptureFixture[str]) -> None:
    bench = _bench()
    with pytest.raises(SystemExit, match=r"the default case failed in its own process \(its error is above\): "):
        bench.in_own_processes(["--runs", "many"], [bench.CASES["default"]], bench.Console())
    assert "argument --runs: invalid int value: 'many'" in capfd.readouterr().err
