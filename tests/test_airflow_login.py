"""`lakecleaner airflow login` (issue 78): the Airflow login of `make airflow-ui` and docker-compose,
made as Airflow's simple auth manager makes it — generated on the first start, printed once, kept
readable by its owner only — or the operator's own, never printed."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

from tests.support.cli_process import run_cli


def login(path: Path, *extra: str, password: str | None = None) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if k != "AIRFLOW_ADMIN_PASSWORD"}
    if password is not None:
        env["AIRFLOW_ADMIN_PASSWORD"] = password
    done = run_cli("airflow", "login", "--file", str(path), *extra, env=env)
    return done.returncode, done.stdout, done.stderr


def test_a_password_is_generated_once_shown_once_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "home" / "passwords.json"
    code, out, err = login(path)
    assert code == 0, err
    (password,) = re.findall(r"^Airflow login: admin, password (\S+) \(kept in ", out, re.M)
    assert len(password) >= 16 and json.loads(path.read_text()) == {"admin": password}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # no one else may read it
    code, out, _ = login(path)
    assert code == 0 and password not in out and "its password kept in" in out  # shown once
    assert json.loads(path.read_text()) == {"admin": password}
    code, out, _ = login(path, "--user", "ops")  # another user of the same file
    (other,) = re.findall(r"password (\S+) \(kept", out)
    assert json.loads(path.read_text()) == {"admin": password, "ops": other} and other != password


def test_the_operators_password_is_written_and_never_printed(tmp_path: Path) -> None:
    path = tmp_path / "passwords.json"
    login(path)
    code, out, err = login(path, "--json", password="s3cret-choice")
    assert code == 0, err
    assert json.loads(path.read_text()) == {"admin": "s3cret-choice"}
    assert "s3cret-choice" not in out + err and json.loads(out)["generated_password"] is None


def test_a_file_that_is_no_password_file_is_named_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "passwords.json"
    path.write_text("admin: admin\n")
    code, _, err = login(path)
    assert code == 2 and err.startswith(f"error: {path} is not Airflow's password file")
    assert path.read_text() == "admin: admin\n"
