"""The Java options of the Spark driver a compaction run starts (`engine.driver_jvm`): the serial
collector and a 64 MB initial heap by default, in the sessions lakecleaner builds and on the DAG's
spark-submit line, never over what spark-submit, the config or Spark's defaults file chose."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest
from pyspark import SparkConf
from pyspark.sql import SparkSession

from lakecleaner.config import SparkSettings
from lakecleaner.engine import distribution
from lakecleaner.engine.driver_jvm import (
    DRIVER_JAVA_OPTIONS,
    DRIVER_JAVA_OPTIONS_KEY,
    ENVIRONMENT_JAVA_OPTIONS,
    driver_conf,
)
from lakecleaner.engine.session import session_conf
from lakecleaner.engine.workers import worker_conf
from lakecleaner.errors import SparkNotInstalled
from lakecleaner.orchestration.compact_task import SubmitTarget, spark_submit_command

pytestmark = pytest.mark.classic_only

#: The names of the serial collector's and the parallel collector's GarbageCollectorMXBeans, sorted.
SERIAL = ["Copy", "MarkSweepCompact"]
PARALLEL = ["PS MarkSweep", "PS Scavenge"]

#: A script that builds the session a compaction run builds (`build_session`, on local[1], with the
#: spark.conf given as JSON in argv[1]) and prints its driver JVM's collectors and initial heap.
JVM_PROBE = """
import json, sys
from lakecleaner.config import SparkSettings
from lakecleaner.engine.session import build_session
conf = {"spark.ui.enabled": "false", **json.loads(sys.argv[1] if len(sys.argv) > 1 else "{}")}
session = build_session(SparkSettings(master="local[1]", conf=conf), "jvm-probe")
factory = session._jvm.java.lang.management.ManagementFactory
print(json.dumps({
    "collectors": sorted(bean.getName() for bean in factory.getGarbageCollectorMXBeans()),
    "initial_heap": factory.getMemoryMXBean().getHeapMemoryUsage().getInit(),
}))
session.stop()
"""


def _probe(command: list[str], env: dict[str, str]) -> dict[str, object]:
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    found: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def _environment(**extra: str) -> dict[str, str]:
    dropped = {"SPARK_CONF_DIR", "PYSPARK_GATEWAY_PORT", *ENVIRONMENT_JAVA_OPTIONS}
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    return {**env, **extra}


def test_the_suites_session_built_by_lakecleaner_runs_its_driver_on_the_serial_collector(spark: SparkSession) -> None:
    """The session `build_session` started for this test session (with no driver options of its
    own in its conf) has the serial collector in its driver's JVM."""
    factory = spark._jvm.java.lang.management.ManagementFactory  # type: ignore[union-attr]
    assert sorted(bean.getName() for bean in factory.getGarbageCollectorMXBeans()) == SERIAL


def test_a_session_lakecleaner_starts_gets_the_options_and_the_configs_own_win() -> None:
    """A new session's driver JVM runs the serial collector with a 64 MB initial heap; a config
    whose spark.conf sets spark.driver.extraJavaOptions gets its own options instead, none of ours."""
    ours = _probe([sys.executable, "-c", JVM_PROBE], _environment())
    assert ours == {"collectors": SERIAL, "initial_heap": 64 * 1024 * 1024}
    theirs = _probe(
        [sys.executable, "-c", JVM_PROBE, json.dumps({DRIVER_JAVA_OPTIONS_KEY: "-XX:+UseParallelGC"})], _environment()
    )
    assert theirs["collectors"] == PARALLEL


def test_sparks_defaults_file_keeps_the_driver_options_an_administrator_set(tmp_path: Path) -> None:
    """spark-defaults.conf (in SPARK_CONF_DIR) that sets the driver's Java options keeps them: a
    --conf of lakecleaner's would replace the file's value, so none is passed, in the session or
    on the spark-submit line."""
    (tmp_path / "spark-defaults.conf").write_text(
        f"# set by the cluster's administrator\n{DRIVER_JAVA_OPTIONS_KEY}   -XX:+UseParallelGC\n"
    )
    env = _environment(SPARK_CONF_DIR=str(tmp_path))
    assert _probe([sys.executable, "-c", JVM_PROBE], env)["collectors"] == PARALLEL
    assert driver_conf(set(), env) == {}
    (tmp_path / "spark-defaults.conf").write_text(f"# {DRIVER_JAVA_OPTIONS_KEY} -XX:+UseParallelGC\n")
    assert driver_conf(set(), env) == {DRIVER_JAVA_OPTIONS_KEY: DRIVER_JAVA_OPTIONS}  # a comment sets nothing


