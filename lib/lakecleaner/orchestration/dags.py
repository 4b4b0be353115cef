"""The DAG factory: one DAG per topic of the config file (DESIGN section 6).

    [mirror ─►] assess ─► compaction_gate ─► compact (Spark) ─► retention ─► physical_deletion ─►
        report ─► publish_change (Asset)

* A topic with `mirror:` starts with `mirror` (issue 47): the Kafka topic's new records, up to the
  high watermarks seen at its start and for at most `mirror.max_seconds`, in the pool
  `airflow.mirror_pool`. `assess` runs whatever its outcome (the lake's records are cleaned
  either way), and `report` fails the run when it failed; its lag per partition is in run.json.

* "now" is the run's `data_interval_end` for every task; a run without a logical date (a REST
  trigger with `"logical_date": null`) has no data interval, and its now is the run's `run_after`.
  `assess` decides it once; the later tasks take it from assess's result.
* `assess` first checks that `lakecleaner airflow setup` has created the compact task's pool
  (orchestration/airflow_setup.py): without it the scheduler would never run `compact`.
* Trigger parameters (shown in the UI form): `dry_run`, `force`, `partitions`. Invalid ones fail
  `assess`, the first task, with a message naming the parameter.
* Tasks are retried (twice, 30 s apart), except on errors a retry cannot fix (`NOT_RETRYABLE`:
  invalid trigger parameters, configuration errors, Airflow not set up), which fail the task at once.
* Skipped work is visible: `compaction_gate` is skipped (with the reason in its log) when no
  partition is due or in a dry run, which skips `compact`; `physical_deletion` is skipped in a dry run.
* `compact` runs the packaged spark_jobs/compact_topic.py (`compact_task.py`) in the pool
  `airflow.pool` of the config file (`lakecleaner_spark` unless set): as a client of a Spark
  Connect server when the Airflow connection `spark_lakecleaner` is of type `spark_connect`, with
  spark-submit when it is of type `spark`; without one, on the config file's `spark.remote`, else
  with spark-submit to its `spark.master` (local[*]).
* A partition that fails compaction (quality gate, unreadable segment) fails `compact`, but
  retention and physical deletion still run for every partition (trigger rule all_done), and
  `report` fails the run afterwards, naming the failures.
* A topic whose DAG cannot be built is left out and reported as the DAG file's import error
  (`config_error_placeholder`); the other topics keep their DAGs.
* Building the DAGs reads only the local config file: no storage or network I/O at parse time,
  and the tasks' modules (storage clients, pyarrow: 0.8 s) are imported when a task runs, not when
  Airflow parses a DAG file.
  The topics are spread over several DAG files (`dag_files.py`), each building its share.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Asset, Param, TriggerRule, Variable, get_parsing_context, task
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from lakecleaner.clock import epoch_ms
from lakecleaner.config import ENV_CONFIG_PATH, LakeConfig, TopicSpec, load_config, locate_config
from lakecleaner.deprecation import deprecated
from lakecleaner.errors import ConfigError, InvalidRunParams
from lakecleaner.orchestration.airflow_setup import SETUP_VARIABLE, AirflowNotSetUp, check_setup
from lakecleaner.orchestration.compact_task import Compact
from lakecleaner.orchestration.dag_files import DagFileShare
from lakecleaner.runs import outcome
from lakecleaner.runs.naming import dag_id_of, report_run_id
from lakecleaner.spark_jobs import compact_topic_path

SPARK_CONN_ID = "spark_lakecleaner"
START_DATE = datetime(2026, 1, 1)
log = logging.getLogger(__name__)

PARAMS = {
    "dry_run": Param(
        False,
        type="boolean",
        title="Dry run",
        description="Plan and report only: roll, compact, retain and delete nothing.",
    ),
    "force": Param(
        False,
        type="boolean",
        title="Force compaction",
        description="Compact every partition with cleanable bytes, ignoring min.cleanable.dirty.ratio.",
    ),
    "partitions": Param(
        [], type="array", title="Partitions", description="Only these partitions (e.g. [0, 2]); empty means all."
    ),
}


# Errors a retry cannot fix: the same parameters, config and Airflow set-up fail the same way 30 s
# later. Storage errors, lost races (ConcurrentModification) and anything else keep the DAG's retries.
NOT_RETRYABLE: tuple[type[Exception], ...] = (InvalidRunParams, ConfigError, AirflowNotSetUp)


@contextmanager
def failing_without_retry() -> Iterator[None]:
    """Turn a `NOT_RETRYABLE` error into AirflowFailException, which fails the task without retrying."""
    try:
        yield
    except NOT_RETRYABLE as exc:
        raise AirflowFailException(f"{type(exc).__name__}: {exc}") from exc


def asset_for(topic: str) -> Asset:
    """The Airflow Asset a topic's DAG updates whenever it changes the log."""
    return Asset(name=f"lakecleaner-{topic}", uri=f"lakecleaner://topics/{topic}")


