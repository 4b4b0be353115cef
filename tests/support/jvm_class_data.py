"""A class-data archive (the JVM's AppCDS) of the Spark classes the suite's JVMs load, made once
per environment and handed to every Spark JVM the tests start.

A Spark driver loads some 17,700 classes at start (a session and one job), 1,200 of them from the
JDK's own archive: parsing and verifying the rest from pyspark's jars is most of the 9-10 s and 11
CPU-seconds a session costs to start on this CI's 2 cores. From an archive
(`-XX:SharedArchiveFile`, mapped rather than parsed) the same start takes about 5 s and 6
CPU-seconds. The archive is made by one short Spark application run through spark-submit with
`-XX:ArchiveClassesAtExit` (the JVM writes it as it exits; about 25 s, while the first tests
run), named by what it depends on (the JDK, and pyspark's jars as installed in this environment),
and kept in the environment (`.venv/`), so a new environment makes its own. A JVM whose class path
differs from the archive's (the Iceberg reader's own Spark 4.1, a changed install) starts without
it: the JVM's CDS log is off, so nothing of that reaches a test's output.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pyspark

#: The JVM's CDS messages (an archive it cannot use) off: they go to the process's stdout.
QUIET = "-Xlog:cds=off,cds+dynamic=off"

#: What the archive's application runs: a session's start, Parquet written and read, a shuffle,
#: a join and a pass through Arrow to Python workers, as the engine's jobs do.
_WORKLOAD = """
import sys
from pyspark.sql import SparkSession, functions as F
spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
path = sys.argv[1]
df = spark.range(2000).select((F.col("id") % 97).alias("key"), F.col("id").alias("offset"))
df.write.mode("overwrite").parquet(path)
read = spark.read.parquet(path)
wins = read.groupBy("key").agg(F.max("offset").alias("offset"))
joined = read.join(wins, ["key", "offset"], "left_semi")
joined.mapInArrow(lambda batches: batches, joined.schema).count()
spark.stop()
"""


def archive_path() -> Path:
    """Where this environment's archive is kept: named by the JDK and pyspark's jars."""
    jars = Path(pyspark.__file__).parent / "jars"
    stamp = f"{_jdk()}|{jars}|{pyspark.__version__}|{jars.stat().st_mtime_ns}"
    return Path(sys.prefix) / f"spark-class-data-{hashlib.sha256(stamp.encode()).hexdigest()[:16]}.jsa"


def _jdk() -> str:
    """The JDK spark-submit runs (`$JAVA_HOME/bin/java`, else `java` on the PATH, as Spark's
    `spark-class` chooses it): its real path and its `release` file (vendor, version), else the
    binary's size and time; read, not run (`java -version` cost 0.1-0.5 s of every pytest start)."""
    home = os.environ.get("JAVA_HOME")
    java = Path(os.path.realpath(Path(home) / "bin" / "java" if home else shutil.which("java") or "java"))
    release = java.parent.parent / "release"
    if release.is_file():
        return f"{java}|{release.read_text()}"
    found = java.stat()
    return f"{java}|{found.st_size}|{found.st_mtime_ns}"


def class_data_options(java_options: str) -> str:
    """`java_options` with this environment's archive added. When there is none yet, it is made
    in the background (a thread the interpreter waits for at exit) while the tests start: the JVMs
    that start before it is renamed into place run without it."""
    path = archive_path()
    if not path.exists():
        threading.Thread(target=_make, args=(path, java_options), name="spark-class-data").start()
    return f"{java_options} -XX:SharedArchiveFile={path} {QUIET}"


def _make(path: Path, java_options: str) -> None:
    """The archive made at `path` (written beside it, then renamed into place); nothing when the
    run fails (the suite then runs without it)."""
    spark_submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    with tempfile.TemporaryDirectory(prefix="spark-class-data-") as folder:
        script, written = Path(folder) / "workload.py", Path(folder) / "classes.jsa"
        script.write_text(_WORKLOAD)
        env = {**os.environ, "SPARK_SUBMIT_OPTS": f"{java_options} -XX:ArchiveClassesAtExit={written} {QUIET}"}
        done = subprocess.run(
            [str(spark_submit), "--master", "local[1]", str(script), str(Path(folder) / "data")],
            env=env,
            capture_output=True,
            timeout=300,
            check=False,
        )
        if done.returncode != 0 or not written.exists():
            return
        beside = path.with_suffix(f".{os.getpid()}.tmp")
        shutil.move(written, beside)
        os.replace(beside, path)
