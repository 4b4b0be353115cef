"""Jars from Maven Central for the Java programs run beside lakecleaner (a Kafka broker for
`lakecleaner dev kafka` and the tests, Spark with Apache Iceberg's runtime for the tests):
`mvn dependency:copy-dependencies` of the artifacts (and their runtime dependencies) into a cache
under ~/.cache/lakecleaner ($XDG_CACHE_HOME), fetched the first time and reused after."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from lakecleaner.errors import LakeCleanerError

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "lakecleaner"

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>lakecleaner.dev</groupId>
  <artifactId>{name}</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>{dependencies}
  </dependencies>
</project>
"""
_DEPENDENCY = """
    <dependency><groupId>{}</groupId><artifactId>{}</artifactId><version>{}</version></dependency>"""


class DevToolMissing(LakeCleanerError):
    """What a developer tool needs is not on this machine (Maven, Java) or cannot be fetched."""


def fetched_jars(name: str, artifacts: Sequence[str]) -> Path:
    """The folder of the jars of `artifacts` (`group:artifact:version`) and their runtime
    dependencies, cached as `name`; one process fetches them while the others wait (a fetch that
    failed half way leaves no folder of that name). DevToolMissing without Maven, or when Maven
    cannot fetch them."""
    folder = CACHE / name
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _fetched(folder, name, artifacts)


def _fetched(folder: Path, name: str, artifacts: Sequence[str]) -> Path:
    lib = folder / "lib"
    if all((lib / f"{a.split(':')[1]}-{a.split(':')[2]}.jar").exists() for a in artifacts):
        return lib
    if shutil.which("mvn") is None:
        raise DevToolMissing(
            f"fetching {name} from Maven Central needs Maven (mvn) on the PATH: install your system's `maven` "
            "package (https://maven.apache.org/install.html) and try again"
        )
    pom = folder / "pom.xml"
    dependencies = "".join(_DEPENDENCY.format(*a.split(":")) for a in artifacts)
    pom.write_text(_POM.format(name=name, dependencies=dependencies))
    partial = folder / "lib.partial"
    shutil.rmtree(partial, ignore_errors=True)
    fetched = subprocess.run(
        ["mvn", "-q", "-B", "-f", str(pom), "dependency:copy-dependencies", f"-DoutputDirectory={partial}"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if fetched.returncode != 0:
        raise DevToolMissing(
            f"mvn could not fetch {name} from Maven Central (is it reachable from here?): "
            f"{fetched.stdout[-2000:]}{fetched.stderr[-2000:]}"
        )
    shutil.rmtree(lib, ignore_errors=True)
    partial.rename(lib)
    return lib


__all__ = ["CACHE", "DevToolMissing", "fetched_jars"]
