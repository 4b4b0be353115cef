"""Names shared by the DAGs, their tasks and the dashboard (no Airflow import here)."""

from __future__ import annotations

DAG_ID_PREFIX = "lakecleaner__"


def dag_id_of(topic: str) -> str:
    """The Airflow DAG of a topic."""
    return f"{DAG_ID_PREFIX}{topic}"


def report_run_id(airflow_run_id: str) -> str:
    """The run id reports are stored under: the Airflow run id with `:` and `+` as `-` (safe in
    object keys and spark-submit arguments)."""
    return airflow_run_id.replace(":", "-").replace("+", "-")
