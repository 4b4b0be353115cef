"""Airflow DAG file 17 of 32: the lakecleaner DAGs of the topics whose crc32 modulo 32 is 17.

Written by `lakecleaner airflow dag-files`; the DAGs are built by lakecleaner.orchestration.dags.
(Airflow's safe mode parses only files that mention both "airflow" and "dag".)
"""

from pathlib import Path

from lakecleaner.orchestration.dags import build_dag_file

CONFIG_BESIDE = Path(__file__).parents[1] / "config" / "lakecleaner.yaml"
globals().update(build_dag_file(17, 32, fallback_config=CONFIG_BESIDE))
