"""`lakecleaner demo`: the main job on the embedded default (local lake, Spark local, Airflow on SQLite)."""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click
from click.core import ParameterSource
from rich.table import Table

from lakecleaner.cli.base import Context, cli, pass_ctx
from lakecleaner.cli.output import console, err_console
from lakecleaner.cli.setup import write_sample_config
from lakecleaner.cli.status import show_status
from lakecleaner.clock import epoch_ms, wall_clock_ms
from lakecleaner.config import LOCAL_CONFIG, find_config
from lakecleaner.errors import LakeCleanerError

if TYPE_CHECKING:
    from lakecleaner.runs.records import AirflowRun


@cli.command()
@click.option("--records", default=50_000, show_default=True, help="Records in the CDC topic.")
@click.option(
    "--airflow-home",
    default="airflow_home",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Where the embedded Airflow keeps its SQLite database and logs.",
)
@click.option("--no-airflow", is_flag=True, help="Only build the sample topics and show their status.")
@click.option(
    "--reset",
    is_flag=True,
    help="Delete and rebuild the sample topics even in a lake that holds what the demo did not create "
    "(other topics and every consumer group's offsets are still left alone).",
)
@click.option(
    "--spark-remote",
    help="Run the compact tasks on this Spark Connect server (sc://host:port; the Airflow connection "
    "spark_lakecleaner becomes a spark_connect one) instead of spark-submit to local Spark.",
)
@pass_ctx
def demo(
    ctx: Context, records: int, airflow_home: str, no_airflow: bool, reset: bool, spark_remote: str | None
) -> None:
    """The main job: build the sample topics, run both topics' DAGs in Airflow, summarise.

    Without a config file (--config, $LAKECLEANER_CONFIG, ./lakecleaner.yaml) it writes the sample
    one to ./lakecleaner.yaml first and says so (--lake still chooses the lake). It rebuilds the
    sample topics of an earlier demo; in a lake that holds anything else it changes nothing unless
    told --reset."""
    from lakecleaner import demo as job

    if find_config(ctx.config_path) is None:
        sample = write_sample_config(Path(LOCAL_CONFIG))
        err_console.print(f"wrote the sample config to {sample}", markup=False, highlight=False)
    job.check_sample_topics(ctx.config)
    lake = ctx.lake
    foreign = job.foreign_content(lake)
    if foreign and not reset:
        raise LakeCleanerError(
            f"the lake {lake.uri} holds what no demo created: {'; '.join(foreign[:5])}"
            f"{f' (and {len(foreign) - 5} more)' if len(foreign) > 5 else ''}. The demo would delete and rebuild "
            f"the sample topics {job.CDC_TOPIC} and {job.EVENTS_TOPIC} ({job.sample_object_count(lake)} objects) "
            "and their run reports. Nothing was changed: point it at a lake of its own (--lake file:///tmp/demo-lake), "
            "or pass --reset to rebuild the sample topics here (other topics and every consumer group's offsets are "
            "left alone)"
        )
    job.reset_sample_topics(lake)
    sizes = job.DemoSizes.of_records(records)
    times = job.demo_times(wall_clock_ms())
    err_console.print(f"lake: {lake.uri}")
    written = job.build_sample_topics(lake, sizes, now_ms=times[0])
    err_console.print(job.produced_line(written), highlight=False)
    if no_airflow:
        show_status(ctx, [job.CDC_TOPIC, job.EVENTS_TOPIC])
        return
    before = {t: job.topic_snapshot(lake, t) for t in (job.CDC_TOPIC, job.EVENTS_TOPIC)}
    dag_runs = _run_demo_dags(ctx, Path(airflow_home).resolve(), times, spark_remote)
    after = {t: job.topic_snapshot(lake, t) for t in before}
    sections = {}
    for topic in before:
        runs = job.topic_runs(lake, topic, dag_runs.get(topic, []))
        config = lake.topic(topic).config
        charts = job.topic_charts(runs, config.compact, config.min_cleanable_dirty_ratio)
        notes = job.deadline_notes(runs, config) if config.compact else []
        sections[topic] = job.TopicReport(job.summary_rows(before[topic], after[topic], runs), runs, charts, notes)
        table = Table("figure", "before → after", title=f"topic {topic}")
        for row in sections[topic].rows:
            table.add_row(*row)
        console.print(table)
        for run in runs:
            console.print(f"  run {run.run_id}: {run.result}", markup=False, highlight=False)
        for note in notes:
            console.print(f"  {note}", markup=False, highlight=False)
    page = job.render_html(lake.uri, sections, job.airflow_url(os.environ))
    lake.store.write("_lakecleaner/report.html", page.encode())
    console.print(f"HTML report: {lake.store.location('_lakecleaner/report.html')}", markup=False)
    lines = job.iceberg_lines(lake)
    if lines:
        console.print("The topics as Iceberg tables, read with pyiceberg:")
        for line in lines:
            console.print(f"  {line}", markup=False, highlight=False)
    console.print("Next, try:", markup=False)
    for command in job.next_commands(_invocation(ctx), job.deleted_key(lake)):
        console.print(f"  {command}", markup=False, highlight=False)


