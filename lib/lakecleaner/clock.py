"""Time: the wall clock, and parsing a user's `--now` (epoch milliseconds or ISO 8601)."""

from __future__ import annotations

import time
from datetime import UTC, datetime


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def epoch_ms(moment: datetime) -> int:
    """A zone-aware datetime as epoch milliseconds."""
    return int(moment.timestamp() * 1000)


def parse_time_ms(text: str) -> int:
    """Epoch milliseconds from '1700000000000' or an ISO 8601 time ('2026-11-21T10:00:00Z';
    a time without a zone is UTC). Raises ValueError naming the value and both accepted forms."""
    stripped = text.strip()
    if stripped.lstrip("-").isdigit():
        return int(stripped)
    try:
        parsed = datetime.fromisoformat(stripped.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"time {text!r} is neither epoch milliseconds nor ISO 8601 (e.g. 2026-11-21T10:00:00Z)"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return epoch_ms(parsed)
