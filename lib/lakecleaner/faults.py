"""Named crash points, so tests can kill a writer at an exact step without mocking.

Code calls `crash_point("append.after_data_write")` at each step where a crash matters.
A test either sets LAKECLEANER_CRASH_AT=<name> in a child process (the process then exits
at once with status 137, as if killed: no cleanup, no finally blocks), or registers an
in-process hook with `on_crash_point` (which may raise to simulate a failure there).
In production neither is set and a crash point costs one dict lookup.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

ENV_CRASH_AT = "LAKECLEANER_CRASH_AT"
CRASH_EXIT_STATUS = 137

_hooks: dict[str, Callable[[], None]] = {}


def crash_point(name: str) -> None:
    """Exit hard if LAKECLEANER_CRASH_AT names this point; run its registered hook if any."""
    if os.environ.get(ENV_CRASH_AT) == name:
        os._exit(CRASH_EXIT_STATUS)
    hook = _hooks.get(name)
    if hook is not None:
        hook()


@contextmanager
def on_crash_point(name: str, hook: Callable[[], None]) -> Iterator[None]:
    """Run `hook` whenever `crash_point(name)` is reached inside the block."""
    _hooks[name] = hook
    try:
        yield
    finally:
        _hooks.pop(name, None)
