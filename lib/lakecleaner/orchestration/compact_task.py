"""The DAG's `compact` task: the packaged compaction job, on a Spark Connect server or through
spark-submit, chosen by the Airflow connection `spark_lakecleaner`.

* A connection of type `spark_connect` (the Apache Spark provider's type: host, port 15002 by
  default, login = user id, password = token, extra `use_ssl`): the task is a Spark Connect client
  and runs the job in its own Python process (`compact_topic.main` on a Connect session), so a run
  starts no JVM. The provider's URL rules are followed (`connect_url_from_connection`).
* A connection of type `spark` (host with scheme, e.g. `spark://spark-master` with port 7077, or
  `local[*]`, `yarn`, `k8s://https://host`; extra `deploy-mode`, `spark-binary`), read the way
  the provider reads one: spark-submit of the packaged job.
* No connection: the config file's `spark.remote` when set, else spark-submit to its `spark.master`.

The provider itself is not a dependency: its 6.x depends on `pyspark-client`, which installs into
the same `pyspark` package as the full pyspark that local[*] and spark-submit need, and pip cannot
be told to leave it out. spark-submit runs through the standard provider's SubprocessHook (output
streamed into the task log, SIGTERM to the process group when the task is killed); for every
master but local (`spark.ship_package`) the package goes to the executors as a zip in --py-files.
spark-submit is `$SPARK_HOME/bin/spark-submit` when SPARK_HOME is set, else the one pyspark ships.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urlparse

from airflow.providers.standard.hooks.subprocess import SubprocessHook
from airflow.sdk import BaseHook, BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowNotFoundException
from airflow.sdk.log import mask_secret

from lakecleaner.config import SparkSettings, spark_loopback_env
from lakecleaner.engine.distribution import submit_home
from lakecleaner.engine.driver_jvm import driver_conf
from lakecleaner.engine.shipping import package_zip
from lakecleaner.errors import SparkNotInstalled

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SPARK_CONNECT = "spark_connect"

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


def connect_url_from_connection(
    host: str | None, port: int | None, login: str | None, password: str | None, extra: Mapping[str, Any]
) -> str:
    """The Spark Connect URL of a `spark_connect` connection, as the provider's SparkConnectHook
    builds it: sc://host:port/;user_id=login;token=password;use_ssl=extra's use_ssl. Unlike the
    provider, values are percent-encoded with no safe characters: a "/" left in a token would end
    the URL's parameters early when pyspark parses it."""
    if not host:
        raise ValueError("the Airflow connection of type spark_connect names no host")
    address = host if "://" in host else f"sc://{host}"
    if port:
        address = f"{address}:{port}"
    parsed = urlparse(address)
    if parsed.path:
        raise ValueError(f"a spark_connect connection's host takes no path ({parsed.path!r})")
    params = []
    if login:
        params.append(f"user_id={quote(login, safe='')}")
    if password:
        params.append(f"token={quote(password, safe='')}")
    if extra.get("use_ssl") is not None:
        params.append(f"use_ssl={quote(str(extra['use_ssl']), safe='')}")
    return f"sc://{parsed.netloc}/" + "".join(f";{p}" for p in params)


def connection_of_url(url: str) -> dict[str, Any]:
    """The `spark_connect` Airflow connection (as JSON fields) for a Spark Connect URL: the
    inverse of `connect_url_from_connection`."""
    # As pyspark does: urlparse splits ;params only for http-like schemes.
    parsed = urlparse("http" + url[2:] if url.startswith("sc://") else url)
    if not url.startswith("sc://") or not parsed.hostname:
        raise ValueError(f"{url.split(';')[0]!r} is not a Spark Connect URL such as sc://host:15002")
    params = dict(p.split("=", 1) for p in parsed.params.split(";") if "=" in p)
    connection: dict[str, Any] = {"conn_type": SPARK_CONNECT, "host": parsed.hostname, "port": parsed.port or 15002}
    if "user_id" in params:
        connection["login"] = unquote(params["user_id"])
    if "token" in params:
        connection["password"] = unquote(params["token"])
    if "use_ssl" in params:
        connection["extra"] = {"use_ssl": unquote(params["use_ssl"])}
    return connection


