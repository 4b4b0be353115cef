"""Profiles of the engine's task items, to find where a partition's time goes in Spark's workers:
with LAKECLEANER_PROFILE_DIR set in the workers' environment (a local session's workers inherit
the driver's; on a cluster `spark.executorEnv.LAKECLEANER_PROFILE_DIR`), every item a task runs is
profiled with cProfile and its statistics written to `<dir>/<pid>-<n>.prof` (pstats reads them).
Unset, an item runs as it is: nothing is imported or timed."""

from __future__ import annotations

import cProfile
import itertools
import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from lakecleaner.config import ENV_PROFILE_DIR

T = TypeVar("T")
R = TypeVar("R")

_SEQUENCE = itertools.count()


def profiled(fn: Callable[[T], R]) -> Callable[[T], R]:
    """`fn` itself, or, when LAKECLEANER_PROFILE_DIR names a directory, `fn` profiled call by
    call, each call's statistics in a file of their own there (made if missing)."""
    folder = os.environ.get(ENV_PROFILE_DIR)
    if not folder:
        return fn

    def run(item: T) -> R:
        profile = cProfile.Profile()
        try:
            return profile.runcall(fn, item)
        finally:
            Path(folder).mkdir(parents=True, exist_ok=True)
            profile.dump_stats(Path(folder) / f"{os.getpid()}-{next(_SEQUENCE)}.prof")

    return run
