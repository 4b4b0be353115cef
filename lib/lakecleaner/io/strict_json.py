"""Strict decoding of the JSON objects lakecleaner keeps in the lake (manifests, topic metadata,
consumer offsets, cleaner state).

Storage is untrusted input. Python's `json` accepts what no writer of ours produces: NaN and
Infinity, integers of any size, `1e999` (a float that overflows to infinity), nesting deep enough
to exhaust the interpreter's stack. And `int(x)`, `str(x)` and `bool(x)` coerce whatever they are
given (`bool("false")` is True). A decoder built on `Fields` instead reads each field with its exact
JSON type:
- a bool is a JSON bool;
- an integer is a JSON integer (never a bool, never a float) within the field's bounds;
- a string is a string, a list a list, an object an object.
The first field that breaks its schema raises `Malformed`, naming the field's path
(`segments[3].files[0].size_bytes`). The caller turns it into its object's `Corrupt…` error, which
names the object and the fix, so whatever a stored object holds, reading it gives the object or that
one error.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from lakecleaner.config import LONG_MAX  # Kafka's offsets and timestamps are Java longs

#: No stored object of ours comes near this; a larger one is damage (or an attack), not a manifest.
MAX_OBJECT_BYTES = 256 * 1024 * 1024
_MISSING: Any = object()


class Malformed(ValueError):
    """A stored JSON object that breaks its schema (the message names the field)."""


def _reject_constant(name: str) -> Any:
    raise Malformed(f"{name} is not a JSON number")


def _reject_float(text: str) -> Any:
    raise Malformed(f"{text} is not an integer (no field of this object holds a fraction)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise Malformed(f"{text} is too large for a number")
    return value


def load_object(data: bytes, *, max_bytes: int = MAX_OBJECT_BYTES, fractions: bool = False) -> Fields:
    """Parse `data` as one JSON object (no NaN/Infinity; no fractions unless `fractions`, and
    then finite ones); Malformed otherwise."""
    if len(data) > max_bytes:
        raise Malformed(f"{len(data)} bytes, more than the {max_bytes} such an object may have")
    try:
        parse_float = _finite_float if fractions else _reject_float
        raw = json.loads(data, parse_constant=_reject_constant, parse_float=parse_float)
    except Malformed:
        raise
    except RecursionError:
        raise Malformed("nested deeper than any object of ours") from None
    except UnicodeDecodeError as exc:
        raise Malformed(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise Malformed(f"not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise Malformed(f"not JSON that this object may hold ({str(exc)[:100]})") from None
    if not isinstance(raw, dict):
        raise Malformed(f"the top level is a JSON {_kind(raw)}, not an object")
    return Fields(raw, "")


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "list" if isinstance(value, list) else "object"


class Fields:
    """A JSON object's fields, each read with its exact type; `where` is the object's path."""

    def __init__(self, raw: Mapping[str, Any], where: str) -> None:
        self.raw, self.where = raw, where

    def _path(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def _get(self, key: str, default: Any) -> Any:
        if key in self.raw:
            return self.raw[key]
        if default is _MISSING:
            raise Malformed(f"field {self._path(key)} is missing")
        return default

    def _wrong(self, key: str, value: object, expected: str) -> Malformed:
        return Malformed(f"field {self._path(key)} is a JSON {_kind(value)}, not {expected}")

    def integer(self, key: str, *, lo: int = 0, hi: int = LONG_MAX, default: Any = _MISSING) -> int:
        """An integer field in [lo, hi]."""
        value = self._get(key, default)
        if type(value) is not int:
            raise self._wrong(key, value, "an integer")
        if not lo <= value <= hi:
            raise Malformed(f"field {self._path(key)} is {value}, outside [{lo}, {hi}]")
        return value

    def optional_int(self, key: str, *, lo: int = 0, hi: int = LONG_MAX) -> int | None:
        """An integer field in [lo, hi], or None when it is null or absent."""
        return None if self.raw.get(key) is None else self.integer(key, lo=lo, hi=hi)

    def text(self, key: str, *, default: Any = _MISSING, max_chars: int = 1 << 20) -> str:
        value = self._get(key, default)
        if not isinstance(value, str):
            raise self._wrong(key, value, "a string")
        if len(value) > max_chars:
            raise Malformed(f"field {self._path(key)} has {len(value)} characters, more than {max_chars}")
        return value

    def optional_text(self, key: str) -> str | None:
        """A string, or None when the field is null or absent."""
        return None if self._get(key, None) is None else self.text(key)

    def flag(self, key: str, *, default: Any = _MISSING) -> bool:
        value = self._get(key, default)
        if not isinstance(value, bool):
            raise self._wrong(key, value, "true or false")
        return value

    def objects(self, key: str, *, default: Any = _MISSING) -> list[Fields]:
        """A list of objects (null or absent: `default`)."""
        value = self._get(key, default)
        if value is None and default is not _MISSING:
            value = default
        if not isinstance(value, list):
            raise self._wrong(key, value, "a list")
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                raise Malformed(f"field {self._path(key)}[{i}] is a JSON {_kind(item)}, not an object")
        return [Fields(item, f"{self._path(key)}[{i}]") for i, item in enumerate(value)]

    def object(self, key: str, *, default: Any = _MISSING) -> Fields:
        """An object field (null or absent: `default`, a mapping)."""
        value = self._get(key, default)
        if value is None and default is not _MISSING:
            value = default
        if not isinstance(value, Mapping):
            raise self._wrong(key, value, "an object")
        return Fields(value, self._path(key))

    def optional_object(self, key: str) -> Fields | None:
        return None if self.raw.get(key) is None else self.object(key)

    def strings(self, key: str, *, default: Any = _MISSING) -> dict[str, str]:
        """An object whose every value is a string (null or absent: `default`)."""
        fields = self.object(key, default=default)
        return {k: fields.text(k) for k in fields.raw}

    def names(self) -> list[str]:
        """The object's field names."""
        return list(self.raw)

    def number(self, key: str) -> float:
        """A finite number field (an integer or a fraction)."""
        value = self._get(key, _MISSING)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise self._wrong(key, value, "a finite number")
        return float(value)


__all__ = ["LONG_MAX", "Fields", "Malformed", "load_object"]
