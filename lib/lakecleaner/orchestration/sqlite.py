"""Connection arguments for the SQLite metadata database of a local Airflow (`make airflow-ui`, the main
job, `LocalAirflow`): `AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS` names this module's dict.

SQLite lets one writer in at a time; a busy local Airflow (scheduler, API server, DAG processor and
task supervisors all writing) waits out Python's default 5-second lock timeout and answers 500
("database is locked") to API calls and to the task runner's state updates. A minute is plenty.
A task's calls to the API server (heartbeats, state, XComs) must then wait as long: their default
5-second timeout failed tasks of a busy local Airflow ("API_SERVER_ERROR ... ReadTimeout" on an
XCom push) while the server waited for the lock, so the environment of a local Airflow sets
`[workers] execution_api_timeout` to the same minute.
In SQLite's default rollback-journal mode a reader also holds writers off (a writer's commit waits
for every open read to end), so the database is switched to write-ahead logging once it exists:
readers then never block the writer, nor the writer them.
Kept in its own module so Airflow's processes import nothing else of lakecleaner for it.
"""

import sqlite3
from contextlib import closing
from pathlib import Path

SQLITE_CONNECT_ARGS = {"timeout": 60}


def use_write_ahead_log(database: Path) -> None:
    """Switch the SQLite database file to WAL mode (it stays so: the mode is kept in the file);
    nothing to do when there is no such file (Airflow's database is elsewhere)."""
    if database.is_file():
        with closing(sqlite3.connect(database, timeout=SQLITE_CONNECT_ARGS["timeout"])) as db:
            db.execute("PRAGMA journal_mode=WAL")
