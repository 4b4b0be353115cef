"""Orchestration: the work of each Airflow task as plain functions (tasks.py), and the DAG
factory (dags.py) that `dags/` calls. The functions take and return JSON-serialisable values,
so they pass through XCom and can be run and tested without Airflow."""
