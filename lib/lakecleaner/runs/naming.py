"""Names shared by the DAGs, their tasks and the dashboard (no Airflow import here)."""

from __future__ import annotations

import hashlib

DAG_ID_PREFIX = "lakecleaner__"
#: Airflow's limit on a DAG id (airflow.models.base.ID_LEN).
MAX_DAG_ID_LENGTH = 250


def dag_id_of(topic: str) -> str:
    """The Airflow DAG of a topic: `lakecleaner__<topic>`. Kafka allows 249-character topic names,
    more than Airflow's 250-character DAG ids leave after the prefix, so a longer id is cut and
    ends in a hash of the whole name: stable, and distinct for topics sharing a long prefix."""
    dag_id = f"{DAG_ID_PREFIX}{topic}"
    if len(dag_id) <= MAX_DAG_ID_LENGTH:
        return dag_id
    digest = hashlib.sha256(topic.encode()).hexdigest()[:12]
    return f"{dag_id[: MAX_DAG_ID_LENGTH - len(digest) - 2]}__{digest}"


def report_run_id(airflow_run_id: str) -> str:
    """The run id reports are stored under: the Airflow run id with `:` and `+` as `-` (safe in
    object keys and spark-submit arguments)."""
    return airflow_run_id.replace(":", "-").replace("+", "-")
