"""Fault hooks a test names in LAKECLEANER_FAULT_HOOKS, run inside processes it does not control
(e.g. the spark-submit driver of an Airflow task). They reach the lake through the same config and
environment as the process they run in."""

from __future__ import annotations

import os

import pyarrow as pa

from lakecleaner.config import load_config
from lakecleaner.lake import Lake
from lakecleaner.log.layout import partition_prefix
from lakecleaner.log.segment_files import encode_segment_file, read_file_meta, read_segment_file
from tests.engine.helpers import unreferenced_files

ENV_TAMPER_TOPIC = "LAKECLEANER_TEST_TAMPER_TOPIC"


def tamper_partition_0_staged_output() -> None:
    """At "engine.after_staging": change one value in partition 0's staged output, so the quality
    gate must stop that partition (and only that one)."""
    lake = Lake.open(load_config())
    topic = lake.topic(os.environ[ENV_TAMPER_TOPIC])
    prefix = partition_prefix(topic.name, 0)
    staged = [p for p in unreferenced_files(lake, topic, 0) if p.endswith(".parquet")]
    path = prefix + staged[0]
    table = read_segment_file(lake.store, path)
    values = table.column("value").to_pylist()
    values[0] = b"tampered"
    table = table.set_column(table.schema.get_field_index("value"), "value", pa.array(values, pa.binary()))
    lake.store.write(path, encode_segment_file(table, read_file_meta(lake.store, path)))
