"""What the engine asks of the JVM of the Spark driver a compaction run starts: the serial
collector and a 64 MB initial heap (`DRIVER_JAVA_OPTIONS`).

No record passes through the driver's JVM: pass 1's winners and pass 2's shares go through the
store (`offsets_file`), and what Spark carries back are task descriptions and small results. Its
live heap after a collection stayed at 70-240 MB through a compaction of 100M records, yet under
the JVM's defaults on a machine of 2 cores and 24 GB (G1, an initial heap of 1/64 of memory:
368 MB) the JVM's resident memory spread over 439-536 MB from run to run of the same compaction,
and decided a single run's peak memory. With `-XX:+UseSerialGC -Xms64m`: 394-414 MB, in times
this machine's spread does not tell apart from G1's (bench/README.md, "The driver's JVM, and the
gate's alone items"). G1 is the collector for heaps of many GB and many threads; a driver that
holds task descriptions needs neither.

These are defaults, never overrides: a classic session lakecleaner builds (`engine.session`) and
the DAG's spark-submit (`orchestration.compact_task`) pass them as spark.driver.extraJavaOptions
only where nothing else chose the driver's Java options — spark-submit's --conf (an Airflow
connection's), the config's spark.conf, or Spark's defaults file (spark-defaults.conf in
SPARK_CONF_DIR, else in the Spark distribution's conf/), where an administrator sets them: a
--conf would replace that file's value, not add to it. Nor where the environment's Java options
(JAVA_TOOL_OPTIONS, JDK_JAVA_OPTIONS) choose a collector: a JVM given two refuses to start. They
reach only a JVM not yet started: a driver that spark-submit started without them keeps its own.
A Spark Connect server is a JVM serving many runs at once for hours (`lakecleaner connect-server`):
it keeps the JVM's defaults.
"""

from __future__ import annotations

import os
import re
from collections.abc import Container, Mapping
from pathlib import Path

from lakecleaner.engine.distribution import submit_home

#: The Spark setting that carries the driver's Java options.
DRIVER_JAVA_OPTIONS_KEY = "spark.driver.extraJavaOptions"
#: The driver's Java options lakecleaner sets by default.
DRIVER_JAVA_OPTIONS = "-XX:+UseSerialGC -Xms64m"
#: A line of spark-defaults.conf that sets the driver's Java options (Spark reads `key value`,
#: `key=value` or `key: value`, as java.util.Properties does).
_SETS_OPTIONS = re.compile(rf"\s*{re.escape(DRIVER_JAVA_OPTIONS_KEY)}\s*[\s=:]")
#: The variables whose Java options every JVM started from this environment takes.
ENVIRONMENT_JAVA_OPTIONS = ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS")
#: A Java option that chooses a garbage collector (-XX:+UseG1GC, -XX:+UseParallelGC, …).
_CHOOSES_COLLECTOR = re.compile(r"-XX:\+Use\w*GC\b")


def driver_conf(chosen: Container[str], environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """`DRIVER_JAVA_OPTIONS` as spark.driver.extraJavaOptions, unless `chosen` (the keys set by
    spark-submit and the config's spark.conf) or Spark's defaults file (`defaults_file`) sets the
    driver's Java options, or the environment's Java options choose a collector (the JVM refuses
    to start with two: "Multiple garbage collectors selected"): then nothing."""
    if DRIVER_JAVA_OPTIONS_KEY in chosen or _sets_options(defaults_file(environ)):
        return {}
    if any(_CHOOSES_COLLECTOR.search(environ.get(name, "")) for name in ENVIRONMENT_JAVA_OPTIONS):
        return {}
    return {DRIVER_JAVA_OPTIONS_KEY: DRIVER_JAVA_OPTIONS}


def defaults_file(environ: Mapping[str, str]) -> Path:
    """The spark-defaults.conf spark-submit reads: in $SPARK_CONF_DIR, else in $SPARK_HOME/conf, else
    in the conf/ of pyspark's own distribution (whose spark-submit runs without SPARK_HOME)."""
    if environ.get("SPARK_CONF_DIR"):
        return Path(environ["SPARK_CONF_DIR"]) / "spark-defaults.conf"
    return submit_home(environ) / "conf" / "spark-defaults.conf"


def _sets_options(path: Path) -> bool:
    """Whether the defaults file at `path` sets the driver's Java options (an unreadable or missing
    file sets nothing)."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return False
    return any(_SETS_OPTIONS.match(line) for line in lines if not line.lstrip().startswith(("#", "!")))
