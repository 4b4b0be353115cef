"""Retention execution: apply the policy's retention plans, trim, and delete files physically."""

from lakecleaner.retention.executor import (
    PartitionRetentionResult,
    RetentionRunReport,
    retain_partition,
    retain_topic,
    trim_partition,
)
from lakecleaner.retention.gc import GcResult, GcRunReport, collect_garbage, gc_topic

__all__ = [
    "GcResult",
    "GcRunReport",
    "PartitionRetentionResult",
    "RetentionRunReport",
    "collect_garbage",
    "gc_topic",
    "retain_partition",
    "retain_topic",
    "trim_partition",
]
