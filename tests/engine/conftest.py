"""Engine test fixtures: one SparkSession for the whole test session, and helpers to build and
compact logs.

The session is classic (local[2], no UI, few shuffle partitions), built as lakecleaner builds its
own (`engine.session.build_session`: the engine's settings for its Python workers included), unless
LAKECLEANER_TEST_SPARK=connect: then a Spark Connect server set up as `lakecleaner connect-server`
sets it up (on local[2]) is started for the test session and the tests get a client of it, so the
same engine tests run on both kinds of session (`make test` runs them both ways). Tests that need
a classic session (they start their own Spark applications or servers) are marked
`classic_only` and skipped on Connect; so are those marked `classic_pass(reason)`, whose subject
is not the session (the tables that follow the log, the bench's shapes, a storage fault another
test already sends through Connect): the reason says which, and the classic pass runs them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from lakecleaner.config import SparkSettings
from lakecleaner.engine.session import build_session
from tests.support.spark import TEST_SPARK_CONF

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")

ENV_TEST_SPARK = "LAKECLEANER_TEST_SPARK"
ON_CONNECT = os.environ.get(ENV_TEST_SPARK) == "connect"


#: The fixtures through which a test computes on the session's kind of Spark.
SESSION_FIXTURES = {"spark", "job_spark_args", "connect_server"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """On Connect, skip the tests that need a classic session, those whose subject is not the
    session (`classic_pass`), and those that use no Spark session at all: the classic pass ran
    them, and running them again would test nothing new."""
    if ON_CONNECT:
        classic = pytest.mark.skip(reason="needs a classic Spark session (it starts its own Spark)")
        sessionless = pytest.mark.skip(reason="uses no Spark session: the classic pass ran it")
        for item in items:
            elsewhere = item.get_closest_marker("classic_pass")
            if item.get_closest_marker("classic_only"):
                item.add_marker(classic)
            elif elsewhere is not None:
                item.add_marker(pytest.mark.skip(reason=f"the classic pass runs it: {elsewhere.args[0]}"))
            elif not SESSION_FIXTURES & set(getattr(item, "fixturenames", ())):
                item.add_marker(sessionless)


@pytest.fixture(scope="session")
def spark(request: pytest.FixtureRequest) -> Iterator[SparkSession]:
    if ON_CONNECT:
        from lakecleaner.engine.session import connect_session

        session = connect_session(request.getfixturevalue("connect_server").url)
        yield session
        session.stop()
        return
    session = build_session(SparkSettings(master="local[2]", conf=TEST_SPARK_CONF), "lakecleaner-engine-tests")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def job_spark_args(request: pytest.FixtureRequest) -> list[str]:
    """Where a test's own run of the spark job (a child process) computes: the same kind of
    session as the tests' (`--remote` the test server on Connect), on one core."""
    if ON_CONNECT:
        return ["--remote", request.getfixturevalue("connect_server").url]
    return ["--master", "local[1]"]
