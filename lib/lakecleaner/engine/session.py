"""The Spark session of a compaction run, for the CLI's `compact` and the spark-submit job: classic
(local[*] or a cluster) or a client of a Spark Connect server."""

from __future__ import annotations

from pyspark import SparkConf
from pyspark.sql import SparkSession

from lakecleaner.config import SparkSettings
from lakecleaner.spark_jobs import package_zip

PY_FILES = "spark.submit.pyFiles"


def build_session(
    settings: SparkSettings, app_name: str, master: str | None = None, remote: str | None = None
) -> SparkSession:
    """A Spark Connect session to `remote` (else the config's spark.remote), when there is one:
    the server's own settings apply and spark.conf is not sent. Otherwise a classic Spark session
    named `app_name`, on `master` (else the config's spark.master), with the config's spark.conf.
    What a spark-submit already set (its --name and --master) wins. When `settings.ships_package`
    says so for the master, the package zip joins spark.submit.pyFiles, so executors whose Python
    lacks lakecleaner import it from there."""
    url = remote or settings.remote
    if url:
        return SparkSession.builder.remote(url).getOrCreate()
    submitted = SparkConf()
    builder = SparkSession.builder
    if not submitted.contains("spark.app.name"):
        builder = builder.appName(app_name)
    chosen = master or submitted.get("spark.master", settings.master)
    builder = builder.master(chosen)
    for key, value in settings.conf.items():
        builder = builder.config(key, value)
    py_files = [f for f in submitted.get(PY_FILES, "").split(",") if f]
    if settings.ships_package(chosen) and not any(f.endswith(package_zip().name) for f in py_files):
        builder = builder.config(PY_FILES, ",".join([*py_files, str(package_zip())]))
    return builder.getOrCreate()
