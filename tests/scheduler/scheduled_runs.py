"""Create a DAG's SCHEDULED runs for past intervals the way Airflow's scheduler creates them.

    python -m tests.scheduled_runs <dag_id> <earliest ISO 8601> <count>     (in the Airflow's environment)

A live scheduler creates a run only for the DAG's latest interval when catchup is off (as in
lakecleaner's DAGs), so past intervals get their scheduled runs here: the intervals come from the
serialized DAG's timetable (`next_dagrun_info_v2`, each from the previous one, as the scheduler
computes a DAG's next run from its last one, with catchup from `earliest`), and each run is created
with the call and arguments of `SchedulerJobRunner._create_dag_runs`: run type SCHEDULED, triggered
by the timetable, the timetable's run id, state QUEUED. The running scheduler then starts them.
Prints each run as a JSON line.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime

from airflow._shared.timezones.timezone import coerce_datetime
from airflow.models.serialized_dag import SerializedDagModel
from airflow.timetables.base import DagRunInfo, TimeRestriction
from airflow.utils.session import create_session
from airflow.utils.state import DagRunState
from airflow.utils.types import DagRunTriggeredByType, DagRunType


def main() -> None:
    dag_id, earliest, count = sys.argv[1], coerce_datetime(datetime.fromisoformat(sys.argv[2])), int(sys.argv[3])
    with create_session() as session:
        serialized = session.scalar(SerializedDagModel.latest_item_select_object(dag_id))
        if serialized is None:
            raise SystemExit(f"the DAG {dag_id} is not serialized yet")
        dag = serialized.dag
        restriction = TimeRestriction(earliest=earliest, latest=None, catchup=True)
        info: DagRunInfo | None = None
        for _ in range(count):
            info = dag.timetable.next_dagrun_info_v2(last_dagrun_info=info, restriction=restriction)
            assert info is not None and info.data_interval is not None, f"{dag_id} has no interval after {earliest}"
            run = dag.create_dagrun(
                run_id=dag.timetable.generate_run_id(
                    run_type=DagRunType.SCHEDULED,
                    run_after=info.run_after,
                    data_interval=info.data_interval,
                    partition_key=info.partition_key,
                ),
                logical_date=info.logical_date,
                data_interval=info.data_interval,
                run_after=info.run_after,
                run_type=DagRunType.SCHEDULED,
                triggered_by=DagRunTriggeredByType.TIMETABLE,
                state=DagRunState.QUEUED,
                session=session,
                partition_key=info.partition_key,
                partition_date=info.partition_date,
            )
            print(json.dumps({"run_id": run.run_id, "data_interval_end": info.data_interval.end.isoformat()}))


if __name__ == "__main__":
    main()
