"""The dashboard's pages: the data of each page (returned as JSON by the API) and its HTML.

HTML is rendered server-side from Jinja templates (autoescaped) with the SVG bars inlined, and
needs nothing from the internet: no CDN, no web fonts, one small inline script for the trigger
buttons.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

from fastapi import HTTPException
from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from lakecleaner.audit import PartitionErasure, partition_erasures
from lakecleaner.charts.history import history_charts, rendered
from lakecleaner.charts.lines import render_sparkline
from lakecleaner.charts.units import human_bytes, human_seconds
from lakecleaner.config import TopicConfig
from lakecleaner.dashboard.partition_view import PartitionView, partition_view
from lakecleaner.dashboard.svg import legend, render_partition_svg
from lakecleaner.errors import LakeCleanerError, TopicNotFound
from lakecleaner.io.concurrent import map_ordered
from lakecleaner.lake import Lake
from lakecleaner.policy.text import format_timestamp_ms
from lakecleaner.runs.digests import RunDigest, joined_with_airflow
from lakecleaner.runs.history import DEFAULT_RANGE, MAX_RUNS, RANGES, HistoryRange, topic_history
from lakecleaner.runs.naming import dag_id_of
from lakecleaner.runs.records import AirflowRun, RunRecord, TopicRuns, run_reports
from lakecleaner.summaries.deadlines import ErasureOverview
from lakecleaner.summaries.facts import TopicState, facts_of_state, load_facts, load_topic
from lakecleaner.summaries.overview import topic_overview
from lakecleaner.summaries.read import TopicFacts

T = TypeVar("T")

#: How many runs the run history shows.
RUN_HISTORY = 20


_ENV = Environment(
    loader=PackageLoader("lakecleaner.dashboard", "templates"), autoescape=True, undefined=StrictUndefined
)


def _sparkline(trend: dict[str, Any]) -> Markup:
    """The overview's sparkline of a topic's `trend` (`data.trend`)."""
    what = "dirty ratio" if trend["metric"] == "dirty_ratio" else "log size"
    title = f"{what} at the last {len(trend['values'])} runs with figures"
    return Markup(render_sparkline(trend["values"], width=96, title=title))


_ENV.filters.update(
    bytes=human_bytes, duration=human_seconds, ts=format_timestamp_ms, num="{:,}".format, sparkline=_sparkline
)


#: How many due partitions an overview row lists (the topic's page lists them all).
OVERVIEW_DUE = 10


def shortened(row: dict[str, Any]) -> dict[str, Any]:
    """An overview row with its first OVERVIEW_DUE due partitions, and how many more there are
    (`partitions_due_more`): a row of a topic with a hundred partitions due stays a row."""
    due = row["partitions_due"]
    return {**row, "partitions_due": due[:OVERVIEW_DUE], "partitions_due_more": max(0, len(due) - OVERVIEW_DUE)}


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
    #: Whether Airflow has the DAG paused (None: Airflow does not know the DAG yet).
    paused: Callable[[str], bool | None]

    @property
    def query(self) -> str:
        """The query string that keeps an explicit `now` on every link."""
        return "?" + urlencode(self.kept) if self.explicit_now else ""

    @property
    def kept(self) -> dict[str, str | int]:
        """The parameters every link of a page keeps: an explicit `now`."""
        return {"now": self.explicit_now} if self.explicit_now else {}

    def dag_run_url(self, dag_id: str, run_id: str) -> str:
        """The DAG run's page in the Airflow UI."""
        return f"{self.airflow_base}/dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}"


#: Topics on one page of the overview by default, and at most.
PER_PAGE = 1000
MAX_PER_PAGE = 10_000


