"""The dashboard's FastAPI app: the "Lake retention" pages and their JSON API.

    GET /                                          topics overview (HTML), a page of topics at a time
    GET /topics/{topic}                            partitions, gauges, run history, trigger buttons
    GET /topics/{topic}/partitions/{partition}     the partition's log drawn along the offset axis
    GET /topics/{topic}/runs/{run_id}              one run's reports and quality results
    GET /api/topics                                the overview as JSON (?page=, ?per_page=, ?match=)
    GET /api/topics/{topic}                        a topic with its partitions and runs as JSON
    GET /api/topics/{topic}/partitions/{partition} one partition as JSON
    GET /api/topics/{topic}/runs                   the run history as JSON
    GET /api/topics/{topic}/runs/{run_id}          one run's reports as JSON

Every route needs a signed-in Airflow user (401 otherwise) who may read DAGs (403 otherwise);
a topic's routes need read access to the topic's DAG. `?now=<ISO-8601 or epoch ms>` sets the
"now" the figures are computed at (default: the request time). The app only reads: the trigger
buttons call Airflow's own REST API from the browser, with the user's own Airflow session.
"""

# No `from __future__ import annotations` here: FastAPI reads the routes' annotations at runtime, and
# those name types local to `create_app`.
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Protocol

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse

from lakecleaner.clock import parse_time_ms, wall_clock_ms
from lakecleaner.config import load_config
from lakecleaner.dashboard import URL_PREFIX
from lakecleaner.dashboard.pages import MAX_PER_PAGE, PER_PAGE, PageContext, Pages, Paging
from lakecleaner.errors import InvalidTopicName, LakeCleanerError, TopicNotFound
from lakecleaner.lake import Lake
from lakecleaner.names import validate_topic_name
from lakecleaner.runs.history import DEFAULT_RANGE, RANGES, HistoryRange
from lakecleaner.runs.naming import dag_id_of
from lakecleaner.runs.records import AirflowRun, valid_run_id


class Access(Protocol):
    """What a user may do, as the auth manager says."""

    def can_read(self, user: Any, dag_id: str | None) -> bool: ...

    def can_trigger(self, user: Any, dag_id: str) -> bool: ...


def open_configured_lake() -> Lake:
    """The lake of lakecleaner's config file ($LAKECLEANER_CONFIG), read again on every request."""
    return Lake.open(load_config())


@dataclass(frozen=True)
class Backend:
    """Everything the app needs from its host: `current_user` is a FastAPI dependency returning the
    signed-in user or raising 401; `dag_runs(dag_id, limit)` lists a DAG's recent runs; `dag_paused`
    says whether a DAG is paused."""

    current_user: Callable[..., Any]
    access: Access
    dag_runs: Callable[[str, int], list[AirflowRun]]
    open_lake: Callable[[], Lake] = open_configured_lake
    #: Whether Airflow has a DAG paused (None when it does not know the DAG).
    dag_paused: Callable[[str], bool | None] = lambda dag_id: None


def parse_now(now: str | None) -> int:
    """`?now=` as epoch ms: ISO-8601 (naive means UTC) or epoch milliseconds; absent means the wall clock."""
    if now is None or not now.strip():
        return wall_clock_ms()
    return parse_time_param("now", now)


def parse_time_param(name: str, value: str) -> int:
    """A time query parameter (ISO-8601, naive means UTC, or epoch ms) as epoch ms; 400 naming it."""
    try:
        return parse_time_ms(value)
    except ValueError as exc:
        raise HTTPException(400, f"{name}: {exc}") from None


@dataclass(frozen=True)
class Viewer:
    """A signed-in user who may read DAGs, and the "now" of the request."""

    user: Any
    now_ms: int
    explicit_now: str | None


def _topic_name(topic: str) -> str:
    try:
        return validate_topic_name(topic)
    except InvalidTopicName as exc:
        raise HTTPException(404, str(exc)) from None


