"""`make airflow-ui` stops cleanly (issue 51): a SIGTERM to make leaves no Airflow process behind.

Before, stopping it left 38 processes (about 5.5 GB) and its scheduler ignored SIGTERM. The test
starts the real target with its own Airflow home and a free port, waits until the API server
answers, sends SIGTERM to make alone (as a supervisor or `kill` does), and then looks for any
process whose environment names that Airflow home.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest

from lakecleaner.dev.ports import free_port

REPO = Path(__file__).resolve().parents[1]


def _started_from(home: Path) -> list[psutil.Process]:
    """This user's processes whose environment has AIRFLOW_HOME=`home`."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get("AIRFLOW_HOME") == str(home):
                found.append(process)
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    return found


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            return bool(reply.status == 200)
    except OSError:
        return False


def _token(port: int, password: str) -> str:
    """An access token for admin from the API server's login endpoint (HTTPError when refused)."""
    body = json.dumps({"username": "admin", "password": password}).encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/auth/token", body, {"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=30) as reply:
        return str(json.loads(reply.read())["access_token"])


@pytest.mark.xdist_group("airflow-ui")
def test_sigterm_to_make_airflow_ui_stops_every_airflow_process(tmp_path: Path) -> None:
    home, port = tmp_path / "airflow_home", free_port()
    command = ["make", "--no-print-directory", "airflow-ui", f"AIRFLOW_UI_HOME={home}", f"AIRFLOW_UI_PORT={port}"]
    log = (tmp_path / "make.log").open("wb")
    make = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while not _answers(f"http://127.0.0.1:{port}/api/v2/monitor/health"):
            assert make.poll() is None, (tmp_path / "make.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the API server did not answer in 240 s"
            time.sleep(2)
        # issue 78: no fixed admin/admin; the password made on the first start, printed once, signs in
        (password,) = re.findall(r"Airflow login: admin, password (\S+) \(kept in", (tmp_path / "make.log").read_text())
        assert _token(port, password) and password != "admin"
        with pytest.raises(urllib.error.HTTPError):
            _token(port, "admin")
        running = _started_from(home)
        names = {" ".join(p.cmdline()[1:3]) for p in running}
        assert any("scheduler" in n for n in names) and any("dag-processor" in n for n in names), names
        make.send_signal(signal.SIGTERM)
        make.wait(timeout=60)
        deadline = time.monotonic() + 30
        while (left := _started_from(home)) and time.monotonic() < deadline:
            time.sleep(1)
        assert left == [], [" ".join(p.cmdline()) for p in left]
    finally:
        if make.poll() is None:
            os.killpg(make.pid, signal.SIGKILL)
        for process in _started_from(home):
            process.kill()
