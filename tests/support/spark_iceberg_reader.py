"""Spark with Apache Iceberg's own runtime as a reader of lakecleaner's tables (issue 48).

Iceberg publishes no Spark runtime for the project's Spark (4.3) yet, so the reader runs Spark
4.1 in its own environment (`tests/iceberg_spark/`, locked by its uv.lock) with the jars
`lakecleaner.iceberg.spark_catalog.SPARK_PACKAGES` names, fetched from Maven Central once
(`tests/support/maven.py`), configured by `spark_catalog_conf`: what `lakecleaner iceberg status` tells a
user to give Spark is what the test gives it."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lakecleaner.dev.maven import fetched_jars
from lakecleaner.iceberg.catalog import CATALOG_NAME
from lakecleaner.iceberg.spark_catalog import SPARK_PACKAGES, spark_catalog_conf

PROJECT = Path(__file__).parents[1] / "iceberg_spark"


def spark_read(properties: Mapping[str, str], tables: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """Each table's rows (`namespace.table` in the catalog of pyiceberg `properties`) as Spark
    with Iceberg's runtime reads them, bytes as bytes."""
    jars = sorted(str(p) for p in fetched_jars("iceberg-spark-1.12.0", SPARK_PACKAGES).glob("*.jar"))
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "read.json"
        request = {
            "jars": jars,
            "conf": spark_catalog_conf(properties),
            "tables": [f"{CATALOG_NAME}.{t}" for t in tables],
            "out": str(out),
        }
        environment = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK", "SPARK_", "VIRTUAL_ENV"))}
        if "SPARK_SUBMIT_OPTS" in os.environ:  # the suite's JVM options (tests/conftest.py), not the project's Spark
            environment["SPARK_SUBMIT_OPTS"] = os.environ["SPARK_SUBMIT_OPTS"]
        uv = os.environ.get("UV") or shutil.which("uv") or "uv"  # `uv run` names itself in UV
        command = [uv, "run", "--frozen", "--project", str(PROJECT), "python", str(PROJECT / "read_tables.py")]
        done = subprocess.run(
            command, input=json.dumps(request), capture_output=True, text=True, timeout=600, env=environment
        )
        if done.returncode != 0:
            raise AssertionError(f"Spark could not read {list(tables)}: {done.stderr[-4000:]}")
        read = json.loads(out.read_text())
    return {table.removeprefix(f"{CATALOG_NAME}."): [_bytes(row) for row in rows] for table, rows in read.items()}


def _bytes(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"$bytes"}:
            return base64.b64decode(value["$bytes"])
        return {k: _bytes(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_bytes(v) for v in value]
    return value
