"""Building, compacting and inspecting logs in engine tests."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import SparkSession

from lakecleaner.audit import holds_no_records
from lakecleaner.config import LakeConfig
from lakecleaner.engine import CompactionRequest, RunReport, compact_topic, requests_for
from lakecleaner.lake import Lake, Topic
from lakecleaner.log.layout import partition_prefix
from lakecleaner.log.records import Record

if TYPE_CHECKING:  # not at run time: fault hooks import this module inside Airflow's task processes
    from tests.support.flaky_proxy import FlakyProxy
    from tests.support.s3 import S3Endpoint

_names = itertools.count()

#: A script that prints what the Python workers of the session `sys.argv[1]` names (a Spark Connect
#: URL, else a master for `build_session`) see of `WORKER_ENV`, as JSON.
WORKER_ENV_PROBE = """
import json, os, sys
from lakecleaner.config import SparkSettings
from lakecleaner.engine.session import build_session, connect_session
from lakecleaner.engine.sparkio import run_tasks
from lakecleaner.engine.workers import WORKER_ENV
where = sys.argv[1]
if where.startswith("sc://"):
    session = connect_session(where)
else:
    session = build_session(SparkSettings(master=where, conf={"spark.ui.enabled": "false"}), "probe")
names = sorted(WORKER_ENV)
print(json.dumps(dict(zip(names, run_tasks(session, names, os.getenv, "probe")))))
"""


def lake_through(proxy: FlakyProxy, s3_endpoint: S3Endpoint, tmp_path: Path, *, max_attempts: int) -> Lake:
    """A lake on the S3 endpoint reached through `proxy`, retrying quickly."""
    settings = s3_endpoint.settings(
        endpoint_url=proxy.url, max_attempts=max_attempts, backoff_base_ms=1, backoff_max_ms=5
    )
    return Lake.open(LakeConfig(f"s3://{s3_endpoint.bucket}/{tmp_path.name}", settings))


def new_topic(lake: Lake, partitions: int = 1, **config: Any) -> Topic:
    """A fresh compacted topic with a unique name; `config` uses Kafka names with _ for ."""
    settings = {"cleanup.policy": "compact", **{k.replace("_", "."): v for k, v in config.items()}}
    return lake.create_topic(f"t{next(_names)}", partitions=partitions, config=settings)


def sealed_two_partitions(lake: Lake, *batches: Mapping[str, str]) -> Topic:
    """A new topic of two partitions, each with `batches` appended in order at 100 ms and then
    rolled, so that all of it is sealed and cleanable."""
    topic = new_topic(lake, partitions=2)
    for p in range(2):
        log = topic.partition(p)
        for batch in batches:
            log.append(keyed(batch), now_ms=100)
        log.roll(now_ms=100)
    return topic


def requests(topic: Topic, now: int, partitions: Sequence[int] | None = None) -> list[CompactionRequest]:
    numbers = range(topic.partitions) if partitions is None else partitions
    return [r for p in numbers if (r := requests_for(topic.partition(p).manifest(), topic.config, now))]


def compact(spark: SparkSession, lake: Lake, topic: Topic, now: int, **kwargs: Any) -> RunReport:
    topic = lake.topic(topic.name)
    return compact_topic(spark, lake, topic.name, requests(topic, now), now, **kwargs)


def rows(topic: Topic, partition: int = 0) -> list[dict[str, Any]]:
    return list(topic.partition(partition).read().to_pylist())


def segment_file_names(topic: Topic) -> set[str]:
    """The names (without folders) of every segment file the topic's partitions reference now."""
    return {
        f.path.rsplit("/", 1)[-1] for log in topic.partition_logs() for s in log.manifest().segments for f in s.files
    }


def unreferenced_files(lake: Lake, topic: Topic, partition: int = 0) -> list[str]:
    """Files under the partition that the manifest references neither as segment nor pending delete
    (the manifest, a running compaction's lease and the commit records are not files of the log:
    `audit.holds_no_records`)."""
    prefix = partition_prefix(topic.name, partition)
    referenced = topic.partition(partition).manifest().referenced_paths()
    paths = (o.key[len(prefix) :] for o in lake.store.list(prefix))
    return sorted(p for p in paths if not holds_no_records(p) and p not in referenced)


def keyed(records: Mapping[str, str | None], timestamp: int = 1000) -> list[Record]:
    """Records from key → value (None: tombstone)."""
    return [Record(k.encode(), None if v is None else v.encode(), timestamp) for k, v in records.items()]
