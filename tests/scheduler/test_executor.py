"""The executor docker-compose and `make airflow-ui` name (`orchestration.executor`): the scheduler
loads lakecleaner's task modules and Great Expectations before it forks LocalExecutor's workers, so
a task, forked from a worker, does not import them again."""

from __future__ import annotations

import time
from pathlib import Path

import psutil

from tests.scheduler.conftest import World

#: Compiled modules, mapped into a process that loaded them, which Airflow's scheduler does not load
#: itself: pandas', which only GX's warm-up loads (GX runs on pandas), and pyarrow's, which the
#: preloaded task modules load (`executor.PRELOADED`).
LOADED_BY_WARM_UP = "pandas/_libs/lib.cpython"
LOADED_BY_TASK_MODULES = "pyarrow/lib.cpython"


def executor_workers(world: World, timeout_s: float = 60) -> list[psutil.Process]:
    """The scheduler's LocalExecutor workers (their title names the executor)."""
    scheduler = psutil.Process(world.airflow.processes["scheduler"].pid)
    deadline = time.monotonic() + timeout_s
    while True:
        workers = [p for p in scheduler.children(recursive=True) if "LocalExecutor" in " ".join(p.cmdline())]
        if workers or time.monotonic() > deadline:
            return workers
        time.sleep(1)


def has_loaded(process: psutil.Process, module: str) -> bool:
    return module in Path(f"/proc/{process.pid}/maps").read_text()


def test_every_executor_worker_starts_with_the_task_modules_and_great_expectations_loaded(world: World) -> None:
    workers = executor_workers(world)
    assert len(workers) == int(world.airflow.env()["AIRFLOW__CORE__PARALLELISM"]), world.diagnostics()
    for module in (LOADED_BY_WARM_UP, LOADED_BY_TASK_MODULES):
        assert all(has_loaded(w, module) for w in workers), (module, [w.cmdline() for w in workers])
    # the DAG processor, which forks the processes that parse DAG files, runs no executor: none of it
    dag_processor = psutil.Process(world.airflow.processes["dag-processor"].pid)
    assert not has_loaded(dag_processor, LOADED_BY_WARM_UP)
