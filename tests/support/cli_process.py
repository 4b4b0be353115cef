"""The `lakecleaner` CLI as a child process of a test, with a hang made readable.

A child that outlives its timeout is sent SIGABRT with PYTHONFAULTHANDLER set, so it prints every
thread's stack before it dies, and the test fails with those stacks: a CLI run that hung once in
CI (a one-record `produce`, killed after 120 s with nothing on stdout or stderr) otherwise leaves
only its arguments behind.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import overload

from lakecleaner.process import SHOWS_STACKS, end_showing_stacks

CLI = (sys.executable, "-m", "lakecleaner.cli")


@overload
def run_cli(
    *args: str,
    timeout: float = ...,
    input: str | None = ...,
    cwd: Path | None = ...,
    env: Mapping[str, str] | None = ...,
) -> subprocess.CompletedProcess[str]: ...


@overload
def run_cli(
    *args: str,
    timeout: float = ...,
    input: bytes,
    cwd: Path | None = ...,
    env: Mapping[str, str] | None = ...,
) -> subprocess.CompletedProcess[bytes]: ...


def run_cli(
    *args: str,
    timeout: float = 120,
    input: str | bytes | None = None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str] | subprocess.CompletedProcess[bytes]:
    """`lakecleaner ARGS` to its end (stdout and stderr captured: text, or bytes when `input` is),
    or a failure that shows where each of its threads was when `timeout` seconds had passed."""
    command = [*CLI, *args]
    environment = {**(os.environ if env is None else env), **SHOWS_STACKS}
    with subprocess.Popen(
        command,
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=not isinstance(input, bytes),
        cwd=cwd,
        env=environment,
    ) as child:
        try:
            out, err = child.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"`lakecleaner {' '.join(args)}` ran past {timeout} s:\n{_stacks(child)}") from None
        return subprocess.CompletedProcess(command, child.returncode, out, err)


def _stacks(child: subprocess.Popen[str] | subprocess.Popen[bytes]) -> str:
    """What a hung child printed once told to abort (`process.end_showing_stacks`)."""
    ending = threading.Thread(target=end_showing_stacks, args=(child,))
    ending.start()
    out, err = child.communicate()
    ending.join()
    shown = [part.decode(errors="replace") if isinstance(part, bytes) else part for part in (out or "", err or "")]
    return f"stdout:\n{shown[0]}\nstderr (with the threads' stacks):\n{shown[1]}"
