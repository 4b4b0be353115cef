"""Compact a topic's partitions: the spark-submit application behind the DAG's `compact` task.

    spark-submit "$(lakecleaner --json paths | jq -r .compact_job)" --config lakecleaner.yaml --topic orders \\
        [--partitions 0,2] [--now 2026-11-21T10:00:00Z | 1795255200000] [--run-id ID] [--master local[*]]

`--lake` overrides the config's lake URI. The master comes from spark-submit, else `--master`,
else the config's `spark.master`. The run report is printed and stored under
`_lakecleaner/runs/<topic>/<run id>/report.json`; the exit status is 1 when any partition
failed (quality gate, uncleanable segment, error), else 0.

Also callable in-process: `main(argv, spark)` reuses a running SparkSession.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import threading
from collections.abc import Sequence

from pyspark.sql import SparkSession

from lakecleaner.clock import parse_time_ms, wall_clock_ms
from lakecleaner.config import LakeConfig, load_config
from lakecleaner.engine import EngineOptions, compact_topic, print_report, requests_for
from lakecleaner.engine.session import build_session
from lakecleaner.engine.sparkio import is_connect
from lakecleaner.extras import open_lake
from lakecleaner.process import exit_flushed
from lakecleaner.quality import expectations


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="compact_topic.py", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--config", help="YAML config (default: $LAKECLEANER_CONFIG, else ./lakecleaner.yaml)")
    parser.add_argument("--lake", help="lake URI, overriding the config's (s3://bucket/prefix or file:///path)")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", default="", help="comma-separated partitions (default: all)")
    parser.add_argument("--now", help="'now' of every decision: epoch ms or ISO 8601 (default: the wall clock)")
    parser.add_argument("--run-id", help="run id (default: generated)")
    parser.add_argument("--master", help="Spark master when not set by spark-submit")
    parser.add_argument("--remote", help="Spark Connect server, sc://host:port (default: the config's spark.remote)")
    return parser.parse_args(argv)


def _config(args: argparse.Namespace) -> LakeConfig:
    config = load_config(args.config)
    return dataclasses.replace(config, lake_uri=args.lake) if args.lake else config


def main(argv: Sequence[str] | None = None, spark: SparkSession | None = None) -> int:
    args = parse_args(argv)
    config = _config(args)
    # The quality gate's Great Expectations takes seconds to import: do it while Spark starts, as
    # every import of GX, through `lakecleaner.quality` (a Connect client leaves it to the server's
    # Python workers).
    if not (is_connect(spark) if spark is not None else bool(args.remote or config.spark.remote)):
        threading.Thread(target=expectations, daemon=True).start()
    lake = open_lake(config)
    topic = lake.topic(args.topic)
    now = parse_time_ms(args.now) if args.now else wall_clock_ms()
    numbers = [int(p) for p in args.partitions.split(",") if p.strip()] or list(range(topic.partitions))
    read = topic.read_manifests(numbers)
    for partition, reason in read.failures.items():  # the others are compacted
        print(f"{topic.name}-{partition}: FAILED: {reason}", file=sys.stderr)
    requests = [r for m in read.manifests.values() if (r := requests_for(m, topic.config, now))]
    session = spark or build_session(config.spark, f"lakecleaner-{topic.name}", args.master, args.remote)
    try:
        options = EngineOptions.of(config.cleaner)
        report = compact_topic(session, lake, topic.name, requests, now, run_id=args.run_id, options=options)
    finally:
        if spark is None:
            session.stop()
    print_report(report)
    return 1 if report.failed or read.failures else 0


if __name__ == "__main__":
    exit_flushed(main())
