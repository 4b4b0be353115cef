"""What the topics' DAGs need in Airflow, created by one idempotent command: `lakecleaner airflow setup`.

* The pool of the `compact` tasks (`airflow.pool`, `airflow.pool_slots` in the config file): it bounds
  how many Spark applications run at once. Airflow's scheduler never schedules a task whose pool does
  not exist; it only logs a warning, so without the pool every run of a compacted topic whose
  partition is due would wait forever, and every later run of the topic would queue behind it.
* A setup marker, the Airflow Variable `lakecleaner_airflow_setup` (JSON: the pool, its slots, the
  config file). Task code in Airflow 3 may not query the metadata database, and the Task SDK has no
  call for pools, but it can read Variables: the DAG's first task, `assess`, reads the marker and
  fails at once, without retrying, naming this command when the marker does not name the DAG's pool.
  (A pool deleted by hand after setup is not detected: `airflow pools list` shows it.)

`make airflow-ui`, the main job and docker-compose's `airflow-init` service run it after
`airflow db migrate`. Running it again updates the slot count from the config file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from lakecleaner.config import AirflowSettings, LakeConfig
from lakecleaner.errors import LakeCleanerError

SETUP_VARIABLE = "lakecleaner_airflow_setup"
SETUP_COMMAND = "lakecleaner airflow setup"


class AirflowNotSetUp(LakeCleanerError):
    """Airflow lacks what the DAGs need; the message names the command that creates it."""


def setup_airflow(config: LakeConfig) -> dict[str, Any]:
    """Create or update the pool and the setup marker in Airflow's metadata database (this process's
    AIRFLOW_HOME / AIRFLOW__DATABASE__SQL_ALCHEMY_CONN); returns what it set."""
    from airflow.models.pool import Pool
    from airflow.models.variable import Variable
    from airflow.utils.session import create_session
    from sqlalchemy.exc import OperationalError, ProgrammingError

    settings = config.airflow
    marker = {
        "pool": settings.pool,
        "pool_slots": settings.pool_slots,
        "mirror_pool": settings.mirror_pool,
        "mirror_pool_slots": settings.mirror_pool_slots,
        "config": config.source,
    }
    try:
        with create_session() as session:
            for name, slots, description in (
                (settings.pool, settings.pool_slots, "concurrent Spark applications (compact tasks)"),
                (settings.mirror_pool, settings.mirror_pool_slots, "concurrent Kafka mirrors (mirror tasks)"),
            ):
                Pool.create_or_update_pool(
                    name=name,
                    slots=slots,
                    description=f"lakecleaner: {description}",
                    include_deferred=False,
                    session=session,
                )
            Variable.set(
                SETUP_VARIABLE,
                json.dumps(marker),
                description=f"written by `{SETUP_COMMAND}`; read by the lakecleaner DAGs' assess task",
                session=session,
            )
    except (OperationalError, ProgrammingError) as exc:
        raise AirflowNotSetUp(
            f"Airflow's metadata database is not ready ({type(exc).__name__}: {str(exc.orig)[:200]}); "
            f"run `airflow db migrate`, then `{SETUP_COMMAND}`"
        ) from exc
    return marker


def check_setup(marker_json: str | None, settings: AirflowSettings, *, mirrored: bool = False) -> None:
    """Raise AirflowNotSetUp unless the setup marker (the Variable's value, None when missing)
    names the pool the DAG's compact task uses (and, for a mirrored topic, its mirror task's)."""
    if marker_json is None:
        raise AirflowNotSetUp(
            f"Airflow has not been set up for lakecleaner: the pool '{settings.pool}' of the compact task may "
            f"not exist, and the scheduler would never run it; run `{SETUP_COMMAND}` (with the same config file)"
        )
    try:
        marker = json.loads(marker_json)
    except ValueError:
        marker = None
    found = marker.get("pool") if isinstance(marker, Mapping) else None
    if found != settings.pool:
        raise AirflowNotSetUp(
            f"Airflow was set up for the pool {found!r}, but the DAG's compact task uses '{settings.pool}' "
            f"(airflow.pool in the config file); run `{SETUP_COMMAND}` with this config file"
        )
    mirror_pool = marker.get("mirror_pool") if isinstance(marker, Mapping) else None
    if mirrored and mirror_pool != settings.mirror_pool:
        raise AirflowNotSetUp(
            f"Airflow was set up without the pool '{settings.mirror_pool}' of the DAG's mirror task "
            f"(airflow.mirror_pool in the config file); run `{SETUP_COMMAND}` with this config file"
        )
