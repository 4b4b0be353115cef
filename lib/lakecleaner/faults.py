"""Named crash points, so tests can kill a writer at an exact step without mocking.

Code calls `crash_point("append.after_data_write")` at each step where a crash matters.
A test either sets LAKECLEANER_CRASH_AT=<name> in a child process (the process then exits
at once with status 137, as if killed: no cleanup, no finally blocks), registers an in-process
hook with `on_crash_point` (which may raise to simulate a failure there), or, for a process it
does not control (a spark-submit driver started by Airflow), names hooks in
LAKECLEANER_FAULT_HOOKS="<point>=<module>:<function>[;...]", imported on first use.
In production none is set and a crash point costs two dict lookups.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

ENV_CRASH_AT = "LAKECLEANER_CRASH_AT"
ENV_FAULT_HOOKS = "LAKECLEANER_FAULT_HOOKS"
CRASH_EXIT_STATUS = 137

_hooks: dict[str, Callable[[], None]] = {}


def crash_point(name: str) -> None:
    """Exit hard if LAKECLEANER_CRASH_AT names this point; run its registered hook if any."""
    if os.environ.get(ENV_CRASH_AT) == name:
        os._exit(CRASH_EXIT_STATUS)
    hook = _hooks.get(name) or _env_hooks().get(name)
    if hook is not None:
        hook()


_env_hook_cache: dict[str, dict[str, Callable[[], None]]] = {}


def _env_hooks() -> dict[str, Callable[[], None]]:
    """The hooks LAKECLEANER_FAULT_HOOKS names (parsed and imported once per process)."""
    spec = os.environ.get(ENV_FAULT_HOOKS, "")
    if spec not in _env_hook_cache:
        hooks: dict[str, Callable[[], None]] = {}
        for item in filter(None, (part.strip() for part in spec.split(";"))):
            point, _, target = item.partition("=")
            module, _, function = target.partition(":")
            hooks[point] = getattr(importlib.import_module(module), function)
        _env_hook_cache[spec] = hooks
    return _env_hook_cache[spec]


@contextmanager
def on_crash_point(name: str, hook: Callable[[], None]) -> Iterator[None]:
    """Run `hook` whenever `crash_point(name)` is reached inside the block."""
    _hooks[name] = hook
    try:
        yield
    finally:
        _hooks.pop(name, None)
