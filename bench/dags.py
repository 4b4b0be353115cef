"""Benchmark: parsing the topics' DAG files at 1,000 and 10,000 topics, as Airflow's dag-processor does.

    uv run python bench/dags.py                      # 1,000 and 10,000 topics, 32 files
    uv run python bench/dags.py --topics 10000 --files 32
    uv run python bench/dags.py --help

For each number of topics, writes a config file of that many topics (one topic per source table of
50 teams: half compacted CDC topics with a header version, half delete-policy topics with consumed
retention, 10 partitions each) and two DAG folders with `lakecleaner airflow dag-files`:

  (a) `--files` files (the layout lakecleaner ships: each file builds its share of the topics);
  (b) one file building every topic's DAG (the layout before issue 50): the baseline.

The dag-processor parses each file in a process forked from one that has imported Airflow (not
lakecleaner), with a time limit of `dagbag_import_timeout` (30 s) on the import; this script does
the same: it imports Airflow's DagBag, then forks a child per file that runs `DagBag(file)` in
safe mode and reports the file's import time as the DagBag measures it (`dagbag_stats`), its DAG
count and import errors. Files are parsed `--parallel` at a time (the dag-processor's
`parsing_processes`, default 2), and the wall time of the whole folder is measured too.

A worker that runs a task parses the task's DAG file with Airflow's parsing context naming the
DAG; "a task's parse" is that, for one topic of the largest file.

Target (issue 50): no file of (a) takes more than 5 s at 10,000 topics. Prints a table with
met / MISSED and each figure against the baseline (b); `--json FILE` also writes the figures.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from lakecleaner.orchestration.dag_files import DEFAULT_DAG_FILES, DagFileShare, file_index_of, write_dag_files
from lakecleaner.runs.naming import dag_id_of

TARGET_S = 5.0
TEAMS = 50


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--topics", type=int, nargs="+", default=[1000, 10000], help="numbers of topics")
    parser.add_argument("--files", type=int, default=DEFAULT_DAG_FILES, help="DAG files of layout (a)")
    parser.add_argument("--parallel", type=int, default=2, help="files parsed at once (parsing_processes)")
    parser.add_argument("--no-baseline", action="store_true", help="skip the one-file layout (b)")
    parser.add_argument("--dir", help="work directory (default: a temporary one)")
    parser.add_argument("--json", help="also write the figures to this file")
    return parser.parse_args(argv)


def topic_name(index: int) -> str:
    return f"team{index % TEAMS:02d}.db.table-{index:05d}"


def write_config(path: Path, lake: Path, topics: int) -> Path:
    """A config file of `topics` topics, as a lake with one topic per source table would have."""
    lines = [f"lake: {{uri: 'file://{lake}'}}", "defaults: {log.retention.hours: 168}", "topics:"]
    for i in range(topics):
        lines.append(f"  {topic_name(i)}:")
        lines += ["    partitions: 10", "    schedule: '@hourly'", "    config:"]
        if i % 2:
            lines += [
                "      cleanup.policy: compact",
                "      compaction.strategy: header",
                "      compaction.strategy.header: version",
                "      max.compaction.lag.ms: 86400000",
            ]
        else:
            lines += ["      cleanup.policy: delete", "      retention.ms: 604800000"]
            lines += ["    consumer_groups: [billing, analytics]"]
    path.write_text("\n".join(lines) + "\n")
    return path


def _parse_file(job: tuple[str, str | None]) -> dict[str, Any]:
    """In a forked child: what Airflow's DagBag finds in one file (with a parsing context, if named)."""
    path, dag_id = job
    if dag_id:
        os.environ["_AIRFLOW_PARSING_CONTEXT_DAG_ID"] = dag_id
    from airflow.dag_processing.dagbag import DagBag

    started = time.perf_counter()
    bag = DagBag(dag_folder=path, safe_mode=True)
    wall = time.perf_counter() - started
    (stat,) = bag.dagbag_stats
    return {
        "file": Path(path).name,
        "seconds": stat.duration.total_seconds(),
        "wall_s": wall,
        "dags": len(bag.dags),
        "errors": [str(e)[:300] for e in bag.import_errors.values()],
    }


