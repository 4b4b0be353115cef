"""How lakecleaner's own processes (the CLI, the spark-submit job) end."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import NoReturn


def exit_flushed(code: int) -> NoReturn:
    """End the process with `code` once stdout, stderr and the logs are flushed, without the
    interpreter's own exit: there, Arrow's thread pools can abort in their C++ static destructors
    ("terminate called without an active exception", apache/arrow#34314), which turned a process
    that had done its work into exit status -6 — for the spark-submit job, a DAG task marked
    failed after its run committed. Call it only once the process's work is done: atexit
    handlers and non-daemon threads do not run after it."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BrokenPipeError):  # the reader left (`| head`): its choice
            stream.flush()
    logging.shutdown()
    os._exit(code)
