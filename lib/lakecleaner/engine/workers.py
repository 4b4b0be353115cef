"""What the engine asks of the Python workers that run its tasks, on every kind of session.

The workers inherit `WORKER_ENV`: a classic session that lakecleaner builds
(`engine.session.build_session`: the CLI's `compact`, the spark-submit job) sets it as
`spark.executorEnv.*` (`worker_conf`), which reaches the Python workers of local[*] and of a
cluster's executors alike; `lakecleaner connect-server` puts it in the server's environment and
its conf. A session built elsewhere can add `worker_conf()` to its builder.

Arrow's allocator in the workers is mimalloc (pyarrow's default on Linux). The mimalloc 2 of
earlier pyarrow releases gives memory a thread frees back to the operating system 10 ms later (its
`purge_delay`); a pass-2 task reads and writes a group's files one after another, and the gate
reads them back, each time into memory just given away and faulted in again, which is dear on a
virtual machine. With a second's delay a task reuses what it freed while it runs, and an idle
worker gives it back: 10-20% off the bench's larger compactions for 0.1-0.6 GB more peak memory
(docs/architecture.md, "The workers keep what they free for a second"). pyarrow 26's mimalloc
3.4 waits 1000 ms by default; the setting keeps a second for every pyarrow the project allows.
"""

from __future__ import annotations

#: The environment of the Python workers that run the engine's tasks.
WORKER_ENV = {"MIMALLOC_PURGE_DELAY": "1000"}


def worker_conf() -> dict[str, str]:
    """The Spark settings that give a session's Python workers `WORKER_ENV`."""
    return {f"spark.executorEnv.{name}": value for name, value in WORKER_ENV.items()}
