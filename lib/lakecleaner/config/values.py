"""Value parsers of Kafka's config types (long, double, list, ratio), each returning the value or
raising ValueError with the rule in words, and how an error message shows a value."""

from __future__ import annotations

import difflib
import re
import reprlib
from collections.abc import Callable

#: The largest signed 64-bit integer: Kafka's offsets and timestamps are Java longs.
LONG_MAX = 2**63 - 1
STRATEGIES = ("offset", "timestamp", "header")
POLICIES = ("compact", "delete")

# --------------------------------------------------------------------------------------------
# Value parsers: each returns the parsed value or raises ValueError with the rule in words.


def parse_long(value: object) -> int:
    if isinstance(value, bool):
        raise ValueError("must be an integer, not a boolean")
    if isinstance(value, int):
        result = value
    elif isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
        result = int(value)
    else:
        raise ValueError("must be an integer")
    if not -(2**63) <= result <= LONG_MAX:
        raise ValueError("must fit in a signed 64-bit long")
    return result


def parse_double(value: object) -> float:
    if isinstance(value, bool):
        raise ValueError("must be a number, not a boolean")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise ValueError("must be a number")


def parse_policy(value: object) -> frozenset[str]:
    if isinstance(value, str):
        items = [v.strip().lower() for v in value.split(",")]
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        items = [v.strip().lower() for v in value]
    else:
        raise ValueError("must be a comma-separated list of 'compact' and 'delete'")
    bad = [v for v in items if v not in POLICIES]
    if bad or not items:
        raise ValueError(f"must be a list of 'compact' and 'delete' (got {', '.join(bad) or 'nothing'})")
    return frozenset(items)


def parse_strategy(value: object) -> str:
    if not isinstance(value, str) or value.strip().lower() not in STRATEGIES:
        raise ValueError(f"must be one of {', '.join(STRATEGIES)} (KIP-280)")
    return value.strip().lower()


def parse_string(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError("must be a string")
    return value


def at_least(minimum: int) -> Callable[[object], int]:
    def parse(value: object) -> int:
        result = parse_long(value)
        if result < minimum:
            raise ValueError(f"must be at least {minimum}")
        return result

    return parse


def parse_ratio(value: object) -> float:
    result = parse_double(value)
    if not 0.0 <= result <= 1.0:
        raise ValueError("must be between 0 and 1 inclusive")
    return result


def parse_retention_long(value: object) -> int:
    result = parse_long(value)
    if result < -1:
        raise ValueError("must be -1 (unlimited) or at least 0")
    return result


def did_you_mean(key: str, known: set[str] | list[str]) -> str:
    """A ' (did you mean ...?)' hint for an unknown key, or '' when nothing is close."""
    close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def shown(value: object) -> str:
    """A value as an error message shows it: its repr, cut to a few dozen characters, built without
    walking more of it than it shows (a value of nested aliases may stand for gigabytes)."""
    return _SHOWN.repr(value)


_SHOWN = reprlib.Repr()
_SHOWN.maxstring = _SHOWN.maxother = _SHOWN.maxlong = 60
_SHOWN.maxlevel, _SHOWN.maxlist, _SHOWN.maxdict = 2, 4, 4
