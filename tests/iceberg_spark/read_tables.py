"""Read Iceberg tables with Spark and Apache Iceberg's own runtime, in the Spark 4.1 environment
of this folder (`uv run --project tests/iceberg_spark`), for `tests/support/spark_iceberg_reader.py`.

Reads a JSON request on stdin — `{"jars": [...], "conf": {...}, "tables": [...], "out": path}` —
and writes each table's rows to `out` as JSON, bytes as `{"$bytes": base64}`."""

from __future__ import annotations

import base64
import json
import sys
from typing import Any

from pyspark.sql import SparkSession


def plain(value: Any) -> Any:
    """A Spark value as JSON: rows and structs as objects, bytes tagged."""
    if isinstance(value, (bytes, bytearray)):
        return {"$bytes": base64.b64encode(bytes(value)).decode()}
    if hasattr(value, "asDict"):
        return {k: plain(v) for k, v in value.asDict().items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def main() -> None:
    request = json.load(sys.stdin)
    builder = SparkSession.builder.master("local[1]").appName("iceberg-reader")
    builder = builder.config("spark.jars", ",".join(request["jars"])).config("spark.ui.enabled", "false")
    builder = builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
    for key, value in request["conf"].items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    read = {table: [plain(row) for row in spark.table(table).collect()] for table in request["tables"]}
    with open(request["out"], "w") as out:
        json.dump(read, out)
    spark.stop()


if __name__ == "__main__":
    main()
