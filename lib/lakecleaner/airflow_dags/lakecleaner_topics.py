"""Airflow DAG file: one lakecleaner DAG per topic of the config file ($LAKECLEANER_CONFIG, else ./lakecleaner.yaml).

Thin on purpose: the DAGs are built by lakecleaner.orchestration.dags; parsing reads only the
local config file. (Airflow's safe mode parses only files that mention both "airflow" and "dag".)
"""

from lakecleaner.orchestration.dags import build_dags

globals().update(build_dags())
