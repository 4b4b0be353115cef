"""What the engine asks of the Python workers that run its tasks, on every kind of session.

The workers inherit `WORKER_ENV`: a classic session that lakecleaner builds
(`engine.session.build_session`: the CLI's `compact`, the spark-submit job) sets it as
`spark.executorEnv.*` (`worker_conf`), which reaches the Python workers of local[*] and of a
cluster's executors alike; `lakecleaner connect-server` puts it in the server's environment and
its conf. A session built elsewhere can add `worker_conf()` to its builder.

Arrow's allocator in the workers is mimalloc (pyarrow's default on Linux), which gives memory a
thread freed back to the operating system once its `purge_delay` has passed (10 ms in the mimalloc
2 of earlier pyarrow releases, 1000 ms in pyarrow 26's mimalloc 3.4), and does so lazily: at the
thread's next allocation after that. An idle worker therefore keeps all it used until its next
task (measured: 420 MB resident through 7 s of idleness), then gives most of it back as the task
starts and faults it in again while the task runs; faulting memory in is dear on a virtual
machine. With `-1` a worker never gives back what it freed: it reuses it, task after task. It
holds no more while idle than with a delay (it kept it anyway), at most the most one of its tasks
used, which the engine bounds (log.cleaner.dedupe.buffer.size, a row group of a file), and only
until Spark ends it, a minute after its last task (`PythonWorkerFactory`'s idle timeout).
Measured on the bench's incremental compaction, 6 s between runs, eight runs of each alternating:
median 2.63 s with 1000 ms, 2.22 s with -1 (docs/architecture.md, "The workers keep what they
free").
"""

from __future__ import annotations

#: The environment of the Python workers that run the engine's tasks.
WORKER_ENV = {"MIMALLOC_PURGE_DELAY": "-1"}


def worker_conf() -> dict[str, str]:
    """The Spark settings that give a session's Python workers `WORKER_ENV`."""
    return {f"spark.executorEnv.{name}": value for name, value in WORKER_ENV.items()}
