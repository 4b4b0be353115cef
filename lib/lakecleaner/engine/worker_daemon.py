"""The Python daemon of a Spark server that runs lakecleaner's engine: pyspark's own daemon
(`pyspark.daemon`), which first imports what the engine's tasks use, Great Expectations above all.

Spark starts one daemon per Python environment and forks every Python worker from it, so the
workers start with those modules already loaded: the quality gate's validations, which a Spark
Connect client sends to the server's workers, no longer pay GX's seconds of import in each run.
Set with `spark.python.daemon.module=lakecleaner.engine.worker_daemon` (`lakecleaner
connect-server` does); nothing else changes, and on any error the daemon is pyspark's own.
"""

from __future__ import annotations

import contextlib
import sys

PRELOADED = ("lakecleaner.engine.quality", "lakecleaner.engine.recopy")


def preload() -> None:
    """Import `PRELOADED`, then Great Expectations (through `lakecleaner.quality`, as every import
    of it) with the process's GX context and a first validation. The daemon tells Spark its port
    on stdout, so anything the imports print goes to stderr."""
    import importlib

    with contextlib.redirect_stdout(sys.stderr):
        for name in PRELOADED:
            importlib.import_module(name)
        from lakecleaner.quality import warm_up

        warm_up()


if __name__ == "__main__":
    from pyspark import daemon

    try:
        preload()
    except Exception as exc:  # the daemon must start anyway: the workers import on first use
        print(f"lakecleaner worker daemon: preloading failed ({exc}); workers import on first use", file=sys.stderr)
    daemon.manager()
