"""Shared fixtures (the helpers they use are in tests/support/): real storage backends.

The S3 backend is a real HTTP endpoint: moto's server mode started in-process on 127.0.0.1,
or, when LAKECLEANER_TEST_S3_ENDPOINT is set, that endpoint (e.g. the MinIO of
docker-compose.yml, with AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY set). Every test that
takes `store` or `lake` runs once per backend: local and s3, plus SeaweedFS (a real object
store, one server per session) in the modules that mark themselves `backends(*ALL_BACKENDS)`:
the storage contract, the partition log (racing appends), the damage tests, the crash tests.
"""

from __future__ import annotations

import logging
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser

from lakecleaner.config import (
    ENVIRONMENT_VARIABLES,
    LakeConfig,
    parse_config,
)
from lakecleaner.dev.kafka_broker import KafkaBroker
from lakecleaner.dev.ports import free_port
from lakecleaner.engine.connect_server import ConnectServer
from lakecleaner.io import LocalStore, ObjectStore
from lakecleaner.io.s3 import S3Store
from lakecleaner.lake import Lake
from tests.support.backends import DEFAULT_BACKENDS, ENV_TEST_BACKENDS
from tests.support.jvm_class_data import class_data_options
from tests.support.kafka_mock import MockCluster
from tests.support.kafka_real import sasl_broker
from tests.support.s3 import (
    ENV_TEST_ENDPOINT,
    TEST_ACCESS_KEY,
    TEST_SECRET_KEY,
    S3Endpoint,
    SeaweedFS,
    serialise_motos_puts,
)
from tests.support.spark import TEST_SPARK_CONF

# The credentials of an external test endpoint (LAKECLEANER_TEST_S3_ENDPOINT), kept before the
# environment is cleared below.
_ENDPOINT_CREDENTIALS = (os.environ.get("AWS_ACCESS_KEY_ID", ""), os.environ.get("AWS_SECRET_ACCESS_KEY", ""))
# No test may reach a lake it did not create, nor be steered by the developer's settings: every
# variable lakecleaner reads (`config.ENVIRONMENT_VARIABLES`: config file, lake, endpoint,
# credentials, concurrency, dedupe buffer, Spark Connect) is cleared for the whole session, before
# any fixture reads it (a test that wants one sets it for the process it starts).
for _name in ENVIRONMENT_VARIABLES:
    os.environ.pop(_name, None)
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
# Every Spark JVM the tests start (their sessions, the Connect server, spark-submit children and
# the DAGs' compact tasks: spark-submit adds SPARK_SUBMIT_OPTS to the driver's options; a
# standalone master and worker: SPARK_DAEMON_JAVA_OPTS) compiles with C1 only: a test's jobs are
# small and its JVMs short-lived, and C2's compiler threads cost about a fifth of the engine
# tests' CPU (measured: crash, semantics and gate tests, 418 -> 336 CPU-seconds on 2 cores; the
# whole suite 1,590 -> 1,318 s), and maps the classes it loads from a class-data archive made once
# per environment (`support/jvm_class_data.py`: a session's start 11 -> 6 CPU-seconds). pytest-xdist's
# workers inherit the variables the controlling process set. What lakecleaner itself passes to a
# driver is untouched.
if "SPARK_SUBMIT_OPTS" not in os.environ:
    _JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
    if "PYTEST_XDIST_WORKER" not in os.environ:
        _JAVA_OPTIONS = class_data_options(_JAVA_OPTIONS)
    for _name in ("SPARK_SUBMIT_OPTS", "SPARK_DAEMON_JAVA_OPTS"):
        os.environ.setdefault(_name, _JAVA_OPTIONS)
