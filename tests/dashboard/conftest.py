"""Fixtures of the dashboard tests: the scene's lake, a StatsD listener, one real Airflow per session.

The Airflow instance (API server, scheduler, DAG processor on SQLite, 127.0.0.1, a free port,
AIRFLOW_HOME in a temporary directory) serves the scene's lake through lakecleaner's plugin and
sends its metrics to the listener, so the API, browser and metrics tests share its ~30 s start.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from lakecleaner.clock import wall_clock_ms
from lakecleaner.config import load_config
from lakecleaner.lake import Lake
from tests.dashboard.scene import build_scene, write_config
from tests.support.local_airflow import LocalAirflow
from tests.support.s3 import S3Endpoint

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "tests" / "artifacts" / "dashboard"


@dataclass(frozen=True)
class Scene:
    config_path: Path
    now_ms: int

    @property
    def lake(self) -> Lake:
        return Lake.open(load_config(self.config_path))


def make_scene(directory: Path, endpoint: S3Endpoint | None = None) -> Scene:
    """A fresh scene lake in `directory` (or on `endpoint`), planned around the current time
    (whole seconds)."""
    now_ms = wall_clock_ms() // 1000 * 1000
    config_path = write_config(directory, directory / "lake", endpoint)
    build_scene(config_path, now_ms)
    return Scene(config_path, now_ms)


@pytest.fixture(scope="package")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Scene:
    """The scene the shared Airflow serves (tests must not change it, except by DAG runs)."""
    return make_scene(tmp_path_factory.mktemp("scene"))


class StatsdListener:
    """A UDP socket on 127.0.0.1 collecting StatsD lines (`name:value|type`)."""

    def __init__(self) -> None:
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.socket.bind(("127.0.0.1", 0))
        self.socket.settimeout(0.2)
        self.port = int(self.socket.getsockname()[1])
        self.lines: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._receive, daemon=True)
        self._thread.start()

    def _receive(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.socket.recv(65535)
            except TimeoutError:
                continue
            self.lines.extend(data.decode(errors="replace").splitlines())

    def metrics(self, prefix: str) -> dict[str, str]:
        """The last value and type received for each metric whose name starts with `prefix`."""
        found = {}
        for line in list(self.lines):
            name, _, rest = line.partition(":")
            if name.startswith(prefix):
                found[name] = rest
        return found

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.socket.close()


@pytest.fixture(scope="package")
def statsd() -> Iterator[StatsdListener]:
    listener = StatsdListener()
    yield listener
    listener.close()


@pytest.fixture(scope="package")
def airflow(scene: Scene, statsd: StatsdListener, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalAirflow]:
    """One running Airflow with lakecleaner's DAGs and plugin, metrics to `statsd`."""
    metrics = {
        "AIRFLOW__METRICS__STATSD_ON": "True",
        "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
        "AIRFLOW__METRICS__STATSD_PORT": str(statsd.port),
        "AIRFLOW__METRICS__STATSD_PREFIX": "airflow",
    }
    with LocalAirflow(tmp_path_factory.mktemp("airflow"), scene.config_path, extra_env=metrics) as instance:
        instance.wait_for_dags(["lakecleaner__customers", "lakecleaner__page-views"])
        yield instance
