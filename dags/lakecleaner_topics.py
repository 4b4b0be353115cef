"""Airflow DAG file of a checkout: one lakecleaner DAG per topic of the config file
($LAKECLEANER_CONFIG, else config/lakecleaner.yaml beside this folder).

Thin on purpose: the DAGs are built by lakecleaner.orchestration.dags, as by the DAG file the wheel
ships (lakecleaner/airflow_dags/lakecleaner_topics.py, for deployments that install the package and
point Airflow at `lakecleaner paths`' DAG folder). Parsing reads only the config file. (Airflow's
safe mode parses only files that mention both "airflow" and "dag".)
"""

import os
from pathlib import Path

from lakecleaner.config import ENV_CONFIG_PATH
from lakecleaner.orchestration.dags import build_dags

globals().update(
    build_dags(os.environ.get(ENV_CONFIG_PATH) or str(Path(__file__).parents[1] / "config" / "lakecleaner.yaml"))
)
