"""The dashboard's pages: the data of each page (returned as JSON by the API) and its HTML.

HTML is rendered server-side from Jinja templates (autoescaped) with the SVG bars inlined, and
needs nothing from the internet: no CDN, no web fonts, one small inline script for the trigger
buttons.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

from fastapi import HTTPException
from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from lakecleaner.audit import PartitionErasure, partition_erasures
from lakecleaner.dashboard.data import (
    PartitionView,
    TopicState,
    load_topic,
    load_topics,
    partition_view,
    topic_overview,
)
from lakecleaner.dashboard.runs import AirflowRun, RunRecord, run_history, run_record, run_reports
from lakecleaner.dashboard.svg import legend, render_partition_svg
from lakecleaner.errors import LakeCleanerError, TopicNotFound
from lakecleaner.io.concurrent import map_ordered
from lakecleaner.lake import Lake
from lakecleaner.orchestration.naming import dag_id_of
from lakecleaner.policy.text import format_timestamp_ms

#: How many runs the run history shows.
RUN_HISTORY = 20


def human_bytes(count: int | None) -> str:
    """1234567 → "1.2 MB" (decimal units, as object stores bill)."""
    if count is None:
        return "–"
    units, value, index = ("B", "kB", "MB", "GB", "TB"), float(count), 0
    while abs(value) >= 1000 and index + 1 < len(units):
        value, index = value / 1000, index + 1
    return f"{count} B" if index == 0 else f"{value:.1f} {units[index]}"


def human_seconds(seconds: int | None) -> str:
    """A duration in the two largest units ("2 d 3 h", "5 min 2 s"); negative durations are "… ago"."""
    if seconds is None:
        return "–"
    left = abs(seconds)
    parts: list[str] = []
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60), ("s", 1)):
        if left >= size or (unit == "s" and not parts):
            parts.append(f"{left // size} {unit}")
            left %= size
    text = " ".join(parts[:2])
    return f"{text} ago" if seconds < 0 else text


_ENV = Environment(
    loader=PackageLoader("lakecleaner.dashboard", "templates"), autoescape=True, undefined=StrictUndefined
)
_ENV.filters.update(bytes=human_bytes, duration=human_seconds, ts=format_timestamp_ms, num="{:,}".format)


@dataclass(frozen=True)
class PageContext:
    """Where the pages live (`base`, the dashboard's path; `airflow_base`, Airflow's), the request's
    "now", and whether the user may read and trigger a DAG (by its id)."""

    base: str
    airflow_base: str
    now_ms: int
    explicit_now: str | None
    can_read: Callable[[str], bool]
    can_trigger: Callable[[str], bool]

    @property
    def query(self) -> str:
        """The query string that keeps an explicit `now` on every link."""
        return "?" + urlencode({"now": self.explicit_now}) if self.explicit_now else ""

    def dag_run_url(self, dag_id: str, run_id: str) -> str:
        """The DAG run's page in the Airflow UI."""
        return f"{self.airflow_base}/dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}"