def _invocation(ctx: Context) -> str:
    """`job.demo_invocation` for this run: under `uv run` when uv started it; the --config and
    --lake given on the command line (relative to the working directory when inside it)."""
    root = click.get_current_context().find_root()
    given = {
        name: getattr(ctx, name) if root.get_parameter_source(name) == ParameterSource.COMMANDLINE else None
        for name in ("config_path", "lake_uri")
    }
    config = given["config_path"]
    if config is not None:
        path = Path(config).resolve()
        config = str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else str(path)
    from lakecleaner import demo as job

    return job.demo_invocation("UV_RUN_RECURSION_DEPTH" in os.environ, config, given["lake_uri"])


def _run_demo_dags(
    ctx: Context, airflow_home: Path, times: tuple[int, int], spark_remote: str | None
) -> dict[str, list[AirflowRun]]:
    """Both DAGs at each of `times` (`job.demo_times`: tombstones stamped in the first run expire
    in the second); the DAG runs made, by topic."""
    from lakecleaner import demo as job
    from lakecleaner.orchestration.compact_task import connection_of_url
    from lakecleaner.orchestration.local import DagRunRequest, DagRunResult, prepare_airflow, run_dags
    from lakecleaner.runs.records import AirflowRun

    config_path = Path(ctx.config.source).resolve()
    env = {"LAKECLEANER_LAKE_URI": ctx.lake.uri}
    if spark_remote:
        env["AIRFLOW_CONN_SPARK_LAKECLEANER"] = json.dumps(connection_of_url(spark_remote))
        err_console.print("compact tasks: on the Spark Connect server of --spark-remote")
    airflow_home.mkdir(parents=True, exist_ok=True)
    err_console.print(f"airflow: {airflow_home} (SQLite)")
    prepare_airflow(airflow_home, config_path)
    requests = [
        DagRunRequest(f"lakecleaner__{topic}", job.iso(when))
        for when in times
        for topic in (job.CDC_TOPIC, job.EVENTS_TOPIC)
    ]
    err_console.print(f"running {len(requests)} DAG runs, one after another ...")

    def ended(request: DagRunRequest, result: DagRunResult) -> None:
        tasks = ", ".join(f"{t}={s}" for t, s in sorted(result.tasks.items()))
        err_console.print(f"  {request.dag_id} for {request.logical_date}: {result.state}: {tasks}")

    results = run_dags(airflow_home, config_path, requests, env=env, on_result=ended)
    if results[-1].state != "success":  # the runs stop at the first that fails
        failed = requests[len(results) - 1]
        raise LakeCleanerError(f"the DAG run {failed.dag_id} failed; its log:\n{results[-1].log[-3000:]}")
    made: dict[str, list[AirflowRun]] = {}
    for request, result in zip(requests, results, strict=True):
        topic = request.dag_id.removeprefix("lakecleaner__")
        when = epoch_ms(datetime.fromisoformat(request.logical_date))
        run = AirflowRun(result.run_id, result.state, "manual", {}, when, when)
        made.setdefault(topic, []).append(run)
    return made