def spark_submit_binary(configured: str | None = None, environ: Mapping[str, str] = os.environ) -> str:
    """The spark-submit to run: the connection's `spark-binary`, else that of the distribution
    `environ` names ($SPARK_HOME's, else pyspark's: `engine.distribution`)."""
    if configured:
        return configured
    try:
        return str(submit_home(environ) / "bin" / "spark-submit")
    except SparkNotInstalled as exc:
        raise AirflowException(str(exc)) from None


def spark_submit_command(
    target: SubmitTarget,
    application: str,
    arguments: Sequence[str],
    *,
    name: str,
    conf: Mapping[str, str],
    py_files: Sequence[str] = (),
    environ: Mapping[str, str] = os.environ,
) -> list[str]:
    """The spark-submit command line: `conf`, and the engine's Java options for the driver where
    neither `conf`, Spark's defaults file nor the Java options of `environ` (spark-submit's
    environment, through which that file is found too) choose them (`engine.driver_jvm`)."""
    command = [spark_submit_binary(target.binary, environ), "--master", target.master, "--name", name]
    if target.deploy_mode:
        command += ["--deploy-mode", target.deploy_mode]
    for key, value in {**driver_conf(conf, environ), **conf}.items():
        command += ["--conf", f"{key}={value}"]
    if py_files:
        command += ["--py-files", ",".join(py_files)]
    return [*command, application, *arguments]


@dataclass(frozen=True)
class ConnectTarget:
    """A Spark Connect server to run the job on (its URL may hold a token: never log it)."""

    url: str


class Compact(BaseOperator):
    """Run the packaged compaction job on the connection's Spark (see the module docstring); fail
    the task when it fails (any partition failed, or the job did not run)."""

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
        self._session: SparkSession | None = None

    def target(self) -> SubmitTarget | ConnectTarget:
        """The connection's Spark, else the config file's spark.remote, else its spark.master."""
        try:
            conn = BaseHook.get_connection(self.conn_id)
        except AirflowNotFoundException:
            if self.spark.remote:
                self.log.info("no Airflow connection %s: using the config's spark.remote", self.conn_id)
                return ConnectTarget(self.spark.remote)
            self.log.info("no Airflow connection %s: using spark.master %s", self.conn_id, self.spark.master)
            return SubmitTarget(self.spark.master)
        if conn.conn_type == SPARK_CONNECT:
            if conn.password:
                mask_secret(conn.password)
            return ConnectTarget(
                connect_url_from_connection(conn.host, conn.port, conn.login, conn.password, conn.extra_dejson)
            )
        return target_from_connection(conn.conn_type, conn.host, conn.port, conn.extra_dejson)

    def execute(self, context: Any) -> None:
        for key, value in self.spark.conf.items():
            if _SECRET_KEY.search(key):
                mask_secret(value)
        target = self.target()
        if isinstance(target, ConnectTarget):
            self.run_on_connect(target)
        else:
            self.spark_submit(target)

    def run_on_connect(self, target: ConnectTarget) -> None:
        """The job in this process, as a client of the server (in lakecleaner's shared session)."""
        from lakecleaner.engine.session import connect_session
        from lakecleaner.spark_jobs.compact_topic import main

        self.log.info("running the compaction on a Spark Connect server (connection %s)", self.conn_id)
        os.environ.update(self.env)
        self._session = connect_session(target.url)
        try:
            status = main(self.arguments, spark=self._session)
        finally:
            self._session.stop()
        if status != 0:
            raise AirflowException("the compaction failed for some partitions; the run report above names them")

    def spark_submit(self, target: SubmitTarget) -> None:
        py_files = [str(package_zip())] if self.spark.ships_package(target.master) else []
        env = {**os.environ, **self.env}
        command = spark_submit_command(
            target,
            self.application,
            self.arguments,
            name=self.name,
            conf=self.spark.conf,
            py_files=py_files,
            environ=env,
        )
        self._hook = SubprocessHook()
        # in the task's working directory, as its other steps run: the hook's default is a temporary one,
        # where a relative lake URI (file://./lake, the sample config's) names another, empty lake
        result = self._hook.run_command(command, env={**env, **spark_loopback_env(target.master, env)}, cwd=os.getcwd())
        if result.exit_code != 0:
            raise AirflowException(f"spark-submit exited with status {result.exit_code}: {result.output}")

    def on_kill(self) -> None:
        if self._session is not None:
            self._session.interruptAll()
        if self._hook is not None:
            self._hook.send_sigterm()  # type: ignore[no-untyped-call]
