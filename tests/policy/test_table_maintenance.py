"""When table maintenance rewrites a partition of the latest-values table, and when a row a
position-delete file hides is physically gone (issue 80)."""

from __future__ import annotations

import dataclasses

from lakecleaner.config import HOUR_MS
from lakecleaner.policy.erasure import ErasureContext, hidden_deadline
from lakecleaner.policy.table_maintenance import DEAD_SHARE, MAX_FILES, major_reason, minor_due
from tests.policy.policy_builders import COMPACT

NOW = 100 * HOUR_MS


def test_batches_fold_once_a_partition_holds_max_files_and_more_than_one_data_file() -> None:
    assert not minor_due(MAX_FILES // 2, MAX_FILES // 2 - 1)
    assert minor_due(MAX_FILES // 2, MAX_FILES // 2)
    assert not minor_due(1, MAX_FILES)  # one data file: nothing to fold (a major rewrite's job)


def test_a_major_rewrite_is_due_past_the_dead_share_or_when_a_hidden_row_is_due() -> None:
    assert major_reason(1000, 0, None, COMPACT, NOW) is None  # no delete file
    assert major_reason(1000, int(DEAD_SHARE * 1000), NOW, COMPACT, NOW) is None
    reason = major_reason(1000, int(DEAD_SHARE * 1000) + 1, NOW, COMPACT, NOW)
    assert reason is not None and "dead rows" in reason
    lagged = dataclasses.replace(COMPACT, max_compaction_lag_ms=HOUR_MS)
    assert major_reason(1000, 1, NOW - HOUR_MS + 1, lagged, NOW) is None
    reason = major_reason(1000, 1, NOW - HOUR_MS, lagged, NOW)
    assert reason is not None and "max.compaction.lag.ms" in reason
    assert major_reason(1000, 1, NOW - 1000 * HOUR_MS, COMPACT, NOW) is None  # no lag: no age bound


def test_a_hidden_row_is_gone_by_hidden_plus_lag_plus_a_run_the_delay_and_a_run() -> None:
    lagged = dataclasses.replace(COMPACT, max_compaction_lag_ms=HOUR_MS, file_delete_delay_ms=60_000)
    ctx = ErasureContext(lagged, HOUR_MS, NOW)
    deadline = hidden_deadline(NOW - 10, ctx)
    assert deadline.gone_by_ms == NOW - 10 + HOUR_MS + HOUR_MS + 60_000 + HOUR_MS and deadline.overdue is None
    assert hidden_deadline(NOW - 4 * HOUR_MS, ctx).overdue is not None  # passed
    unbounded = hidden_deadline(NOW, ErasureContext(COMPACT, HOUR_MS, NOW))
    assert unbounded.gone_by_ms is None and "max.compaction.lag.ms" in (unbounded.overdue or "")
