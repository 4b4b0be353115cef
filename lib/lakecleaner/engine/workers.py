"""What the engine asks of the Python workers that run its tasks, on every kind of session.

The workers inherit `WORKER_ENV`: a classic session that lakecleaner builds
(`engine.session.build_session`: the CLI's `compact`, the spark-submit job) sets it as
`spark.executorEnv.*` (`worker_conf`), which reaches the Python workers of local[*] and of a
cluster's executors alike; `lakecleaner connect-server` puts it in the server's environment and
its conf. A session built elsewhere can add `worker_conf()` to its builder.

Arrow's allocator in the workers is mimalloc (pyarrow's default on Linux), which gives memory a
thread freed back to the operating system once its `purge_delay` has passed (1000 ms in pyarrow
26's mimalloc 3.4), and does so lazily: at the thread's next allocation after that. An idle
worker therefore kept all it used until its next task (measured: 420 MB resident through 7 s of
idleness), then gave most of it back as the task started and faulted it in again while the task
ran; faulting memory in is dear on a virtual machine (the bench's incremental compaction, 6 s
between runs: median 2.63 s with 1000 ms, 2.22 s without purging). With a purge delay of an hour,
longer than a worker lives idle (Spark ends it a minute after its last task,
`PythonWorkerFactory`), mimalloc never gives back on its own: a worker reuses what it freed, and
gives it back when the engine asks, after each item of a task whose items run one after another
(`engine.memory.give_back`), which mimalloc honours only when purging is allowed at all (a delay
of -1 forbids it: asking freed nothing).

numpy asks the kernel for transparent huge pages (`madvise(MADV_HUGEPAGE)`) for each array of
4 MB and more, so each first touch of such an array's memory zeroes 2 MiB at once. A worker
gives its memory back after each item and so touches fresh memory in every item, where a huge
page is the dearer kind on a virtual machine whose host takes back what the guest frees (free
page reporting hands the host whole 2 MiB blocks). Measured on the bench's machine
(bench/README.md, session 45): hashing 2.86M keys after a give-back and a 3 s pause took
0.47-0.91 s with huge pages and 0.16-0.24 s without (on memory in use, 0.10-0.14 s against
0.17-0.20), and the high-cardinality case's (a) 18.5-19.3 s against 21.1-22.5 s, its peak memory
alike. So the workers' numpy asks for none (`NUMPY_MADVISE_HUGEPAGE=0`, read as numpy is
imported); a session's own `spark.executorEnv.NUMPY_MADVISE_HUGEPAGE` wins, for a host where
huge pages pay.
"""

from __future__ import annotations

#: The environment of the Python workers that run the engine's tasks.
WORKER_ENV = {"MIMALLOC_PURGE_DELAY": "3600000", "NUMPY_MADVISE_HUGEPAGE": "0"}


def worker_conf() -> dict[str, str]:
    """The Spark settings that give a session's Python workers `WORKER_ENV`."""
    return {f"spark.executorEnv.{name}": value for name, value in WORKER_ENV.items()}
