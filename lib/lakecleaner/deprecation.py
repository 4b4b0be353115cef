"""Deprecations: what lakecleaner still accepts but will stop accepting, said once per process
with what to use instead and the version that removes it (as pyiceberg's `deprecation_message` and
Airflow's `RemovedInAirflow3Warning` do). The warning's class is lakecleaner's own, so a test suite
or an application can turn exactly these into errors
(`-W error::lakecleaner.deprecation.LakeCleanerDeprecationWarning`).
"""

from __future__ import annotations

import threading
import warnings


class LakeCleanerDeprecationWarning(DeprecationWarning):
    """Something lakecleaner will remove: the message names the replacement and the version."""


_WARNED: set[str] = set()
_LOCK = threading.Lock()


def deprecated(what: str, *, instead: str, removed_in: str, stacklevel: int = 3) -> None:
    """Warn, once per process for `what`, that it is deprecated: use `instead`; it goes in
    lakecleaner `removed_in`. `stacklevel` 3 names the caller of the function that calls this."""
    with _LOCK:
        if what in _WARNED:
            return
        _WARNED.add(what)
    message = f"{what} is deprecated and will be removed in lakecleaner {removed_in}: {instead}"
    warnings.warn(message, LakeCleanerDeprecationWarning, stacklevel=stacklevel)


__all__ = ["LakeCleanerDeprecationWarning", "deprecated"]
