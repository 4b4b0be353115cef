"""A Spark Connect server for lakecleaner: pyspark's bundled one (`sbin/start-connect-server.sh`),
started with the settings the engine's tasks want on a long-running server.

`lakecleaner connect-server start` and `make spark-connect` use it, and so do the tests and the
docker-compose service (in the foreground). What it adds to Spark's defaults (`SERVER_CONF`):

* `spark.python.daemon.module`: lakecleaner's worker daemon (`engine.worker_daemon`), which
  imports Great Expectations once, before it forks the Python workers;
* `spark.connect.session.manager.defaultSessionTimeout=-1`: lakecleaner's clients share one
  server session (`engine.session.connect_session`), which then stays open however long the
  server waits between runs; Spark closes an idle session after an hour by default;
* the environment the engine wants of its Python workers (`engine.workers.WORKER_ENV`): in the
  server's own environment, which the workers of a local master inherit, and as
  `spark.executorEnv.*` for a cluster's executors.

A client finds the server's parallelism from the server's plan of a range
(`sparkio.parallelism`), with no job and nothing set here.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from lakecleaner.engine.distribution import pyspark_home
from lakecleaner.engine.workers import WORKER_ENV, worker_conf
from lakecleaner.errors import LakeCleanerError

DEFAULT_PORT = 15002
SERVER_CONF = {
    "spark.python.daemon.module": "lakecleaner.engine.worker_daemon",
    "spark.connect.session.manager.defaultSessionTimeout": "-1",
    **worker_conf(),
}


class ConnectServerError(LakeCleanerError):
    """The Spark Connect server could not be started or stopped; the message says why and where its logs are."""


@dataclass(frozen=True)
class ConnectServer:
    """Where the server keeps its logs and pid (`folder`), and how it runs."""

    folder: Path
    port: int = DEFAULT_PORT
    master: str = "local[*]"
    host: str = "127.0.0.1"
    conf: Mapping[str, str] = field(default_factory=dict)
    #: Added to the server's environment, which its Python workers inherit: where the tasks find
    #: the lake's credentials when the lake's settings carry none (as a container's environment).
    env: Mapping[str, str] = field(default_factory=dict)

    @property
    def reachable_host(self) -> str:
        """Where a client on this machine finds the server (0.0.0.0 listens on every address)."""
        return "127.0.0.1" if self.host == "0.0.0.0" else self.host

    @property
    def url(self) -> str:
        return f"sc://{self.reachable_host}:{self.port}"

    def environment(self, *, foreground: bool = False) -> dict[str, str]:
        """Spark's scripts' environment: pyspark's own distribution, this Python and `WORKER_ENV` (unless
        this process's environment or `env` sets it otherwise) for the workers. A server on the
        loopback address keeps its driver there too (SPARK_LOCAL_IP: its UI and block manager would
        otherwise listen on every address), unless the environment names another."""
        loopback = {"SPARK_LOCAL_IP": "127.0.0.1"} if self.host in ("127.0.0.1", "localhost") else {}
        env = {
            **WORKER_ENV,
            **loopback,
            **os.environ,
            "SPARK_HOME": str(pyspark_home()),
            "SPARK_LOG_DIR": str(self.folder / "logs"),
            "SPARK_PID_DIR": str(self.folder / "pid"),
            "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON") or sys.executable,
            **self.env,
        }
        if foreground:
            env["SPARK_NO_DAEMONIZE"] = "1"
        return env

    def start_command(self) -> list[str]:
        """`start-connect-server.sh` with `SERVER_CONF`, then `conf` (which wins)."""
        conf = {
            **SERVER_CONF,
            "spark.connect.grpc.binding.address": self.host,
            "spark.connect.grpc.binding.port": str(self.port),
            **self.conf,
        }
        command = [str(pyspark_home() / "sbin" / "start-connect-server.sh"), "--master", self.master]
        for key, value in conf.items():
            command += ["--conf", f"{key}={value}"]
        return command

    def start(self, *, wait_s: float = 120.0) -> str:
        """Start the server in the background and wait until it listens; its URL."""
        self.folder.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(self.start_command(), env=self.environment(), capture_output=True, text=True)
        if done.returncode != 0:
            raise ConnectServerError(f"start-connect-server.sh failed: {done.stdout}{done.stderr}".strip())
        deadline = time.monotonic() + wait_s
        while not self.listening():
            if time.monotonic() > deadline:
                raise ConnectServerError(
                    f"the Spark Connect server did not listen on {self.host}:{self.port} within {wait_s:.0f} s; "
                    f"see its log in {self.folder / 'logs'}:\n{self.log_tail()}"
                )
            time.sleep(0.5)
        return self.url

    def run_foreground(self) -> NoReturn:
        """Run the server in this process's place (a container's main process)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        os.execve(self.start_command()[0], self.start_command(), self.environment(foreground=True))

    def stop(self) -> None:
        """Stop the server started with this folder (nothing to do when none runs)."""
        stop = [str(pyspark_home() / "sbin" / "stop-connect-server.sh")]
        subprocess.run(stop, env=self.environment(), capture_output=True, text=True, check=False)

    def listening(self) -> bool:
        with socket.socket() as s:
            return s.connect_ex((self.reachable_host, self.port)) == 0

    def log_tail(self, chars: int = 2000) -> str:
        return "".join(p.read_text(errors="replace")[-chars:] for p in sorted((self.folder / "logs").glob("*.out")))
