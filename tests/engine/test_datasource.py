"""spark.read.format("lakecleaner") reads what the log reads, on every backend."""

from __future__ import annotations

import contextlib
import io
from typing import Any

import pytest
from pyspark.sql import SparkSession

from lakecleaner.config import LakeConfig
from lakecleaner.engine import register_data_source
from lakecleaner.lake import Lake
from lakecleaner.log.records import Record, encode_version
from tests.engine.helpers import compact, keyed, new_topic
from tests.support.backends import ALL_BACKENDS

pytestmark = pytest.mark.backends(*ALL_BACKENDS)  # and the real object store, SeaweedFS (issue #15)


def _options(config: LakeConfig, **more: Any) -> dict[str, str]:
    s = config.storage
    options = {"lake": config.lake_uri, **{k: str(v) for k, v in more.items()}}
    if s.endpoint_url:
        options |= {"endpoint": s.endpoint_url, "region": s.region or "", "accessKeyId": s.access_key_id or ""}
        options["secretAccessKey"] = s.secret_access_key or ""
    return options


def _read(spark: SparkSession, config: LakeConfig, **options: Any) -> list[dict[str, Any]]:
    df = spark.read.format("lakecleaner").options(**_options(config, **options)).load()
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        df.explain("extended")
    plan = printed.getvalue()
    assert not config.storage.secret_access_key or config.storage.secret_access_key not in plan
    return [r.asDict(recursive=True) for r in df.orderBy("partition", "offset").collect()]


def test_the_data_source_reads_what_the_log_reads(spark: SparkSession, lake: Lake, lake_config: LakeConfig) -> None:
    register_data_source(spark)
    topic = new_topic(lake, partitions=3)
    for p in range(3):
        log = topic.partition(p)
        log.append(keyed({"a": "1", "b": None}), now_ms=100)
        log.roll(now_ms=100)
        log.append([Record(b"a", b"2", 200, (("h", encode_version(7)),))], now_ms=100)
        log.roll(now_ms=100)
    compact(spark, lake, topic, 500)
    topic.partition(1).append(keyed({"c": "3"}), now_ms=600)

    def log_rows(partitions: list[int], start: int = 0, end: int = 10**9) -> list[dict[str, Any]]:
        out = []
        for p in partitions:
            for r in topic.partition(p).read().to_pylist():
                if start <= r["offset"] < end:
                    r["headers"] = [dict(h) for h in r["headers"]]
                    out.append({"partition": p, **r})
        return out

    def normalised(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [
            {
                **r,
                "key": bytes(r["key"]),
                "value": None if r["value"] is None else bytes(r["value"]),
                "headers": [{"key": h["key"], "value": bytes(h["value"])} for h in r["headers"]],
            }
            for r in rows
        ]

    assert normalised(_read(spark, lake_config, topic=topic.name)) == log_rows([0, 1, 2])
    assert normalised(_read(spark, lake_config, topic=topic.name, partitions="1")) == log_rows([1])
    ranged = _read(spark, lake_config, topic=topic.name, partitions="0,1", startingOffset=1, endingOffset=3)
    assert normalised(ranged) == log_rows([0, 1], 1, 3)