@dataclass(frozen=True)
class Paging:
    """One page of a listing (the overview's topics, the erasure overview's deadlines): `page` (from
    1) of `per_page` rows, of the topics whose names hold `match`."""

    page: int = 1
    per_page: int = PER_PAGE
    match: str | None = None

    def of(self, items: Sequence[T]) -> list[T]:
        start = (self.page - 1) * self.per_page
        return list(items[start : start + self.per_page])

    def to_dict(self, total: int, counted: str = "topics") -> dict[str, Any]:
        """The page's figures, with the `total` of what is paged under the name `counted`."""
        return {
            "page": self.page,
            "per_page": self.per_page,
            "pages": max(1, -(-total // self.per_page)),
            counted: total,
            "match": self.match,
        }


class Pages:
    """The pages of one request: a lake, the request's context and Airflow's DAG runs."""

    def __init__(self, lake: Lake, context: PageContext, dag_runs: Callable[[str, int], list[AirflowRun]]) -> None:
        self.lake = lake
        self.context = context
        self.dag_runs = dag_runs

    # -- data (the JSON API) ---------------------------------------------------------------------
    def _state(self, topic: str) -> TopicState:
        return load_topic(self.lake, topic, self.context.now_ms)

    def runs(self, topic: str) -> list[RunRecord]:
        """The topic's run history, newest first."""
        return self._runs(topic).newest(RUN_HISTORY)

    def _runs(self, topic: str, airflow_runs: list[AirflowRun] | None = None, limit: int = RUN_HISTORY) -> TopicRuns:
        """The topic's runs for this request: its run folders listed once, and its DAG's `limit`
        newest runs asked of Airflow once (`airflow_runs`: those runs, when already listed)."""
        if airflow_runs is None:
            airflow_runs = self.dag_runs(dag_id_of(topic), limit)
        return TopicRuns(self.lake.store, topic, airflow_runs, self.lake.config.storage.max_concurrency)

    def _has_dag(self, topic: str) -> bool:
        """Whether the topic has a DAG: the DAGs are built from the config file's topics."""
        return topic in self.lake.config.topics

    def _overview_row(
        self, topic: str, in_lake: bool, facts: TopicFacts | str | None, airflow_runs: list[AirflowRun]
    ) -> dict[str, Any]:
        has_dag = self._has_dag(topic)
        paused = self.context.paused(dag_id_of(topic)) if has_dag else None
        row = {"topic": topic, "dag_id": dag_id_of(topic), "has_dag": has_dag, "paused": paused, "in_lake": in_lake}
        row["error"] = None
        if not in_lake:
            return row
        if not isinstance(facts, TopicFacts):
            return {**row, "error": facts}
        try:
            if facts.runs is None:  # no summary: the run reports themselves
                runs = [RunDigest.of(r) for r in self._runs(topic, airflow_runs).newest(RUN_HISTORY)]
            else:
                runs = joined_with_airflow(facts.runs, airflow_runs)
            return {**row, **shortened(topic_overview(facts, runs, self.context.now_ms))}
        except LakeCleanerError as exc:
            return {**row, "error": str(exc)}

    def overview(self, paging: Paging = Paging()) -> dict[str, Any]:
        """The topics the user may read (the config file's, each with a DAG, and those only in the
        lake) whose names hold `paging.match`, one page of them in name order, with their overview
        figures: from each topic's summary where it is current, else from its manifests
        (`load_facts`, issue 50), in a few concurrent rounds for the page's topics only."""
        in_lake = set(self.lake.list_topics())
        readable = [t for t in sorted(set(self.lake.config.topics) | in_lake) if self.context.can_read(dag_id_of(t))]
        matching = [t for t in readable if paging.match is None or paging.match in t]
        names = paging.of(matching)
        stored = [t for t in names if t in in_lake]
        facts: dict[str, TopicFacts | str]
        try:
            facts = load_facts(self.lake, stored, self.context.now_ms)
        except LakeCleanerError as exc:  # the consumer offsets cannot be listed: every topic says why
            facts = dict.fromkeys(names, str(exc))
        airflow = {t: self.dag_runs(dag_id_of(t), RUN_HISTORY) for t in stored}  # Airflow's database
        rows = map_ordered(
            lambda t: self._overview_row(t, t in in_lake, facts.get(t), airflow.get(t, [])),
            names,
            self.lake.config.storage.max_concurrency,
        )
        return {**self._header(), "topics": rows, "paging": paging.to_dict(len(matching))}

    def erasure(self, paging: Paging = Paging(), within_hours: int | None = None) -> dict[str, Any]:
        """The erasure overview (`summaries.deadlines`, as `lakecleaner audit lake`): the deletion
        deadlines of the topics in the lake the user may read whose names hold `paging.match`,
        soonest first, a page of them; with `within_hours`, the overdue and those due within it."""
        readable = [
            t
            for t in self.lake.list_topics()
            if (paging.match is None or paging.match in t) and self.context.can_read(dag_id_of(t))
        ]
        overview = ErasureOverview.of(
            load_facts(self.lake, readable, self.context.now_ms), self.context.now_ms, within_hours
        )
        rows = [
            {**d.to_dict(), "at": format_timestamp_ms(d.deadline.deadline_ms)} for d in paging.of(overview.deadlines)
        ]
        return {
            **self._header(),
            "within_hours": within_hours,
            "overdue": overview.overdue,
            "deadlines": rows,
            "paging": paging.to_dict(len(overview.deadlines), "deadlines"),
            **overview.beside_deadlines(),
        }

    def _header(self) -> dict[str, Any]:
        return {"now_ms": self.context.now_ms, "now": format_timestamp_ms(self.context.now_ms), "lake": self.lake.uri}

    def _topic_parts(self, topic: str, runs: TopicRuns) -> tuple[TopicState, list[RunRecord], list[PartitionView]]:
        state = self._state(topic)
        return state, runs.newest(RUN_HISTORY), [partition_view(state, p) for p in sorted(state.manifests)]

    def topic(self, topic: str) -> dict[str, Any]:
        """The topic's overview, effective config, partitions, erasure deadlines and run history."""
        state, runs, views = self._topic_parts(topic, self._runs(topic))
        return {
            **self._header(),
            **self._topic_row(state, runs),
            "has_dag": self._has_dag(topic),
            "paused": self.context.paused(dag_id_of(topic)) if self._has_dag(topic) else None,
            "config": state.plan.config.to_kafka_dict(),
            "partition_views": [v.to_dict() for v in views],
            "erasure": {str(p): e.to_dict() for p, e in self._erasure(topic, state).items()},
            "runs": [r.to_dict() for r in runs],
        }

    def _topic_row(self, state: TopicState, runs: list[RunRecord]) -> dict[str, Any]:
        """The topic page's overview, planned at the request's "now" from the manifests."""
        return topic_overview(facts_of_state(state), [RunDigest.of(r) for r in runs], self.context.now_ms)

    def _erasure(self, topic: str, state: TopicState) -> dict[int, PartitionErasure]:
        """Each partition's earliest erasure deadline (`lakecleaner audit topic`), from the
        manifests already read and one listing of the topic's objects."""
        return partition_erasures(
            self.lake, self.lake.topic(topic), state.manifests, state.cleaner, self.context.now_ms
        )

    def partition(self, topic: str, partition: int) -> PartitionView:
        """One partition's view (404 when the topic has no such partition)."""
        return self._partition_view(self._state(topic), topic, partition)

    @staticmethod
    def _partition_view(state: TopicState, topic: str, partition: int) -> PartitionView:
        if partition in state.unreadable:
            raise HTTPException(503, f"partition {topic}-{partition} cannot be read: {state.unreadable[partition]}")
        if partition not in state.manifests:
            raise HTTPException(404, f"topic {topic} has no partition {partition}")
        return partition_view(state, partition)

    def history(self, topic: str, since_ms: int) -> dict[str, Any]:
        """The topic's and its partitions' figures at each run whose "now" is at or after `since_ms`
        (`runs/history.py`), oldest first."""
        if topic not in self.lake.config.topics:
            self.lake.topic(topic)  # a topic only in the lake: TopicNotFound (404) when it is not there either
        points = topic_history(self._runs(topic, limit=MAX_RUNS), since_ms)
        return {"topic": topic, "since_ms": since_ms, "points": [p.to_dict() for p in points]}

    def _history_section(
        self, runs: TopicRuns, range_name: HistoryRange, partition: int | None, config: TopicConfig
    ) -> dict[str, Any]:
        """The charts of the topic's page (`partition` None) or a partition's over the range, and
        the links to the other ranges."""
        start = self.context.now_ms - RANGES[range_name]
        points = topic_history(runs, start, until_ms=self.context.now_ms)
        ratio = config.min_cleanable_dirty_ratio
        charts = history_charts(points, partition, start, self.context.now_ms, config.compact, ratio)
        links = {name: "?" + urlencode({**self.context.kept, "range": name}) for name in RANGES}
        return {
            "range": range_name,
            "links": links,
            "runs": len({p.run_id for p in points}),
            "charts": [Markup(svg) for svg in rendered(charts)],
        }

    def run(self, topic: str, run_id: str) -> dict[str, Any]:
        """One run: its figures and every report it stored (404 when unknown)."""
        record = self._runs(topic).record(run_id)
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
            paused=context.paused,
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

    def overview_html(self, paging: Paging = Paging()) -> str:
        page = self.overview(paging)
        return self._render("overview.html", page=page, paging=page["paging"], links=self._page_links(paging))

    def erasure_html(self, paging: Paging = Paging(), within_hours: int | None = None) -> str:
        page = self.erasure(paging, within_hours)
        within = {} if within_hours is None else {"within_hours": within_hours}
        return self._render("erasure.html", page=page, paging=page["paging"], links=self._page_links(paging, within))

    def _page_links(self, paging: Paging, kept: dict[str, Any] | None = None) -> dict[int, str]:
        """The query strings of the pages before and after `paging`'s, keeping the request's
        parameters (`kept` besides the context's)."""
        keep = self.context.kept | (kept or {})
        keep |= {"per_page": paging.per_page} if paging.per_page != PER_PAGE else {}
        keep |= {"match": paging.match} if paging.match else {}
        return {n: "?" + urlencode({**keep, "page": n}) for n in (paging.page - 1, paging.page + 1)}

    def topic_html(self, topic: str, range_name: HistoryRange = DEFAULT_RANGE) -> str:
        topic_runs = self._runs(topic, limit=MAX_RUNS)  # one listing for the run table and the charts
        state, runs, views = self._topic_parts(topic, topic_runs)
        bars = {v.plan.partition: Markup(render_partition_svg(v, width=360, compact=True)) for v in views}
        return self._render(
            "topic.html",
            history=self._history_section(topic_runs, range_name, None, state.plan.config),
            topic=self._topic_row(state, runs),
            plan=state.plan,
            views=views,
            bars=bars,
            erasure=self._erasure(topic, state),
            runs=[r.to_dict() for r in runs],
            has_dag=self._has_dag(topic),
        )

    def partition_html(self, topic: str, partition: int, range_name: HistoryRange = DEFAULT_RANGE) -> str:
        state = self._state(topic)
        view = self._partition_view(state, topic, partition)
        return self._render(
            "partition.html",
            history=self._history_section(self._runs(topic, limit=MAX_RUNS), range_name, partition, state.plan.config),
            topic=topic,
            dag_id=dag_id_of(topic),
            view=view.to_dict(),
            bar=Markup(render_partition_svg(view)),
            legend=legend(view),
            has_dag=self._has_dag(topic),
        )

    def run_html(self, topic: str, run_id: str) -> str:
        return self._render("run.html", topic=topic, dag_id=dag_id_of(topic), run=self.run(topic, run_id))
