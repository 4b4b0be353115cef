"""`lakecleaner airflow setup` and what the DAGs read of it: the pool's config, the setup marker, and
"now" for runs with and without a logical date (issue #13)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from lakecleaner.config import AirflowSettings, parse_config
from lakecleaner.errors import ConfigError
from lakecleaner.orchestration.airflow_setup import SETUP_COMMAND, AirflowNotSetUp, check_setup
from lakecleaner.orchestration.dags import NOT_RETRYABLE, now_ms_of


def test_the_pool_and_its_slots_come_from_the_config_file() -> None:
    assert parse_config({}, "x.yaml").airflow == AirflowSettings("lakecleaner_spark", 2)
    config = parse_config({"airflow": {"pool": "spark.small", "pool_slots": 5}}, "x.yaml")
    assert config.airflow == AirflowSettings("spark.small", 5)


def test_bad_pool_settings_name_the_key_and_the_rule() -> None:
    with pytest.raises(ConfigError) as exc:
        parse_config({"airflow": {"pool": "a pool!", "pool_slots": 0, "slots": 3}}, "x.yaml")
    assert exc.value.problems == [
        "x.yaml: airflow: unknown key 'slots' (did you mean 'pool_slots'?)",
        "x.yaml: airflow.pool='a pool!': must be a pool name of letters, digits, '_', '.', '-'",
        "x.yaml: airflow.pool_slots=0: must be at least 1",
    ]


def test_without_the_setup_marker_the_first_task_names_the_command() -> None:
    with pytest.raises(AirflowNotSetUp) as exc:
        check_setup(None, AirflowSettings())
    assert f"run `{SETUP_COMMAND}`" in str(exc.value) and "'lakecleaner_spark'" in str(exc.value)
    assert issubclass(AirflowNotSetUp, NOT_RETRYABLE)  # the task fails at once: a retry cannot help


def test_a_marker_for_another_pool_is_not_a_setup_for_this_one() -> None:
    marker = json.dumps({"pool": "lakecleaner_spark", "pool_slots": 2})
    check_setup(marker, AirflowSettings())
    with pytest.raises(AirflowNotSetUp, match=r"set up for the pool 'lakecleaner_spark'.*uses 'other'"):
        check_setup(marker, AirflowSettings(pool="other"))
    with pytest.raises(AirflowNotSetUp, match="set up for the pool None"):
        check_setup("not json", AirflowSettings())


def test_now_is_the_data_interval_end_or_else_the_runs_run_after() -> None:
    end, after = datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 3, 2, 5, tzinfo=UTC)
    dag_run = SimpleNamespace(run_after=after)
    assert now_ms_of({"data_interval_end": end, "dag_run": dag_run}) == int(end.timestamp() * 1000)
    # A run triggered with "logical_date": null has no data interval at all.
    assert now_ms_of({"data_interval_end": None, "dag_run": dag_run}) == int(after.timestamp() * 1000)
    assert now_ms_of({"dag_run": dag_run}) == int(after.timestamp() * 1000)
