"""Run one lakecleaner DAG with Airflow's dag.test(), in its own process (Airflow keeps global state).

    python -m tests.airflow_run <config.yaml> <dag_id> <logical date ISO> '<run conf JSON>'

Prints one JSON line: the run's state and every task's state.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime

from lakecleaner.orchestration.dags import build_dags


def main() -> None:
    config_path, dag_id, when, conf = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    dag = build_dags(config_path)[dag_id]
    run = dag.test(logical_date=datetime.fromisoformat(when), run_conf=conf)
    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    print("RESULT " + json.dumps({"state": str(run.state), "tasks": states}))


if __name__ == "__main__":
    main()