def create_app(host: Backend) -> FastAPI:
    """The dashboard app, asking `host` who the user is, what they may do and what Airflow ran (in
    Airflow's API server: `airflow_backend.airflow_backend()`, wired by `plugin.DashboardApp`)."""
    app = FastAPI(title="lakecleaner dashboard", docs_url=None, redoc_url=None, openapi_url=None)

    def viewer(user: Annotated[Any, Depends(host.current_user)], now: Annotated[str | None, Query()] = None) -> Viewer:
        if not host.access.can_read(user, None):
            raise HTTPException(403, "Forbidden: reading DAGs is not allowed for this user")
        return Viewer(user, parse_now(now), now)

    def topic_viewer(topic: str, who: Annotated[Viewer, Depends(viewer)]) -> Viewer:
        if not host.access.can_read(who.user, dag_id_of(_topic_name(topic))):
            raise HTTPException(403, f"Forbidden: reading DAG {dag_id_of(topic)} is not allowed for this user")
        return who

    def pages(request: Request, who: Viewer) -> Pages:
        base = str(request.scope.get("root_path", "")).rstrip("/")
        context = PageContext(
            base=base,
            airflow_base=base.removesuffix(URL_PREFIX),
            now_ms=who.now_ms,
            explicit_now=who.explicit_now,
            can_read=lambda dag_id: host.access.can_read(who.user, dag_id),
            can_trigger=lambda dag_id: host.access.can_trigger(who.user, dag_id),
            paused=functools.cache(host.dag_paused),
        )
        return Pages(host.open_lake(), context, host.dag_runs)

    Reader = Annotated[Viewer, Depends(viewer)]
    RangeParam = Annotated[HistoryRange, Query(alias="range")]
    TopicReader = Annotated[Viewer, Depends(topic_viewer)]

    @app.exception_handler(LakeCleanerError)
    async def lake_error(request: Request, exc: LakeCleanerError) -> JSONResponse:
        status = 404 if isinstance(exc, TopicNotFound) else 503
        return JSONResponse({"detail": str(exc)}, status_code=status)

    def paging(
        page: Annotated[int, Query(ge=1)] = 1,
        per_page: Annotated[int, Query(ge=1, le=MAX_PER_PAGE)] = PER_PAGE,
        match: Annotated[str | None, Query(max_length=249)] = None,
    ) -> Paging:
        return Paging(page, per_page, match or None)

    OverviewPage = Annotated[Paging, Depends(paging)]

    @app.get("/", response_class=HTMLResponse)
    def overview_page(request: Request, who: Reader, page: OverviewPage) -> str:
        return pages(request, who).overview_html(page)

    WithinHours = Annotated[int | None, Query(ge=0, description="only the deadlines due within this many hours")]

    @app.get("/erasure", response_class=HTMLResponse)
    def erasure_page(request: Request, who: Reader, page: OverviewPage, within_hours: WithinHours = None) -> str:
        return pages(request, who).erasure_html(page, within_hours)

    @app.get("/topics/{topic}", response_class=HTMLResponse)
    def topic_page(request: Request, topic: str, who: TopicReader, history_range: RangeParam = DEFAULT_RANGE) -> str:
        view = pages(request, who)
        return view.guarded_html(topic, lambda: view.topic_html(topic, history_range))

    @app.get("/topics/{topic}/partitions/{partition}", response_class=HTMLResponse)
    def partition_page(
        request: Request, topic: str, partition: int, who: TopicReader, history_range: RangeParam = DEFAULT_RANGE
    ) -> str:
        view = pages(request, who)
        return view.guarded_html(topic, lambda: view.partition_html(topic, partition, history_range))

    @app.get("/topics/{topic}/runs/{run_id}", response_class=HTMLResponse)
    def run_page(request: Request, topic: str, run_id: str, who: TopicReader) -> str:
        view = pages(request, who)
        return view.guarded_html(topic, lambda: view.run_html(topic, _run_id(run_id)))

    @app.get("/api/topics")
    def overview_json(request: Request, who: Reader, page: OverviewPage) -> JSONResponse:
        """A page of topics' rows (`?page=`, `?per_page=`, `?match=`: a part of the name). Returned
        as it is (plain JSON values): FastAPI's encoding of a returned dict walks every value in
        Python, a third of a second for 1,000 topics."""
        return JSONResponse(pages(request, who).overview(page))

    @app.get("/api/erasure")
    def erasure_json(
        request: Request, who: Reader, page: OverviewPage, within_hours: WithinHours = None
    ) -> JSONResponse:
        """A page of the deletion deadlines of the topics the user may read, soonest first
        (`?within_hours=`, and `?page=`, `?per_page=`, `?match=` as the overview's)."""
        return JSONResponse(pages(request, who).erasure(page, within_hours))

    @app.get("/api/topics/{topic}")
    def topic_json(request: Request, topic: str, who: TopicReader) -> dict[str, Any]:
        return pages(request, who).topic(topic)

    @app.get("/api/topics/{topic}/partitions/{partition}")
    def partition_json(request: Request, topic: str, partition: int, who: TopicReader) -> dict[str, Any]:
        return pages(request, who).partition(topic, partition).to_dict()

    @app.get("/api/topics/{topic}/history")
    def history_json(
        request: Request, topic: str, who: TopicReader, since: Annotated[str | None, Query()] = None
    ) -> dict[str, Any]:
        """The topic's figures at each run since `since` (ISO-8601 or epoch ms; default: 7 days
        before the request's now), topic points (`partition` null) and partition points."""
        since_ms = who.now_ms - RANGES[DEFAULT_RANGE] if since is None else parse_time_param("since", since)
        return pages(request, who).history(topic, since_ms)

    @app.get("/api/topics/{topic}/runs")
    def runs_json(request: Request, topic: str, who: TopicReader) -> list[dict[str, Any]]:
        return [r.to_dict() for r in pages(request, who).runs(topic)]

    @app.get("/api/topics/{topic}/runs/{run_id}")
    def run_json(request: Request, topic: str, run_id: str, who: TopicReader) -> dict[str, Any]:
        return pages(request, who).run(topic, _run_id(run_id))

    return app


def _run_id(run_id: str) -> str:
    if not valid_run_id(run_id):
        raise HTTPException(404, f"no run {run_id!r}: a run id has only letters, digits, '.', '_' and '-'")
    return run_id
