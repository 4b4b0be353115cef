"""The DAG's `compact` task: spark-submit of the packaged compaction job, without the Spark provider.

The Apache Spark provider (6.x) depends on `pyspark-client`, which installs into the same `pyspark`
package as the full pyspark that local[*] and spark-submit need, and pip cannot be told to leave it
out. So the task runs spark-submit itself, through the standard provider's SubprocessHook (output
streamed into the task log, SIGTERM to the process group when the task is killed).

Where it submits to: the Airflow connection `spark_lakecleaner` when it exists, read the way the
Spark provider reads a `spark` connection (host with scheme, e.g. `spark://spark-master` with port
7077, or `local[*]`, `yarn`, `k8s://https://host`; extra `deploy-mode`, `spark-binary`), else the
config file's `spark.master`. For every master but local (`spark.ship_package`), the package goes to
the executors as a zip in --py-files. spark-submit is `$SPARK_HOME/bin/spark-submit` when SPARK_HOME is set,
else the one pyspark ships.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow.providers.standard.hooks.subprocess import SubprocessHook
from airflow.sdk import BaseHook, BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowNotFoundException
from airflow.sdk.log import mask_secret

from lakecleaner.config import SparkSettings
from lakecleaner.spark_jobs import package_zip

#: Conf keys whose values are credentials: masked in the task log (the command is logged).
_SECRET_KEY = re.compile(r"secret|password|token|credential|access\.key|session\.key", re.IGNORECASE)


@dataclass(frozen=True)
class SubmitTarget:
    """Where and how an application is submitted."""

    master: str
    deploy_mode: str | None = None
    binary: str | None = None


def target_from_connection(
    conn_type: str | None, host: str | None, port: int | None, extra: Mapping[str, Any]
) -> SubmitTarget:
    """The provider's reading of a `spark` connection: the host is the master URL (a bare host
    is a standalone master, `spark://host`), the port is appended when given."""
    master = host or ""
    if master and "://" not in master and not master.startswith(("local", "yarn")):
        master = f"spark://{master}"
    if port:
        master = f"{master}:{port}"
    if not master:
        raise ValueError(f"the Airflow connection of type {conn_type} names no Spark master (its host is empty)")
    return SubmitTarget(master, extra.get("deploy-mode") or None, extra.get("spark-binary") or None)


def spark_submit_binary(configured: str | None = None) -> str:
    """The spark-submit to run: the connection's `spark-binary`, else $SPARK_HOME's, else pyspark's."""
    if configured:
        return configured
    if os.environ.get("SPARK_HOME"):
        return str(Path(os.environ["SPARK_HOME"]) / "bin" / "spark-submit")
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise AirflowException("spark-submit not found: install pyspark (lakecleaner[spark]) or set SPARK_HOME")
    return str(Path(next(iter(spec.submodule_search_locations))) / "bin" / "spark-submit")


def spark_submit_command(
    target: SubmitTarget,
    application: str,
    arguments: Sequence[str],
    *,
    name: str,
    conf: Mapping[str, str],
    py_files: Sequence[str] = (),
) -> list[str]:
    """The spark-submit command line."""
    command = [spark_submit_binary(target.binary), "--master", target.master, "--name", name]
    if target.deploy_mode:
        command += ["--deploy-mode", target.deploy_mode]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    if py_files:
        command += ["--py-files", ",".join(py_files)]
    return [*command, application, *arguments]


class SparkSubmit(BaseOperator):
    """Run one spark-submit; fail the task when it exits non-zero."""

    template_fields = ("arguments",)

    def __init__(
        self,
        *,
        application: str,
        arguments: Sequence[str],
        conn_id: str,
        spark: SparkSettings,
        name: str,
        env: Mapping[str, str],
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.application, self.arguments, self.conn_id = application, list(arguments), conn_id
        self.spark, self.name, self.env = spark, name, dict(env)
        self._hook: SubprocessHook | None = None

    def target(self) -> SubmitTarget:
        """The connection's master, else the config file's `spark.master`."""
        try:
            conn = BaseHook.get_connection(self.conn_id)
        except AirflowNotFoundException:
            self.log.info("no Airflow connection %s: using spark.master %s", self.conn_id, self.spark.master)
            return SubmitTarget(self.spark.master)
        return target_from_connection(conn.conn_type, conn.host, conn.port, conn.extra_dejson)

    def execute(self, context: Any) -> None:
        for key, value in self.spark.conf.items():
            if _SECRET_KEY.search(key):
                mask_secret(value)
        target = self.target()
        py_files = [str(package_zip())] if self.spark.ships_package(target.master) else []
        command = spark_submit_command(
            target, self.application, self.arguments, name=self.name, conf=self.spark.conf, py_files=py_files
        )
        self._hook = SubprocessHook()
        result = self._hook.run_command(command, env={**os.environ, **self.env})
        if result.exit_code != 0:
            raise AirflowException(f"spark-submit exited with status {result.exit_code}: {result.output}")

    def on_kill(self) -> None:
        if self._hook is not None:
            self._hook.send_sigterm()  # type: ignore[no-untyped-call]
