"""How lakecleaner's own processes (the CLI, the spark-submit job) end, and how a child of one
that hangs is ended so that it shows where it was."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
from typing import Any, NoReturn

#: What a child's environment needs for `end_showing_stacks` to show its threads: Python's
#: faulthandler, which prints every thread's stack to stderr on SIGABRT.
SHOWS_STACKS = {"PYTHONFAULTHANDLER": "1"}
#: Seconds a child told to abort has to print its stacks before it is killed.
STACKS_WAIT_S = 15


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


def end_showing_stacks(child: subprocess.Popen[Any], wait_s: float = STACKS_WAIT_S) -> None:
    """End a hung child started with `SHOWS_STACKS` in its environment: SIGABRT, on which it prints
    every thread's stack to its stderr and dies, then SIGKILL if it still runs after `wait_s`.
    Someone must read the child's output meanwhile (another thread, `communicate`): a child whose
    pipe is full cannot print. A hang killed without its stacks leaves only its arguments behind
    (a CLI run in CI, killed after 120 s with nothing on stdout or stderr)."""
    if child.poll() is not None:
        return
    child.send_signal(signal.SIGABRT)
    try:
        child.wait(wait_s)
    except subprocess.TimeoutExpired:
        child.kill()