def test_a_collector_chosen_in_the_environments_java_options_is_left_alone() -> None:
    """A JVM given two collectors refuses to start ("Multiple garbage collectors selected"), so
    where JAVA_TOOL_OPTIONS or JDK_JAVA_OPTIONS choose one, lakecleaner passes no options of its
    own: the session starts, on the environment's collector."""
    parallel = _environment(JDK_JAVA_OPTIONS="-XX:+UseParallelGC")
    refused = subprocess.run(["java", *DRIVER_JAVA_OPTIONS.split(), "-version"], env=parallel, capture_output=True)
    assert refused.returncode != 0 and b"Multiple garbage collectors" in refused.stdout + refused.stderr
    assert driver_conf(set(), parallel) == {}
    assert driver_conf(set(), _environment(JAVA_TOOL_OPTIONS="-Dfile.encoding=UTF-8")) == {
        DRIVER_JAVA_OPTIONS_KEY: DRIVER_JAVA_OPTIONS
    }
    assert _probe([sys.executable, "-c", JVM_PROBE], parallel)["collectors"] == PARALLEL


def test_the_dags_spark_submit_starts_the_driver_with_the_options(tmp_path: Path) -> None:
    """The DAG's spark-submit line carries the options (a JVM spark-submit starts is not started
    again by the job's session), and a driver it starts runs the serial collector; the config's
    own options replace them on that line."""
    script = tmp_path / "probe.py"
    script.write_text(JVM_PROBE)
    env = _environment()
    command = spark_submit_command(SubmitTarget("local[1]"), str(script), [], name="probe", conf={}, environ=env)
    assert f"{DRIVER_JAVA_OPTIONS_KEY}={DRIVER_JAVA_OPTIONS}" in command
    assert _probe(command, env)["collectors"] == SERIAL
    own = {DRIVER_JAVA_OPTIONS_KEY: "-XX:+UseParallelGC"}
    command = spark_submit_command(SubmitTarget("local[1]"), str(script), [], name="probe", conf=own, environ=env)
    assert f"{DRIVER_JAVA_OPTIONS_KEY}=-XX:+UseParallelGC" in command
    assert not any(DRIVER_JAVA_OPTIONS in part for part in command)


def test_session_conf_adds_the_options_only_where_it_starts_the_jvm_and_nothing_chose_them() -> None:
    """Under spark-submit (the JVM already started) the session adds no driver options; neither
    where spark-submit or the config set them."""
    nothing = SparkConf(loadDefaults=False)
    assert session_conf(SparkSettings(), nothing, starts_jvm=False) == worker_conf()
    ours = {DRIVER_JAVA_OPTIONS_KEY: DRIVER_JAVA_OPTIONS}
    assert session_conf(SparkSettings(), nothing, starts_jvm=True) == {**worker_conf(), **ours}
    submitted = SparkConf(loadDefaults=False).set(DRIVER_JAVA_OPTIONS_KEY, "-Xss4m")
    assert DRIVER_JAVA_OPTIONS_KEY not in session_conf(SparkSettings(), submitted, starts_jvm=True)
    configured = SparkSettings(conf={DRIVER_JAVA_OPTIONS_KEY: "-Xss4m"})
    assert session_conf(configured, nothing, starts_jvm=True)[DRIVER_JAVA_OPTIONS_KEY] == "-Xss4m"


def test_spark_home_names_the_distribution_whose_spark_submit_and_defaults_file_are_used(tmp_path: Path) -> None:
    """With SPARK_HOME set, spark-submit and the spark-defaults.conf it reads are that
    distribution's (as Spark's own scripts find them); without it, pyspark's."""
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "spark-defaults.conf").write_text(f"{DRIVER_JAVA_OPTIONS_KEY}=-XX:+UseParallelGC\n")
    home = _environment(SPARK_HOME=str(tmp_path))
    assert driver_conf(set(), home) == {}
    command = spark_submit_command(SubmitTarget("local[1]"), "job.py", [], name="job", conf={}, environ=home)
    assert command[0] == str(tmp_path / "bin" / "spark-submit")
    assert not any(DRIVER_JAVA_OPTIONS in part for part in command)
    own = {k: v for k, v in _environment().items() if k != "SPARK_HOME"}
    assert driver_conf(set(), own) == {DRIVER_JAVA_OPTIONS_KEY: DRIVER_JAVA_OPTIONS}
    command = spark_submit_command(SubmitTarget("local[1]"), "job.py", [], name="job", conf={}, environ=own)
    assert Path(command[0]) == Path(pyspark.__file__).parent / "bin" / "spark-submit" and Path(command[0]).is_file()


def test_without_pyspark_each_error_names_the_fix_that_serves_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """No pyspark: spark-submit's error names the extra and SPARK_HOME (another distribution
    serves), pyspark's own distribution's (the Connect server's scripts) the extra only."""
    monkeypatch.setattr(distribution.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(SparkNotInstalled, match=r"install lakecleaner\[spark\], or set SPARK_HOME"):
        distribution.submit_home({})
    with pytest.raises(SparkNotInstalled) as own:
        distribution.pyspark_home()
    assert "lakecleaner[spark]" in str(own.value) and "SPARK_HOME" not in str(own.value)
