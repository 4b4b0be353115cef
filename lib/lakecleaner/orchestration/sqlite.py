"""Connection arguments for the SQLite metadata database of a local Airflow (`make airflow-ui`, the main
job, `LocalAirflow`): `AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS` names this module's dict.

SQLite lets one writer in at a time; a busy local Airflow (scheduler, API server, DAG processor and
task supervisors all writing) waits out Python's default 5-second lock timeout and answers 500
("database is locked") to API calls and to the task runner's state updates. A minute is plenty.
Kept in its own module so Airflow's processes import nothing else of lakecleaner for it.
"""

SQLITE_CONNECT_ARGS = {"timeout": 60}
