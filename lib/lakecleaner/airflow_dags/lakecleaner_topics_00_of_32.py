"""Airflow DAG file 0 of 32: the lakecleaner DAGs of the topics whose crc32 modulo 32 is 0.

Written by `lakecleaner airflow dag-files`; the DAGs are built by lakecleaner.orchestration.dags.
(Airflow's safe mode parses only files that mention both "airflow" and "dag".)
"""

from lakecleaner.orchestration.dags import build_dag_file

globals().update(build_dag_file(0, 32))
