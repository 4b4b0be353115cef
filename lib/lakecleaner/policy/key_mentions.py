"""Whether one of the lake's own files (a run report, the cleaner's state, consumer offsets, the
demo's HTML report) mentions a record's key — which it must never do (the erasure audit reports a
mention as a copy nothing deletes).

Those files are JSON, HTML and short text, full of numbers, times, ETags and ids: a short key
such as `100` occurs in them by chance. A key is mentioned only where it stands as a token: its
bytes neither preceded nor followed by an ASCII letter or digit (where its own first or last
byte is one), and in a JSON file only inside a string (a name or a value, compared after the
JSON escapes are undone, so `\\u00e9` matches `é`): a key leaked by a writer is text, while
sizes, offsets and milliseconds are JSON numbers. A file that is not JSON is searched byte for
byte by the same token rule. Pure: bytes in, a yes or no out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any


def mentions_key(data: bytes, key: bytes) -> bool:
    """Whether `data` (one of the lake's own files) mentions `key` as a token (the rule above)."""
    if not key:
        return False
    try:
        key.decode("utf-8")  # JSON holds text: a key that is no UTF-8 could only be there in an encoding of its own
        document = json.loads(data)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError too
        return _token_pattern(key).search(data) is not None
    return mentioned_in(_strings(document), key)


def mentioned_in(texts: Iterable[str], key: bytes) -> bool:
    """Whether one of `texts` (strings a writer chose) mentions `key` as a token (the rule above)."""
    if not key:
        return False
    pattern = _token_pattern(key)
    return any(pattern.search(text.encode("utf-8", "surrogatepass")) for text in texts)


def _token_pattern(key: bytes) -> re.Pattern[bytes]:
    """The key's bytes, bounded by no ASCII letter or digit on a side where the key has one."""
    before = rb"(?<![A-Za-z0-9])" if key[:1].isalnum() else b""
    after = rb"(?![A-Za-z0-9])" if key[-1:].isalnum() else b""
    return re.compile(before + re.escape(key) + after)


def _strings(document: Any) -> Iterator[str]:
    """Every string of a parsed JSON document, names and values, depth first."""
    stack = [document]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


__all__ = ["mentioned_in", "mentions_key"]
