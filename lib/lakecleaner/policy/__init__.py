"""The cleaning and retention policy: everything that decides WHAT is due, with no I/O.

Every function here is pure: it reads manifests, a topic's effective config and consumer
positions, and takes "now" as a parameter (the DAG run's `data_interval_end`), so a plan is
deterministic and can be recomputed at any time. The modules follow Kafka's split:

- `roll`: the idle roll of an active segment (★ KIP-354's forced roll without an append);
- `cleanable`: the cleanable range, dirty ratio and eligibility (LogCleanerManager);
- `selection`: which eligible partitions a run compacts, in which order;
- `retention`: which segments leave the log (UnifiedLog.deleteOldSegments, plus KIP-68);
- `trim`: DeleteRecords (moving the log start offset);
- `metrics`: the cleaner's exported gauges and the KIP-354 deletion deadline;
- `plan`: one plan per partition and per topic, combining the above;
- `render`: a rich table of a topic plan (imported on its own so the DAGs need not load rich).
"""

from lakecleaner.policy.plan import PartitionPlan, TopicPlan, plan_partition, plan_topic

__all__ = ["PartitionPlan", "TopicPlan", "plan_partition", "plan_topic"]
