"""The login of an Airflow that uses its simple auth manager (`make airflow-ui`, docker-compose's
`airflow-init`), as Airflow itself does it: a password generated on the first start, kept in the
auth manager's password file (readable by its owner only) and printed once; a password the
operator chose (AIRFLOW_ADMIN_PASSWORD) is written instead, and never printed."""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from lakecleaner.errors import LakeCleanerError


@dataclass(frozen=True)
class Login:
    """The user's login after `ensure_login`: `made` is the password when it was generated now
    (to be shown once), None when it was kept or chosen."""

    user: str
    path: Path
    made: str | None


def ensure_login(path: Path, user: str, chosen: str | None) -> Login:
    """Write `chosen` as `user`'s password in the password file at `path`; without one, keep the
    password the file holds for `user`, else generate one. The file is created readable by its
    owner only; other users in it are kept. LakeCleanerError for a file that is not Airflow's
    password file (a JSON object of user to password)."""
    users = _read(path)
    if chosen:
        users[user] = chosen
        made = None
    elif user in users:
        return Login(user, path, None)
    else:
        made = users[user] = secrets.token_urlsafe(12)
    _write(path, users)
    return Login(user, path, made)


def _read(path: Path) -> dict[str, str]:
    try:
        users = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise LakeCleanerError(
            f"{path} is not Airflow's password file ({exc}): remove it to generate a new one"
        ) from exc
    if not isinstance(users, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in users.items()):
        raise LakeCleanerError(f"{path} is not Airflow's password file (a JSON object of user to password): remove it")
    return users


def _write(path: Path, users: dict[str, str]) -> None:
    """Replace the file at once, created 0600 (a password never sits in a file others may read)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        json.dump(users, out)
    os.replace(partial, path)


__all__ = ["Login", "ensure_login"]
