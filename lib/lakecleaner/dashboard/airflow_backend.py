"""The dashboard's link to the Airflow it runs in: who the user is, what they may read and
trigger (asked of Airflow's auth manager, as Airflow's own REST API asks it), and the DAG runs.

Imported only inside the API server (by the plugin), where the auth manager is initialised.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow.api_fastapi.app import get_auth_manager
from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails
from airflow.api_fastapi.core_api.security import get_user
from airflow.models.dag import DagModel
from airflow.models.dagrun import DagRun
from airflow.utils.session import create_session
from sqlalchemy import select

from lakecleaner.clock import epoch_ms
from lakecleaner.dashboard.app import Backend
from lakecleaner.runs.records import AirflowRun


def _dag_details(dag_id: str | None) -> DagDetails:
    return DagDetails(id=dag_id, team_name=DagModel.get_team_name(dag_id) if dag_id else None)


class AirflowAccess:
    """Permissions from Airflow's auth manager: reading a DAG (GET) and creating its runs (POST on RUN)."""

    def can_read(self, user: Any, dag_id: str | None) -> bool:
        """Whether `user` may read `dag_id` (any DAG when None), like `GET /api/v2/dags/{dag_id}`."""
        return bool(get_auth_manager().is_authorized_dag(method="GET", user=user, details=_dag_details(dag_id)))

    def can_trigger(self, user: Any, dag_id: str) -> bool:
        """Whether `user` may trigger `dag_id`, like `POST /api/v2/dags/{dag_id}/dagRuns`."""
        return bool(
            get_auth_manager().is_authorized_dag(
                method="POST", access_entity=DagAccessEntity.RUN, user=user, details=_dag_details(dag_id)
            )
        )


def _ms(moment: datetime | None) -> int | None:
    return None if moment is None else epoch_ms(moment)


def recent_dag_runs(dag_id: str, limit: int) -> list[AirflowRun]:
    """The DAG's `limit` most recent runs from Airflow's metadata database, newest first."""
    with create_session() as session:
        rows = session.scalars(
            select(DagRun).where(DagRun.dag_id == dag_id).order_by(DagRun.run_after.desc()).limit(limit)
        ).all()
        return [
            AirflowRun(
                run_id=row.run_id,
                state=str(row.state),
                run_type=str(row.run_type),
                conf=dict(row.conf or {}),
                run_after_ms=_ms(row.run_after),
                data_interval_end_ms=_ms(row.data_interval_end),
            )
            for row in rows
        ]


def dag_paused(dag_id: str) -> bool | None:
    """Whether the DAG is paused in Airflow's metadata database (None when Airflow does not know it)."""
    with create_session() as session:
        paused = session.scalar(select(DagModel.is_paused).where(DagModel.dag_id == dag_id))
    return None if paused is None else bool(paused)


def airflow_backend() -> Backend:
    """The dashboard's backend inside Airflow's API server."""
    return Backend(current_user=get_user, access=AirflowAccess(), dag_runs=recent_dag_runs, dag_paused=dag_paused)