def parse_folder(folder: Path, parallel: int) -> dict[str, Any]:
    """Every file of `folder`, each in a child forked for it, `parallel` at a time."""
    files = sorted(str(p) for p in folder.glob("*.py"))
    context = multiprocessing.get_context("fork")
    started = time.perf_counter()
    with context.Pool(parallel, maxtasksperchild=1) as pool:
        results = pool.map(_parse_file, [(f, None) for f in files], chunksize=1)
    wall = time.perf_counter() - started
    return {
        "files": results,
        "wall_s": wall,
        "slowest_s": max(r["seconds"] for r in results),
        "total_s": sum(r["seconds"] for r in results),
        "dags": sum(r["dags"] for r in results),
        "errors": [e for r in results for e in r["errors"]],
    }


def task_parse(folder: Path, files: int, topics: int) -> dict[str, Any]:
    """A worker's parse of the largest file for one of its topics (Airflow's parsing context)."""
    counts: dict[int, list[str]] = {}
    for i in range(topics):
        counts.setdefault(file_index_of(topic_name(i), files), []).append(topic_name(i))
    index, names = max(counts.items(), key=lambda item: len(item[1]))
    path = folder / DagFileShare(index, files).file_name
    with multiprocessing.get_context("fork").Pool(1, maxtasksperchild=1) as pool:
        (result,) = pool.map(_parse_file, [(str(path), dag_id_of(names[0]))])
    return result


def measure(work: Path, topics: int, files: int, parallel: int, baseline: bool) -> dict[str, Any]:
    os.environ["LAKECLEANER_CONFIG"] = str(write_config(work / f"lakecleaner-{topics}.yaml", work / "lake", topics))
    shared = work / f"dags-{topics}-{files}"
    write_dag_files(shared, files)
    result: dict[str, Any] = {"topics": topics, "files": files, "ours": parse_folder(shared, parallel)}
    result["task"] = task_parse(shared, files, topics)
    if baseline:
        single = work / f"dags-{topics}-1"
        write_dag_files(single, 1)
        result["one_file"] = parse_folder(single, parallel)
    return result


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    args = parse_args(argv)
    console = Console(width=150)
    os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="bench-dags-airflow-"))
    os.environ.update(AIRFLOW__CORE__LOAD_EXAMPLES="False", AIRFLOW__CORE__UNIT_TEST_MODE="True")
    from airflow.dag_processing.dagbag import DagBag  # noqa: F401  # the dag-processor's parent has Airflow imported

    with tempfile.TemporaryDirectory(prefix="bench-dags-") as scratch:
        work = Path(args.dir or scratch)
        work.mkdir(parents=True, exist_ok=True)
        results = []
        for topics in args.topics:
            console.print(f"{topics:,} topics: parsing {args.files} files, then one file ...")
            results.append(measure(work, topics, args.files, args.parallel, not args.no_baseline))
    print_table(console, args, results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return results


def print_table(console: Console, args: argparse.Namespace, results: list[dict[str, Any]]) -> None:
    table = Table(title=f"DAG files: parse times (files parsed {args.parallel} at a time, as parsing_processes)")
    columns = ("topics", "layout", "DAGs", "slowest file", "total", "wall", "a task's parse", "slowest / (b)", "target")
    for column in columns:
        table.add_column(column, justify="right" if column not in ("layout", "target") else "left")
    for result in results:
        ours, one = result["ours"], result.get("one_file")
        ratio = f"{ours['slowest_s'] / one['slowest_s']:.2f}" if one else ""
        met = ours["slowest_s"] <= TARGET_S and not ours["errors"]
        table.add_row(
            f"{result['topics']:,}",
            f"(a) {result['files']} files",
            f"{ours['dags']:,}",
            f"{ours['slowest_s']:.2f} s",
            f"{ours['total_s']:.1f} s",
            f"{ours['wall_s']:.1f} s",
            f"{result['task']['seconds']:.2f} s",
            ratio,
            ("met" if met else "MISSED") + (f" ({len(ours['errors'])} import errors)" if ours["errors"] else ""),
        )
        if one:
            table.add_row(
                "",
                "(b) one file",
                f"{one['dags']:,}",
                f"{one['slowest_s']:.2f} s",
                f"{one['total_s']:.1f} s",
                f"{one['wall_s']:.1f} s",
                "",
                "1.00",
                "import error" if one["errors"] else "",
            )
    console.print(table)
    console.print(f"target: no file of (a) over {TARGET_S:.0f} s to parse (Airflow's dagbag_import_timeout is 30 s)")


if __name__ == "__main__":
    main(sys.argv[1:])
