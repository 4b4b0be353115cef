"""Airflow's LocalExecutor, with what lakecleaner's tasks import loaded once, before its workers fork.

A retention task that deletes checks its result first: it imports Great Expectations and runs a
first validation, 4.1 s of CPU, measured in a process that had already imported Airflow
(docs/scaling.md). Every task also imports the DAG module, the task functions and, on an S3 lake,
boto3: another 1.1 s. (The compact task's gate runs on Spark, in the driver spark-submit starts or
in a worker of the Connect server, `engine/worker_daemon`; its Connect client, gRPC, is not loaded
before a fork.) LocalExecutor forks its workers from the scheduler when it starts (the fork start
method, Linux's default) and each task from a worker (`os.fork` in the task supervisor), so a task
inherits whatever the scheduler had imported; Airflow itself is among it, lakecleaner's modules and
GX are not. This executor imports `PRELOADED` and runs `quality.warm_up` in the scheduler before it
forks: every worker, and every task forked from one, starts with them loaded and GX's first
validation done. Only modules are loaded, no configuration is read: each task still parses its DAG
file and reads the config then. Nothing else changes (the same class attributes, queues and slots);
the API server and the DAG processor never start an executor's workers, so they import none of it.

Named in Airflow's config by its path: ``AIRFLOW__CORE__EXECUTOR=lakecleaner.orchestration.executor
.PreloadedLocalExecutor`` (docker-compose.yml, `make airflow-ui`). Where Python starts processes by
`spawn` or `forkserver` instead of `fork`, the workers do not inherit it and import GX on first use.
"""

from __future__ import annotations

import importlib

from airflow.executors.local_executor import LocalExecutor

from lakecleaner.quality import warm_up

#: What every task imports after Airflow: its DAG file's module, the task functions, the S3 store.
PRELOADED = ("lakecleaner.orchestration.dags", "lakecleaner.orchestration.tasks", "lakecleaner.io.s3")


class PreloadedLocalExecutor(LocalExecutor):
    """LocalExecutor whose workers start with lakecleaner's task modules and Great Expectations
    loaded (the module's docstring)."""

    def start(self) -> None:
        """Import `PRELOADED`, load GX and run its first validation (`quality.warm_up`), then start
        the workers."""
        for name in PRELOADED:
            importlib.import_module(name)
        warm_up()
        super().start()