def topic_tags(topic: str) -> list[str]:
    """A topic's DAG tags; Airflow keeps at most 100 characters of a tag (TAG_MAX_LEN)."""
    return ["lakecleaner", f"topic:{topic}"[:100]]


def now_ms_of(context: Any) -> int:
    """The "now" of every decision, in epoch ms: the run's data_interval_end, or, for a run without a
    logical date (and so without a data interval), the run's `run_after`, Airflow 3's time for it."""
    end = context.get("data_interval_end")
    return epoch_ms(end if end is not None else context["dag_run"].run_after)


def build_topic_dag(spec: TopicSpec, config: LakeConfig, config_path: str) -> DAG:
    """The DAG of one topic (see the module docstring)."""
    topic = spec.name
    doc = (
        f"### lakecleaner: `{topic}`\n\nKafka-style compaction and retention for topic `{topic}` in "
        f"`{config.lake_uri}` ({spec.partitions} partitions). Trigger with `dry_run` to see the plan, "
        "`force` to compact every partition with cleanable bytes, `partitions` for a subset.\n\n"
        "Every decision uses the run's data interval end as *now*, so backfills decide as the "
        "scheduled run of that interval would have."
    )
    with DAG(
        dag_id=dag_id_of(topic),
        schedule=spec.schedule,
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        params=PARAMS,
        tags=topic_tags(topic),
        doc_md=doc,
        default_args={"retries": 2, "retry_delay": timedelta(seconds=30)},
        auto_register=False,  # the DAG file exports what build_dags returns, and nothing it rejected
    ) as dag:
        mirrored = spec.mirror is not None

        @task(pool=config.airflow.mirror_pool)
        def mirror(**context: Any) -> dict[str, Any]:
            """Bring the Kafka topic's new records into the lake at their offsets (issue 47); fail,
            after the other partitions were mirrored, when one could not be (issue 74)."""
            from lakecleaner.orchestration import tasks

            with failing_without_retry():
                check_setup(Variable.get(SETUP_VARIABLE, default=None), config.airflow, mirrored=True)
            report = tasks.mirror(load_config(config_path), topic, _run_id(context))
            for p in report["partitions"]:
                print(f"{topic}-{p['partition']}: {p['records']} records, to offset {p['next_offset']}, lag {p['lag']}")
            for gap in report["deleted_before_mirrored"]:
                log.warning(
                    "%s-%s: offsets %s..%s were deleted in Kafka before they were mirrored",
                    topic,
                    gap["partition"],
                    gap["from"],
                    gap["to"],
                )
            failed = outcome.mirror_failures(report)
            if failed:  # what stopped them stops them again at once; the next run mirrors anew
                raise AirflowFailException("; ".join(failed))
            return tasks.step_digest(report, report["location"])

        adopted = spec.adopt is not None

        @task
        def adopt(**context: Any) -> dict[str, Any]:
            """Append what Kafka Connect's S3 sink wrote of the topic since the last run (issue 49);
            fail, after the other partitions were adopted, when one stopped (issue 75)."""
            from lakecleaner.orchestration import tasks

            with failing_without_retry():
                check_setup(Variable.get(SETUP_VARIABLE, default=None), config.airflow, mirrored=False)
            report = tasks.adopt(load_config(config_path), topic, _run_id(context))
            for p, done in report["partitions"].items():
                print(f"{topic}-{p}: {done['files']} files, {done['records']} records, to offset {done['next_offset']}")
            failed = outcome.adopt_failures(report)
            if failed:  # a bad file or a conflict stops it again at once: someone decides first
                raise AirflowFailException("; ".join(failed))
            return tasks.step_digest(report, report["location"])

        @task(trigger_rule=TriggerRule.ALL_DONE if mirrored or adopted else TriggerRule.ALL_SUCCESS)
        def assess(**context: Any) -> dict[str, Any]:
            """Validate the parameters, roll idle segments, plan, and choose the partitions to compact."""
            from lakecleaner.orchestration import tasks

            with failing_without_retry():
                check_setup(Variable.get(SETUP_VARIABLE, default=None), config.airflow, mirrored=mirrored)
                result = tasks.assess(load_config(config_path), topic, now_ms_of(context), dict(context["params"]))
            for partition, reason in result["reasons"].items():
                print(f"{topic}-{partition}: {reason}")
            return result

        @task(retries=0)
        def compaction_gate(assessment: dict[str, Any]) -> str:
            """Skip compaction (visibly) when nothing is due or in a dry run; else the partition list."""
            if assessment["params"]["dry_run"]:
                raise AirflowSkipException("dry run: nothing is compacted")
            if not assessment["selected"]:
                raise AirflowSkipException("no partition is due for compaction: " + json.dumps(assessment["reasons"]))
            return ",".join(str(p) for p in assessment["selected"])

        assessed = assess()
        if mirrored:
            mirror() >> assessed
        if adopted:
            adopt() >> assessed
        gate = compaction_gate(assessed)  # type: ignore[arg-type]  # XComArg at build time
        compact = Compact(
            task_id="compact",
            application=str(compact_topic_path()),
            conn_id=SPARK_CONN_ID,
            spark=config.spark,
            pool=config.airflow.pool,
            name=f"lakecleaner-{topic}",
            arguments=[
                "--config",
                config_path,
                "--topic",
                topic,
                "--partitions",
                "{{ ti.xcom_pull(task_ids='compaction_gate') }}",
                "--now",
                "{{ ti.xcom_pull(task_ids='assess')['now_ms'] }}",
                "--run-id",
                "{{ run_id | replace(':', '-') | replace('+', '-') }}",
            ],
            env={"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable},
            retries=0,
        )
        gate >> compact

        @task(trigger_rule=TriggerRule.ALL_DONE)
        def retention(**context: Any) -> dict[str, Any]:
            """Apply time, size and consumed retention to every partition."""
            from lakecleaner.orchestration import tasks

            assessment = context["ti"].xcom_pull(task_ids="assess")
            if not assessment:
                raise AirflowSkipException("the assessment failed; see the assess task")
            with failing_without_retry():
                return tasks.retention(
                    load_config(config_path), topic, assessment["now_ms"], assessment["params"], _run_id(context)
                )

        @task(trigger_rule=TriggerRule.ALL_DONE)
        def physical_deletion(**context: Any) -> dict[str, Any]:
            """Delete files whose file.delete.delay.ms has passed, and old orphans."""
            from lakecleaner.orchestration import tasks

            assessment = context["ti"].xcom_pull(task_ids="assess")
            if not assessment:
                raise AirflowSkipException("the assessment failed; see the assess task")
            if assessment["params"]["dry_run"]:
                raise AirflowSkipException("dry run: no file is deleted")
            with failing_without_retry():
                return tasks.physical_deletion(
                    load_config(config_path), topic, assessment["now_ms"], assessment["params"], _run_id(context)
                )

        @task(trigger_rule=TriggerRule.ALL_DONE, retries=0)
        def report(**context: Any) -> dict[str, Any]:
            """Summarise the run (stored as run.json), log its digest and hand the digest on, and fail
            the run if any step failed."""
            from lakecleaner.metrics import emit_topic_metrics
            from lakecleaner.orchestration import tasks

            ti = context["ti"]
            names = (
                "assess",
                "compaction_gate",
                "retention",
                "physical_deletion",
                *(("mirror",) if mirrored else ()),
                *(("adopt",) if adopted else ()),
            )
            config = load_config(config_path)
            pushed = {name: ti.xcom_pull(task_ids=name) for name in names}
            parts = tasks.gather(config, topic, _run_id(context), pushed)
            summary = tasks.summarise(config, topic, _run_id(context), parts)
            emit_topic_metrics(topic, (parts["assess"] or {}).get("metrics"), summary)
            digest = outcome.run_digest(summary)
            print(json.dumps(digest, indent=1, default=str))
            if digest["skipped"]:
                log.warning("%s", outcome.shown(digest["skipped"], digest["skipped_count"], digest["location"]))
            if digest["failures"]:
                raise AirflowFailException(
                    outcome.shown(digest["failures"], digest["failure_count"], digest["location"])
                )
            return digest

        @task(outlets=[asset_for(topic)])
        def publish_change(digest: dict[str, Any]) -> None:
            """Update the topic's Asset when this run changed the log (skipped otherwise)."""
            if not digest["changed_log"]:
                raise AirflowSkipException("the log did not change")

        digest = report()
        compact >> retention() >> physical_deletion() >> digest
        publish_change(digest)  # type: ignore[arg-type]  # XComArg at build time
    return dag


def _run_id(context: Any) -> str:
    return report_run_id(str(context["run_id"]))


def build_dags(
    config_file: str | None = None,
    keep_topic: Callable[[str], bool] | None = None,
    errors_dag_id: str = "lakecleaner_config_errors",
) -> dict[str, DAG]:
    """The DAGs of the config file's topics (those `keep_topic` accepts, when given; the others are
    not read), keyed by dag_id. A topic whose DAG cannot be built is left out and named by one
    placeholder, `errors_dag_id` (`config_error_placeholder`), that Airflow reports as the file's
    import error."""
    path = str(locate_config(config_file))
    config = load_config(path, keep_topic)
    dags, errors = {}, {}
    for name, spec in config.topics.items():
        try:
            dag = build_topic_dag(spec, config, path)
            dag.validate()  # type: ignore[no-untyped-call]  # what Airflow checks when it loads the DAG
        except Exception as exc:  # one topic Airflow rejects (e.g. its schedule) must not remove the others
            log.warning("the DAG of topic %s cannot be built: %s", name, exc)
            errors[name] = f"{type(exc).__name__}: {exc}"
            continue
        dags[dag.dag_id] = dag
    if errors:
        placeholder = config_error_placeholder(path, errors, errors_dag_id)
        dags[placeholder.dag_id] = placeholder
    return dags


def build_dag_file(
    file: str | Path | int, count: int | None = None, fallback_config: str | Path | None = None
) -> dict[str, DAG]:
    """The DAGs DAG file `file` exports (its `__file__`; its share of the topics is its name,
    orchestration/dag_files.py), or, when a worker parses the file to run one DAG's task
    (Airflow's parsing context), that DAG alone.

    The config file is $LAKECLEANER_CONFIG, else `config/lakecleaner.yaml` beside the DAG folder
    (a checkout's or docker-compose's `dags/`) when there is one, else `locate_config`'s.

    Args:
        file: the DAG file's path. An index with `count` (and `fallback_config`) is how the DAG
            files of lakecleaner 0.1 called it: still built, with a deprecation warning.
        count: only with an index.
        fallback_config: only with an index: the config file when $LAKECLEANER_CONFIG is unset.

    Returns:
        The DAGs by dag_id, with one placeholder naming the topics whose DAG cannot be built.

    Raises:
        ValueError: the file's name does not say its share (`lakecleaner_topics_<i>_of_<N>.py`).
    """
    if isinstance(file, int):
        deprecated(
            "a DAG file calling build_dag_file(index, count)",
            instead="write the DAG files anew with `lakecleaner airflow dag-files DIR`",
            removed_in="0.3",
        )
        assert count is not None, "build_dag_file(index, count): the count is missing"
        share, beside = DagFileShare(file, count), None if fallback_config is None else Path(fallback_config)
    else:
        share, beside = DagFileShare.of_file(file), Path(file).resolve().parents[1] / "config" / "lakecleaner.yaml"
    wanted = get_parsing_context().dag_id

    def keep(topic: str) -> bool:
        return share.holds(topic) and (wanted is None or dag_id_of(topic) == wanted)

    named = os.environ.get(ENV_CONFIG_PATH) or (str(beside) if beside is not None and beside.is_file() else None)
    return build_dags(named, keep, errors_dag_id=f"lakecleaner_config_errors_{share.index}_of_{share.count}")


class TopicDagsRejected(Exception):
    """The DAGs of some topics could not be built (Airflow shows it as the DAG file's import error)."""


def config_error_placeholder(config_path: str, errors: dict[str, str], dag_id: str) -> DAG:
    """A DAG that Airflow never keeps: the DAG processor validates every DAG a file exports before
    keeping it, and this one fails validation with every rejected topic's error. Airflow records
    that as the DAG file's import error (shown at the top of its UI) and keeps the other topics'
    DAGs; the rejected topics have no DAG until the config file is fixed. Its id has one underscore
    after `lakecleaner`, so no topic's DAG (`lakecleaner__<topic>`) can have it."""
    lines = "; ".join(f"topic {topic}: {error}" for topic, error in sorted(errors.items()))
    message = f"the DAGs of {len(errors)} topic(s) could not be built ({lines}); fix them in {config_path}"
    dag = DAG(dag_id=dag_id, schedule=None, start_date=START_DATE, auto_register=False)

    def reject() -> None:
        raise TopicDagsRejected(message)

    dag.validate = reject  # type: ignore[method-assign]
    return dag
