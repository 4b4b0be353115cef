"""An Airflow DAG file of lakecleaner: the DAGs of the topics whose crc32 modulo N is i, where
this file is named lakecleaner_topics_<i>_of_<N>.py. Written by `lakecleaner airflow dag-files`.
"""

from lakecleaner.orchestration.dags import build_dag_file

globals().update(build_dag_file(__file__))
