"""Where Spark's distribution is: the one pyspark installs, or the one SPARK_HOME names.

spark-submit, its defaults file (conf/spark-defaults.conf) and the Connect server's scripts (sbin/)
live in a Spark distribution. pyspark's wheel is one; SPARK_HOME, when set, names the one a
deployment chose, and Spark's own scripts use it in preference (bin/find-spark-home).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from pathlib import Path

from lakecleaner.errors import SparkNotInstalled


def pyspark_home() -> Path:
    """pyspark's own distribution, found without importing pyspark (whose import takes a second)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise SparkNotInstalled("pyspark is not installed: install lakecleaner[spark]")
    return Path(next(iter(spec.submodule_search_locations)))


def submit_home(environ: Mapping[str, str] = os.environ) -> Path:
    """The distribution spark-submit runs from in `environ`: $SPARK_HOME when set, else pyspark's."""
    if environ.get("SPARK_HOME"):
        return Path(environ["SPARK_HOME"])
    try:
        return pyspark_home()
    except SparkNotInstalled as exc:  # here another distribution serves as well
        raise SparkNotInstalled(f"spark-submit not found: {exc}, or set SPARK_HOME to a Spark distribution") from None
