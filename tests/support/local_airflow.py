"""A throwaway local Airflow with lakecleaner's DAGs and plugin, for the browser tests and the
README screenshot (scripts/screenshot_dashboard.py).

    with LocalAirflow(home, config_path) as airflow:     # db migrate, API server, scheduler, DAG processor
        airflow.wait_for_dags(["lakecleaner__orders"])
        status, body = airflow.api("GET", "/lakecleaner/api/topics", user="viewer")

It listens on 127.0.0.1 on a free port, keeps everything (SQLite database, logs, passwords) in
`home`, and signs users in with Airflow's simple auth manager: `admin` (Admin), `viewer` (Viewer:
reads DAGs, cannot trigger them) and `outsider` (signed in, no role: may read nothing).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import quote

from lakecleaner.dev.ports import free_port
from lakecleaner.orchestration.local import airflow_env, prepare_airflow
from lakecleaner.orchestration.sqlite import SQLITE_CONNECT_ARGS

#: Simple auth manager users: name → role ("" signs in with no permission at all).
USERS = {"admin": "ADMIN", "viewer": "VIEWER", "outsider": ""}
_COMPONENTS = ("api-server", "scheduler", "dag-processor")
BUSY_ATTEMPTS = 5
#: How long an API call may take: longer than a request waits for SQLite's lock, so its 500 arrives.
API_TIMEOUT_S = SQLITE_CONNECT_ARGS["timeout"] + 30

#: Debian's Chromium, driven by Playwright (never `playwright install`: no browser download).
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def ensure_chromium() -> str | None:
    """Install Debian's `chromium` package when /usr/bin/chromium is missing; returns why it is
    still unavailable, or None when it is there."""
    if CHROMIUM.exists():
        return None
    install = subprocess.run(
        "apt-get update && apt-get install -y chromium", shell=True, capture_output=True, text=True, timeout=1200
    )
    if CHROMIUM.exists():
        return None
    return f"{CHROMIUM} is missing and `apt-get install chromium` failed: {install.stderr.strip()[-500:]}"


class LocalAirflow:
    """Airflow's API server, scheduler and DAG processor as child processes (see the module docstring)."""

    def __init__(self, home: Path, config_path: Path, *, extra_env: Mapping[str, str] | None = None) -> None:
        self.home = home
        self.config_path = config_path
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.passwords = {name: secrets.token_urlsafe(12) for name in USERS}
        self.extra_env = dict(extra_env or {})
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self._tokens: dict[str, str] = {}

    def env(self) -> dict[str, str]:
        """The environment of every Airflow command of this instance: `airflow_env` (home, the
        project's DAGs and plugins, the config file) plus the components' settings and `extra_env`."""
        users = ",".join(f"{name}:{role}" for name, role in USERS.items())
        settings = {
            "AIRFLOW__CORE__EXECUTOR": "lakecleaner.orchestration.executor.PreloadedLocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": "4",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": users,
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(self.home / "passwords.json"),
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.base_url}/execution/",
            "AIRFLOW__API__BASE_URL": self.base_url,
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(self.port),
            "AIRFLOW__API__WORKERS": "1",
            "AIRFLOW__API__SECRET_KEY": self._secret("api_secret_key"),
            "AIRFLOW__API_AUTH__JWT_SECRET": self._secret("jwt_secret"),
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            # Parse each DAG file once: the config does not change under a test, and at Airflow's 30 s
            # the DAG processor re-parsed the 32 files (a process each) on a quarter of a core.
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "3600",
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
            **self.extra_env,
        }
        return airflow_env(self.home, self.config_path, settings)

    def _secret(self, name: str) -> str:
        """A random secret of this instance, stable across its commands (kept in `home`)."""
        path = self.home / f".{name}"
        if not path.exists():
            path.write_text(secrets.token_hex(32))
        return path.read_text()

    def start(self, timeout_s: float = 240) -> None:
        """Migrate the database, set Airflow up for the DAGs, start the components and wait until the
        API server answers."""
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / "passwords.json").write_text(json.dumps(self.passwords))
        logs = self.home / "logs"
        logs.mkdir(exist_ok=True)
        prepare_airflow(self.home, self.config_path, self.env())
        for component in _COMPONENTS:
            with (logs / f"{component}.log").open("ab") as log:
                self.processes[component] = subprocess.Popen(
                    [sys.executable, "-m", "airflow", component],
                    env=self.env(),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=self.home,
                    start_new_session=True,
                )
        self._wait(lambda: self._get("/api/v2/monitor/health") == 200, timeout_s, "the API server to answer")

    def _get(self, path: str) -> int:
        try:
            with urllib.request.urlopen(self.base_url + path, timeout=5) as response:
                return int(response.status)
        except urllib.error.HTTPError as exc:
            return exc.code
        except OSError:
            return 0

    def _wait(self, ready: Any, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not ready():
            dead = [name for name, p in self.processes.items() if p.poll() is not None]
            if dead:
                raise RuntimeError(f"airflow {', '.join(dead)} exited; see {self.home / 'logs'}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"waited {timeout_s:.0f} s for {what}; see {self.home / 'logs'}")
            time.sleep(1)

    def token(self, user: str) -> str:
        """A JWT for `user` from the simple auth manager's login endpoint."""
        if user not in self._tokens:
            body = json.dumps({"username": user, "password": self.passwords[user]}).encode()
            request = urllib.request.Request(
                f"{self.base_url}/auth/token", body, {"Content-Type": "application/json"}, method="POST"
            )
            with urllib.request.urlopen(request, timeout=30) as response:
                self._tokens[user] = str(json.loads(response.read())["access_token"])
        return self._tokens[user]

    def sign_in(self, page: Any, user: str) -> None:
        """Sign `user` in through the Airflow UI's login form in a Playwright page."""
        page.goto(f"{self.base_url}/auth/login")
        page.get_by_label("Username").fill(user)
        page.get_by_label("Password").fill(self.passwords[user])
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(f"{self.base_url}/")

    def api(
        self, method: str, path: str, *, user: str | None = None, body: object = None, raw: bool = False
    ) -> tuple[int, Any]:
        """Call the API server as `user` (anonymously when None); returns the status and the JSON body
        (the text with `raw`, or when the body is not JSON). A 500 or 503 is asked again, a few
        times: on SQLite a writer that meets another one's lock fails at once (SQLITE_BUSY, no
        waiting when its transaction would have to upgrade), and the API server answers 5xx."""
        headers = {"Accept": "application/json"}
        if user is not None:
            headers["Authorization"] = f"Bearer {self.token(user)}"
        data = None
        if body is not None:
            data, headers["Content-Type"] = json.dumps(body).encode(), "application/json"
        for attempt in range(BUSY_ATTEMPTS):
            request = urllib.request.Request(self.base_url + path, data, headers, method=method)
            try:
                with urllib.request.urlopen(request, timeout=API_TIMEOUT_S) as response:
                    status, text = int(response.status), response.read().decode()
            except urllib.error.HTTPError as exc:
                status, text = exc.code, exc.read().decode()
            if status not in (500, 503) or attempt + 1 == BUSY_ATTEMPTS:
                break
            time.sleep(1 + attempt)  # SQLite was busy: the request was rolled back, ask again
        if raw:
            return status, text
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text

    def wait_for_dags(self, dag_ids: Iterable[str], timeout_s: float = 180) -> None:
        """Wait until the DAG processor has parsed every DAG of `dag_ids`."""
        wanted = list(dag_ids)
        self._wait(
            lambda: all(self.api("GET", f"/api/v2/dags/{d}", user="admin")[0] == 200 for d in wanted),
            timeout_s,
            f"the DAGs {', '.join(wanted)}",
        )

    def wait_for_run(self, dag_id: str, run_id: str, timeout_s: float = 180) -> dict[str, Any]:
        """Wait until a DAG run has finished (success or failed); returns the run."""
        found: dict[str, Any] = {}

        def finished() -> bool:
            status, run = self.api("GET", f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}", user="admin")
            found.update(run if status == 200 else {})
            return status == 200 and run["state"] in {"success", "failed"}

        self._wait(finished, timeout_s, f"{dag_id} run {run_id} to finish")
        return found

    def set_paused(self, dag_id: str, paused: bool) -> None:
        """Pause or unpause a DAG (the scheduler starts queued runs of unpaused DAGs only)."""
        status, body = self.api("PATCH", f"/api/v2/dags/{dag_id}", user="admin", body={"is_paused": paused})
        if status != 200:
            raise RuntimeError(f"could not set is_paused={paused} on {dag_id}: HTTP {status} {body}")

    def backfill(self, dag_id: str, from_date: str, to_date: str, *, max_active_runs: int = 1) -> dict[str, Any]:
        """Create an Airflow backfill (`POST /api/v2/backfills`, what `airflow backfill create` does) of
        the runs whose logical dates lie in [from_date, to_date] (ISO 8601); returns the backfill.

        Airflow limits a backfill's concurrent runs by its own `max_active_runs` (10 unless given),
        not by the DAG's, so the default here is 1: the intervals run one after another, in order.
        The scheduler starts the runs only while the DAG is unpaused.
        """
        body = {"dag_id": dag_id, "from_date": from_date, "to_date": to_date, "max_active_runs": max_active_runs}
        status, backfill = self.api("POST", "/api/v2/backfills", user="admin", body=body)
        if status != 200:
            raise RuntimeError(f"could not backfill {dag_id} from {from_date} to {to_date}: HTTP {status} {backfill}")
        return dict(backfill)

    def dag_runs(self, dag_id: str) -> list[dict[str, Any]]:
        """A DAG's runs (the first 100, as the REST API returns them), oldest logical date first."""
        status, body = self.api("GET", f"/api/v2/dags/{dag_id}/dagRuns?order_by=logical_date&limit=100", user="admin")
        if status != 200:
            raise RuntimeError(f"could not list the runs of {dag_id}: HTTP {status} {body}")
        return list(body["dag_runs"])

    def wait_for_dag_runs(self, dag_id: str, count: int, timeout_s: float = 300) -> list[dict[str, Any]]:
        """Wait until a DAG has at least `count` runs and every one has finished (success or
        failed); returns them, oldest logical date first."""
        found: list[dict[str, Any]] = []

        def finished() -> bool:
            try:
                found[:] = self.dag_runs(dag_id)
            except RuntimeError:  # e.g. the SQLite database was busy: ask again
                return False
            return len(found) >= count and all(run["state"] in {"success", "failed"} for run in found)

        self._wait(finished, timeout_s, f"{count} finished runs of {dag_id}")
        return found

    def log_tail(self, chars: int = 3000) -> str:
        """The end of each component's log, to show when a test fails."""
        logs = self.home / "logs"
        return "\n".join(
            f"--- {path.name} ---\n{path.read_text(errors='replace')[-chars:]}" for path in sorted(logs.glob("*.log"))
        )

    def stop(self) -> None:
        """Stop every component (SIGTERM to its process group, SIGKILL after 20 s)."""
        for process in self.processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self.processes.clear()

    def __enter__(self) -> LocalAirflow:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()