class Pages:
    """The pages of one request: a lake, the request's context and Airflow's DAG runs."""

    def __init__(self, lake: Lake, context: PageContext, dag_runs: Callable[[str, int], list[AirflowRun]]) -> None:
        self.lake = lake
        self.context = context
        self.dag_runs = dag_runs

    # -- data (the JSON API) ---------------------------------------------------------------------
    def _state(self, topic: str) -> TopicState:
        return load_topic(self.lake, topic, self.context.now_ms)

    def runs(self, topic: str, airflow_runs: list[AirflowRun] | None = None) -> list[RunRecord]:
        """The topic's run history, newest first (`airflow_runs`: its DAG's runs, when already listed)."""
        if airflow_runs is None:
            airflow_runs = self.dag_runs(dag_id_of(topic), RUN_HISTORY)
        return run_history(self.lake.store, topic, airflow_runs, RUN_HISTORY, self.lake.config.storage.max_concurrency)

    def _has_dag(self, topic: str) -> bool:
        """Whether the topic has a DAG: the DAGs are built from the config file's topics."""
        return topic in self.lake.config.topics

    def _overview_row(
        self, topic: str, in_lake: bool, state: TopicState | str | None, airflow_runs: list[AirflowRun]
    ) -> dict[str, Any]:
        has_dag = self._has_dag(topic)
        row = {"topic": topic, "dag_id": dag_id_of(topic), "has_dag": has_dag, "in_lake": in_lake, "error": None}
        if not in_lake:
            return row
        if not isinstance(state, TopicState):
            return {**row, "error": state}
        try:
            return {**row, **topic_overview(state, self.runs(topic, airflow_runs))}
        except LakeCleanerError as exc:
            return {**row, "error": str(exc)}

    def overview(self) -> dict[str, Any]:
        """Every topic the user may read (the config file's, each with a DAG, and those only in the
        lake), with its overview figures. The topics' state is read in a few concurrent rounds
        for all of them (`load_topics`), their run histories concurrently."""
        in_lake = set(self.lake.list_topics())
        names = [t for t in sorted(set(self.lake.config.topics) | in_lake) if self.context.can_read(dag_id_of(t))]
        stored = [t for t in names if t in in_lake]
        states: dict[str, TopicState | str]
        try:
            states = load_topics(self.lake, stored, self.context.now_ms)
        except LakeCleanerError as exc:  # the consumer offsets cannot be listed: every topic says why
            states = dict.fromkeys(names, str(exc))
        airflow = {t: self.dag_runs(dag_id_of(t), RUN_HISTORY) for t in stored}  # Airflow's database
        rows = map_ordered(
            lambda t: self._overview_row(t, t in in_lake, states.get(t), airflow.get(t, [])),
            names,
            self.lake.config.storage.max_concurrency,
        )
        return {**self._header(), "topics": rows}

    def _header(self) -> dict[str, Any]:
        return {"now_ms": self.context.now_ms, "now": format_timestamp_ms(self.context.now_ms), "lake": self.lake.uri}

    def _topic_parts(self, topic: str) -> tuple[TopicState, list[RunRecord], list[PartitionView]]:
        state = self._state(topic)
        return state, self.runs(topic), [partition_view(state, p) for p in sorted(state.manifests)]

    def topic(self, topic: str) -> dict[str, Any]:
        """The topic's overview, effective config, partitions, erasure deadlines and run history."""
        state, runs, views = self._topic_parts(topic)
        return {
            **self._header(),
            **topic_overview(state, runs),
            "has_dag": self._has_dag(topic),
            "config": state.plan.config.to_kafka_dict(),
            "partition_views": [v.to_dict() for v in views],
            "erasure": {str(p): e.to_dict() for p, e in self._erasure(topic, state).items()},
            "runs": [r.to_dict() for r in runs],
        }

    def _erasure(self, topic: str, state: TopicState) -> dict[int, PartitionErasure]:
        """Each partition's earliest erasure deadline (`lakecleaner audit topic`), from the
        manifests already read and one listing of the topic's objects."""
        return partition_erasures(
            self.lake, self.lake.topic(topic), state.manifests, state.cleaner, self.context.now_ms
        )

    def partition(self, topic: str, partition: int) -> PartitionView:
        """One partition's view (404 when the topic has no such partition)."""
        state = self._state(topic)
        if partition in state.unreadable:
            raise HTTPException(503, f"partition {topic}-{partition} cannot be read: {state.unreadable[partition]}")
        if partition not in state.manifests:
            raise HTTPException(404, f"topic {topic} has no partition {partition}")
        return partition_view(state, partition)

    def run(self, topic: str, run_id: str) -> dict[str, Any]:
        """One run: its figures and every report it stored (404 when unknown)."""
        record = run_record(self.lake.store, topic, run_id, self.dag_runs(dag_id_of(topic), RUN_HISTORY))
        if record is None:
            raise HTTPException(404, f"topic {topic} has no run {run_id}")
        return {**record.to_dict(), "reports_content": run_reports(self.lake.store, topic, run_id)}

    # -- HTML ------------------------------------------------------------------------------------
    def _render(self, template: str, **values: Any) -> str:
        context = self.context
        return _ENV.get_template(template).render(
            base=context.base,
            airflow_base=context.airflow_base,
            q=context.query,
            header=self._header(),
            dag_run_url=context.dag_run_url,
            can_trigger=context.can_trigger,
            **values,
        )

    def guarded_html(self, topic: str, render: Callable[[], str]) -> str:
        """`render()`, or, when what it reads is damaged or unreachable (a LakeCleanerError other
        than a topic that does not exist, which stays a 404), the page with an error box saying
        what and how to fix it: one damaged object is one message, never a page of 500s."""
        try:
            return render()
        except TopicNotFound:
            raise
        except LakeCleanerError as exc:
            return self._render("error.html", title=f"{topic}: cannot be shown", topic=topic, message=str(exc))

    def overview_html(self) -> str:
        return self._render("overview.html", page=self.overview())

    def topic_html(self, topic: str) -> str:
        state, runs, views = self._topic_parts(topic)
        bars = {v.plan.partition: Markup(render_partition_svg(v, width=360, compact=True)) for v in views}
        return self._render(
            "topic.html",
            topic=topic_overview(state, runs),
            plan=state.plan,
            views=views,
            bars=bars,
            erasure=self._erasure(topic, state),
            runs=[r.to_dict() for r in runs],
            has_dag=self._has_dag(topic),
        )

    def partition_html(self, topic: str, partition: int) -> str:
        view = self.partition(topic, partition)
        return self._render(
            "partition.html",
            topic=topic,
            dag_id=dag_id_of(topic),
            view=view.to_dict(),
            bar=Markup(render_partition_svg(view)),
            legend=legend(view),
            has_dag=self._has_dag(topic),
        )

    def run_html(self, topic: str, run_id: str) -> str:
        return self._render("run.html", topic=topic, dag_id=dag_id_of(topic), run=self.run(topic, run_id))
