"""The read side's model of runs, below the lake's views (`summaries/`, `dashboard/`, the CLI) and
the DAG's tasks (`orchestration/`): what each imports to know what a run was, so that none of them
imports another.

    reports.py   the run reports stored in the lake (`_lakecleaner/runs/<topic>/<run id>/`)
    naming.py    DAG ids and run ids
    outcome.py   what a run's summary says: its failures, skipped partitions, digest
    records.py   the run history: run reports joined with Airflow's DAG runs
    digests.py   a run in a few fields, as the topic summaries keep the last ones
    history.py   runs and summaries as points in time, for the history charts
"""
