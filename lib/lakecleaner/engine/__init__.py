"""The Spark compaction engine: Kafka's log cleaner for logs stored as Parquet segments.

    from lakecleaner.engine import compact_topic, requests_for
    requests = [r for p, m in topic.manifests().items() if (r := requests_for(m, topic.config, now))]
    report = compact_topic(spark, lake, "orders", requests, now)

Modules: `requests` (what to compact), `plan` (groups), `versions` and `offset_map` (pass 1),
`recopy` and `writer` (pass 2), `gate_rows` and `quality` (the Great Expectations gate),
`commit`, `report`, `run` (`compact_topic`), `datasource` (`spark.read.format("lakecleaner")`).

Exports resolve lazily, so Spark's Python workers, which import the task functions, do not
import Great Expectations.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lakecleaner.engine.datasource import LakeDataSource, register_data_source
    from lakecleaner.engine.report import PartitionReport, RunReport, print_report
    from lakecleaner.engine.requests import CompactionRequest, requests_for
    from lakecleaner.engine.run import EngineOptions, compact_topic

_EXPORTS = {
    "CompactionRequest": "requests",
    "requests_for": "requests",
    "EngineOptions": "run",
    "compact_topic": "run",
    "RunReport": "report",
    "PartitionReport": "report",
    "print_report": "report",
    "LakeDataSource": "datasource",
    "register_data_source": "datasource",
}

__all__ = [
    "CompactionRequest",
    "EngineOptions",
    "LakeDataSource",
    "PartitionReport",
    "RunReport",
    "compact_topic",
    "print_report",
    "register_data_source",
    "requests_for",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"lakecleaner.engine.{_EXPORTS[name]}"), name)