logging.getLogger("werkzeug").setLevel(logging.WARNING)
logging.getLogger("py4j").setLevel(logging.WARNING)  # its __del__ logs after pytest closed the streams
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[S3Endpoint]:
    url = os.environ.get(ENV_TEST_ENDPOINT)
    if url:
        endpoint = S3Endpoint(
            url,
            *_ENDPOINT_CREDENTIALS,
            f"lakecleaner-test-{uuid.uuid4().hex[:8]}",
        )
        endpoint.client().create_bucket(Bucket=endpoint.bucket)
        yield endpoint
        return
    from moto.server import ThreadedMotoServer

    serialise_motos_puts()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = S3Endpoint(f"http://{host}:{port}", TEST_ACCESS_KEY, TEST_SECRET_KEY, "lakecleaner-test")
    endpoint.client().create_bucket(Bucket=endpoint.bucket)
    yield endpoint
    server.stop()


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """Debian's Chromium, headless, driven by Playwright (installed with apt when missing; the
    tests that use it are skipped, saying why, when it cannot be)."""
    from playwright.sync_api import sync_playwright

    from tests.support.local_airflow import CHROMIUM, CHROMIUM_ARGS, ensure_chromium

    missing = ensure_chromium()
    if missing:
        pytest.skip(missing)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory: pytest.TempPathFactory, s3_endpoint: S3Endpoint) -> Iterator[ConnectServer]:
    """A Spark Connect server for the test session (`lakecleaner connect-server`'s set-up), on local[2],
    with the S3 endpoint's credentials in its environment (as docker-compose's spark-connect service
    has the lake's), for the clients whose lake settings carry none (Airflow's, from the environment)."""
    folder = Path(tmp_path_factory.mktemp("spark-connect"))
    credentials = {"AWS_ACCESS_KEY_ID": s3_endpoint.access_key, "AWS_SECRET_ACCESS_KEY": s3_endpoint.secret_key}
    server = ConnectServer(folder, port=free_port(), master="local[2]", conf=TEST_SPARK_CONF, env=credentials)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def kafka_mock() -> Iterator[MockCluster]:
    """librdkafka's mock cluster, one per test session (each test uses topics of its own)."""
    yield MockCluster()


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """A real one-node Apache Kafka broker (KRaft, jars from Maven Central), one per test session."""
    broker = sasl_broker(tmp_path_factory.mktemp("kafka"))
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def seaweedfs_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Endpoint]:
    server = SeaweedFS(tmp_path_factory.mktemp("seaweedfs"))
    try:
        yield server.start()
    finally:
        server.stop()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "backends(*names): the storage backends a module's tests run on")


#: Test files that take minutes, collected first: `make test` runs pytest-xdist workers with
#: `--dist loadgroup --no-loadscope-reorder`, which hands out groups in collection order (xdist's default
#: order is most tests first, which left these few long ones for last), so none of them ends the run.
LONG_FIRST = (
    "tests/scheduler/",
    "tests/dashboard/",
    "tests/test_quickstart.py",
    "tests/test_airflow_e2e.py",
    "tests/test_wheel.py",
)
#: Packages whose tests share package-scoped servers (a whole Airflow): each is one unit of
#: distribution. Split over several workers, each worker would start its own Airflow and, for the
#: scheduler's package, run every scenario's DAG runs again.
SHARED_PACKAGES = ("tests/scheduler/", "tests/dashboard/")


@pytest.hookimpl(tryfirst=True)  # before xdist's hook reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Order the long files first and give every test its unit of distribution (`xdist_group`):
    its package when that shares servers (`SHARED_PACKAGES`), else its file, as `--dist loadfile`
    would."""
    root = Path(__file__).parent.parent

    def path_of(item: pytest.Item) -> str:
        return Path(str(item.path)).relative_to(root).as_posix()

    def rank(item: pytest.Item) -> int:
        path = path_of(item)
        return next((i for i, prefix in enumerate(LONG_FIRST) if path.startswith(prefix)), len(LONG_FIRST))

    items.sort(key=rank)  # stable: the rest keep their order
    for item in items:
        path = path_of(item)
        group = next((prefix for prefix in SHARED_PACKAGES if path.startswith(prefix)), path)
        item.add_marker(pytest.mark.xdist_group(group))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" in metafunc.fixturenames:
        marker = metafunc.definition.get_closest_marker("backends")
        names = marker.args if marker else DEFAULT_BACKENDS
        chosen = os.environ.get(ENV_TEST_BACKENDS)
        if chosen:
            names = tuple(n for n in names if n in chosen.split(","))
        metafunc.parametrize("backend", names, indirect=True)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """local (a directory), s3 (moto's server, or LAKECLEANER_TEST_S3_ENDPOINT), or seaweedfs."""
    return str(request.param)


@pytest.fixture
def lake_config(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> LakeConfig:
    """A LakeConfig for a fresh, empty lake on the chosen backend."""
    if backend == "local":
        return parse_config({"lake": {"uri": f"file://{tmp_path / 'lake'}"}}, "<test>")
    endpoint: S3Endpoint = request.getfixturevalue("seaweedfs_endpoint" if backend == "seaweedfs" else "s3_endpoint")
    uri = f"s3://{endpoint.bucket}/{uuid.uuid4().hex[:12]}"
    return LakeConfig(uri, endpoint.settings(), source="<test>")


@pytest.fixture
def store(lake_config: LakeConfig) -> ObjectStore:
    lake = Lake.open(lake_config)
    assert isinstance(lake.store, LocalStore | S3Store)
    return lake.store


@pytest.fixture
def lake(lake_config: LakeConfig) -> Lake:
    return Lake.open(lake_config)
