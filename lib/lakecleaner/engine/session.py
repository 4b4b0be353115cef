"""The Spark session of a compaction run, for the CLI's `compact` and the spark-submit job: classic
(local[*] or a cluster) or a client of a Spark Connect server."""

from __future__ import annotations

import logging
import os
import sys
import uuid
from collections.abc import Mapping

from pyspark import SparkConf
from pyspark.core.context import SparkContext
from pyspark.sql import SparkSession

from lakecleaner.config import SparkSettings, is_local_master, spark_loopback_env
from lakecleaner.engine.driver_jvm import driver_conf
from lakecleaner.engine.shipping import package_zip
from lakecleaner.engine.workers import worker_conf

PY_FILES = "spark.submit.pyFiles"
log = logging.getLogger(__name__)

#: Names lakecleaner's shared server session: uuid5(SHARED_SESSION_NAMESPACE, "shared/<generation>").
SHARED_SESSION_NAMESPACE = uuid.UUID("6f1c2c3e-3a4d-4f41-9a55-1c7d6c1f0e2b")
#: How many generations of the shared session a client tries before it uses a session of its own.
SHARED_SESSION_GENERATIONS = 32


def build_session(
    settings: SparkSettings, app_name: str, master: str | None = None, remote: str | None = None
) -> SparkSession:
    """A Spark Connect session to `remote` (else the config's spark.remote), when there is one:
    the server's own settings apply and spark.conf is not sent. Otherwise a classic Spark session
    named `app_name`, on `master` (else the config's spark.master), with `session_conf`: the
    engine's settings for its Python workers and its driver's JVM, and the config's spark.conf. What a spark-submit
    already set (its --name, --master and --conf) wins over those defaults. When `settings.ships_package`
    says so for the master, the package zip joins spark.submit.pyFiles, so executors whose Python
    lacks lakecleaner import it from there."""
    url = remote or settings.remote
    if url:
        return connect_session(url)
    submitted = submitted_conf()
    builder = SparkSession.builder
    if not submitted.contains("spark.app.name"):
        builder = builder.appName(app_name)
    chosen = master or submitted.get("spark.master", settings.master)
    for key, value in {**spark_loopback_env(chosen, os.environ), **worker_python_env(chosen, os.environ)}.items():
        os.environ.setdefault(key, value)  # read by pyspark and the JVM it starts for this session
    builder = builder.master(chosen)
    for key, value in session_conf(settings, submitted, not started_by_spark_submit()).items():
        builder = builder.config(key, value)
    py_files = [f for f in submitted.get(PY_FILES, "").split(",") if f]
    if settings.ships_package(chosen) and not any(f.endswith(package_zip().name) for f in py_files):
        builder = builder.config(PY_FILES, ",".join([*py_files, str(package_zip())]))
    return builder.getOrCreate()


def worker_python_env(master: str, environ: Mapping[str, str]) -> dict[str, str]:
    """The interpreter of a local master's Python workers: the driver's own (`sys.executable`, the
    one that imported lakecleaner), unless PYSPARK_PYTHON chooses one or spark-submit started the
    driver (its environment is the caller's). pyspark's default is `python3` from the PATH, which
    outside the environment lakecleaner is installed in has no lakecleaner to unpickle the
    engine's functions; a cluster's workers get the package zip instead (`ships_package`)."""
    if not is_local_master(master) or "PYSPARK_PYTHON" in environ or started_by_spark_submit(environ):
        return {}
    return {"PYSPARK_PYTHON": sys.executable}


def session_conf(settings: SparkSettings, submitted: SparkConf, starts_jvm: bool) -> dict[str, str]:
    """What a classic session lakecleaner builds is configured with: `worker_conf()` where
    spark-submit did not set it (`submitted`, an Airflow connection's --conf), and when the session
    `starts_jvm` (no spark-submit started the driver), the driver's Java options where neither
    spark-submit, the config, Spark's defaults file nor the environment's Java options chose them
    (`driver_jvm.driver_conf`); then the config's spark.conf, which may override them all."""
    engine = {key: value for key, value in worker_conf().items() if not submitted.contains(key)}
    if starts_jvm:
        engine |= driver_conf({key for key, _ in submitted.getAll()} | set(settings.conf))
    return {**engine, **settings.conf}


def submitted_conf() -> SparkConf:
    """What spark-submit set (--master, --name, --conf) when it started this driver, else nothing.

    spark-submit starts the JVM first and hands the Python driver its gateway (PYSPARK_GATEWAY_PORT);
    its settings are the JVM's system properties, which a SparkConf reads only once pyspark has
    connected to that JVM, so connect first. Without it the builder's master and name would
    override spark-submit's (a `spark` connection's master ignored for the config's spark.master).
    Outside spark-submit no JVM is started here: the builder's settings (driver memory among them)
    must be there when it starts."""
    if not started_by_spark_submit():
        return SparkConf(loadDefaults=False)
    SparkContext._ensure_initialized()  # connects to spark-submit's JVM
    return SparkConf()


def started_by_spark_submit(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether spark-submit started this driver's JVM and handed this process its gateway."""
    return "PYSPARK_GATEWAY_PORT" in environ


def shared_session_id(generation: int) -> str:
    return str(uuid.uuid5(SHARED_SESSION_NAMESPACE, f"shared/{generation}"))


def connect_session(url: str) -> SparkSession:
    """A client of the Spark Connect server at `url`, in lakecleaner's shared server session.

    Every run joins the same server-side session instead of opening its own, and leaves it open
    when it stops. Spark (4.3, SPARK-54055) starts a Python worker daemon per server session and
    never stops it, so a session per run would leave a daemon behind on the server at every run;
    and the shared session's daemon, lakecleaner's (`engine.worker_daemon`), has Great
    Expectations loaded for every run after the first. The engine sets no session state (no
    configuration, views or caches), so runs sharing a session do not see each other.

    A URL that names its own `session_id` is used as it is. When the server has closed the
    shared session (it was idle past spark.connect.session.manager.defaultSessionTimeout, and
    Spark never lets a closed session's id be used again), the client moves on to the next
    generation; after `SHARED_SESSION_GENERATIONS` it opens a session of its own, released at stop.
    """
    if "session_id=" in url:
        return SparkSession.builder.remote(url).getOrCreate()
    base = url if ";" in url else url.rstrip("/") + "/"
    for generation in range(SHARED_SESSION_GENERATIONS):
        session = SparkSession.builder.remote(f"{base};session_id={shared_session_id(generation)}").create()
        session.release_session_on_close = False  # type: ignore[attr-defined]  # a Connect session's
        if _usable(session):
            return session
        session.stop()
    log.warning(
        "the first %d generations of lakecleaner's shared Spark Connect session are closed on the server; "
        "this run uses a session of its own (restart the server to share one again)",
        SHARED_SESSION_GENERATIONS,
    )
    return SparkSession.builder.remote(url).create()


def _usable(session: SparkSession) -> bool:
    """Whether the server accepts requests in this session (not one it has closed)."""
    from pyspark.errors.exceptions.connect import SparkConnectGrpcException

    try:
        return bool(session.version)
    except SparkConnectGrpcException as exc:
        if "SESSION_CLOSED" in str(exc.getCondition() or exc):
            return False
        raise
