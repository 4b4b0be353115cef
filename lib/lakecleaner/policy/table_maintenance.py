"""When table maintenance rewrites a partition of the latest-values table (issue 80): a decision
from the partition's file counts, row counts, delete-file age, the config and `now`; no I/O.

A merge-on-read sync adds a small data file and a position-delete file per commit. Two rewrites
keep a sync's cost and the stored bytes bounded (Iceberg's rewrite-data-files and
rewrite-position-deletes, Hudi's compaction of log files):

* **minor** — once a partition holds `MAX_FILES` files, every data file but the largest (the
  batches appended since the last rewrite) is rewritten into one without its dead rows, and the
  delete files into one for the largest: work in proportion to the commits since, run by the sync
  itself, so that a sync never reads more than `MAX_FILES` files;
* **major** — the whole partition rewritten without dead rows, by the DAG's report step (and
  `lakecleaner iceberg compact`), when its dead rows pass `DEAD_SHARE` of its live rows, or when a
  hidden row's physical removal is due: its delete file is older than `max.compaction.lag.ms`
  (KIP-354, the bound the log's superseded records have; `policy.erasure.hidden_deadline`).
"""

from __future__ import annotations

from lakecleaner.config import LONG_MAX, TopicConfig

#: Files (data and delete) of a partition at which a minor rewrite folds the batches.
MAX_FILES = 16
#: The share of a partition's live rows its dead rows may reach before a major rewrite (the
#: dead-ratio issue 79 gives segments; Kafka's `min.cleanable.dirty.ratio` is its log's).
DEAD_SHARE = 0.3


def minor_due(data_files: int, delete_files: int) -> bool:
    """Whether a partition with these file counts folds its batches (a minor rewrite)."""
    return data_files > 1 and data_files + delete_files >= MAX_FILES


def major_reason(
    live_rows: int, dead_rows: int, oldest_delete_ms: int | None, config: TopicConfig, now_ms: int
) -> str | None:
    """Why the whole partition is rewritten now (a major rewrite), None when it is not."""
    if oldest_delete_ms is None:
        return None
    lag = config.max_compaction_lag_ms
    if lag != LONG_MAX and oldest_delete_ms + lag <= now_ms:
        return f"a row hidden since {oldest_delete_ms} ms is due for removal (max.compaction.lag.ms {lag})"
    if dead_rows > DEAD_SHARE * max(live_rows, 0):
        return f"{dead_rows} dead rows exceed {DEAD_SHARE:.0%} of {live_rows} live rows"
    return None


__all__ = ["DEAD_SHARE", "MAX_FILES", "major_reason", "minor_due"]
