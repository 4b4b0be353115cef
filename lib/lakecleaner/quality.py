"""Great Expectations 1.x quality checks: one runner, on pandas DataFrames.

Every rewrite (compaction) and every retention result is checked before it is committed.
A check is a list of `Check`s — a GX expectation plus the sentence a user reads when it
fails — run against one DataFrame in an ephemeral GX context. The result is a
`QualityReport`: JSON-serialisable, stored with the run report, printable.

Great Expectations takes seconds to import, so it is imported on the first validation, not with
this module: reports can be read, and validations sent to another process, without it. Every
import of it goes through this module (`expectations`, `validate`), which quiets GX's loggers
first: GX logs some two hundred INFO lines while it imports (its docs registry), which would
otherwise fill the log of every Airflow task that runs a check. GX's import is the fixed cost of
every process that validates (each retention task that deletes, each compaction's driver), so it
imports as lakecleaner uses it, on pandas alone (`_GXImport`): without the optional Spark and SQL
backends it would otherwise load (pyspark, with its ML and Connect parts, and SQLAlchemy), and with
scipy.stats and altair, which only expectations lakecleaner does not use touch, deferred. In a
retention task (Airflow and pandas loaded) that took GX's import and first validation from 5.1 to
2.3 s of CPU (docs/architecture.md, "Quality checks").
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import logging
import os
import sys
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any

os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")

if TYPE_CHECKING:
    import pandas as pd
    from great_expectations.expectations.expectation import Expectation

logging.getLogger("great_expectations").setLevel(logging.WARNING)

SAMPLE_SIZE = 5


@dataclass(frozen=True)
class Check:
    """One expectation and, in words, the rule it enforces."""

    rule: str
    expectation: Expectation


@dataclass(frozen=True)
class CheckOutcome:
    rule: str
    expectation: str
    success: bool
    unexpected_count: int | None = None
    sample: list[Any] = field(default_factory=list)
    observed: Any = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "expectation": self.expectation,
            "success": self.success,
            "unexpected_count": self.unexpected_count,
            "sample": [str(s) for s in self.sample],
            "observed": None if self.observed is None else str(self.observed),
        }


@dataclass(frozen=True)
class QualityReport:
    """The outcome of every check on one subject (e.g. "compaction of orders-3")."""

    subject: str
    outcomes: tuple[CheckOutcome, ...]

    @property
    def success(self) -> bool:
        return all(o.success for o in self.outcomes)

    @property
    def failures(self) -> tuple[CheckOutcome, ...]:
        return tuple(o for o in self.outcomes if not o.success)

    def summary(self) -> str:
        """One line when everything passed; otherwise one line per failed check with a sample."""
        if self.success:
            return f"{self.subject}: all {len(self.outcomes)} quality checks passed"
        lines = [f"{self.subject}: {len(self.failures)} of {len(self.outcomes)} quality checks failed"]
        for f in self.failures:
            count = "" if f.unexpected_count is None else f" ({f.unexpected_count} unexpected)"
            sample = f", e.g. {', '.join(str(s) for s in f.sample)}" if f.sample else ""
            observed = "" if f.observed is None else f", observed {f.observed}"
            lines.append(f"  - {f.rule} [{f.expectation}]{count}{observed}{sample}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"subject": self.subject, "success": self.success, "checks": [o.to_dict() for o in self.outcomes]}


_context_cache: list[Any] = []
#: One validation at a time in a process: they share the process's GX context and its validation
#: definitions (`_definition`).
_gx_lock = threading.Lock()


def _context() -> Any:
    """One ephemeral GX context per process (creating one makes a temporary docs directory)."""
    if not _context_cache:
        gx = _great_expectations()
        from great_expectations.data_context.types.base import ProgressBarsConfig

        context = gx.get_context(mode="ephemeral")
        context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
        _context_cache.append(context)
    return _context_cache[0]


#: Modules GX imports with itself but uses only inside the functions of expectations lakecleaner
#: does not use: deferred while GX imports (`_GXImport`).
DEFERRED_WITH_GX = frozenset({"scipy.stats", "altair"})
#: GX's optional backends (its Spark and SQL extras), which lakecleaner never validates on, and
#: the parts of Spark's that a Spark application has not loaded: not found while GX imports
#: (`_GXImport`), unless already loaded.
ABSENT_FOR_GX = frozenset({"pyspark", "pyspark.ml", "pyspark.sql.connect", "sqlalchemy"})


class _GXImport(importlib.abc.MetaPathFinder):
    """The finder in front of the others while GX imports, for the importing thread only (another
    thread's imports go on as ever): GX then imports as where lakecleaner's validations run on
    pandas alone, without its optional backends (`ABSENT_FOR_GX`), a set-up GX supports (they are
    its extras); and it defers the execution of `DEFERRED_WITH_GX` until an attribute of theirs
    is first used (the standard library's `importlib.util.LazyLoader`): GX's `from scipy import
    stats` costs nothing until an expectation calls `stats.entropy`. A module already loaded is
    not looked for, so it is neither deferred nor absent, and after GX's import nothing is."""

    def __init__(self) -> None:
        self.thread = threading.get_ident()

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if threading.get_ident() != self.thread:
            return None
        if fullname in ABSENT_FOR_GX:
            raise ModuleNotFoundError(f"No module named {fullname!r} while Great Expectations imports", name=fullname)
        if fullname not in DEFERRED_WITH_GX:
            return None
        for finder in sys.meta_path:
            find = None if finder is self else getattr(finder, "find_spec", None)
            spec: importlib.machinery.ModuleSpec | None = find(fullname, path, target) if find else None
            if spec is not None:
                if isinstance(spec.loader, importlib.abc.Loader) and hasattr(spec.loader, "exec_module"):
                    spec.loader = importlib.util.LazyLoader(spec.loader)
                return spec
        return None


_import_lock = threading.Lock()


def _great_expectations() -> ModuleType:
    """Great Expectations, imported on first use through `_GXImport`; then the GX loggers that set
    their own level below WARNING (one announces every ephemeral context's temporary docs
    directory) are raised to it, as the module's parent logger is."""
    with _import_lock:
        finder = _GXImport()
        sys.meta_path.insert(0, finder)
        try:
            import great_expectations as gx
        finally:
            sys.meta_path.remove(finder)
    for name, logger in list(logging.root.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger) and name.startswith("great_expectations."):
            logger.setLevel(max(logger.level, logging.WARNING) if logger.level else logging.NOTSET)
    return gx


def expectations() -> ModuleType:
    """GX's `great_expectations.expectations` module (imported on first use, GX's loggers quiet)."""
    _great_expectations()
    from great_expectations import expectations as gxe

    return gxe


def warm_up() -> None:
    """Import GX and run one tiny validation, so that what GX loads on first use is loaded now,
    in a process that then forks the processes that validate (Spark's worker daemon,
    `engine.worker_daemon`; Airflow's executor, `orchestration.executor`). No thread is left
    running to be lost in a fork: tqdm, which GX imports, starts no monitor thread."""
    import pandas as pd
    import tqdm

    tqdm.tqdm.monitor_interval = 0

    frame = pd.DataFrame({"flag": [True]})
    validate(
        "warm-up",
        frame,
        [Check("warm-up", expectations().ExpectColumnValuesToBeInSet(column="flag", value_set=[True]))],
    )


def validate(
    subject: str, dataframe: pd.DataFrame, checks: list[Check], *, result_format: str | dict[str, Any] | None = None
) -> QualityReport:
    """Run `checks` against a pandas DataFrame and report each outcome (the compaction gate's and
    retention's facts are small tables on the driver: `engine.quality` says why not on Spark).

    `result_format` is passed to GX (default: GX's own). With "BOOLEAN_ONLY" only success is
    computed (the fastest); with unexpected_index_column_names, a failed check's sample lists
    the offending rows by those columns instead of bare values.
    """
    with _gx_lock:
        result, ids = _run(dataframe, checks, result_format)
    by_id = dict(zip(ids, checks, strict=True))
    outcomes = []
    for r in result.results:
        config = r.expectation_config
        matched = by_id.get(config.id) if config is not None else None
        details = r.result or {}
        outcomes.append(
            CheckOutcome(
                rule=matched.rule if matched else str(config.type if config else "?"),
                expectation=str(config.type) if config is not None else "?",
                success=bool(r.success),
                unexpected_count=details.get("unexpected_count"),
                sample=list(
                    details.get("partial_unexpected_index_list") or details.get("partial_unexpected_list") or []
                )[:SAMPLE_SIZE],
                observed=details.get("observed_value"),
            )
        )
    return QualityReport(subject, tuple(outcomes))


def _run(
    dataframe: pd.DataFrame, checks: list[Check], result_format: str | dict[str, Any] | None
) -> tuple[Any, list[str]]:
    """One GX validation of `checks` on `dataframe` in the process's context (`_definition`), and
    the ids its expectations carry, in the order of `checks`."""
    definition, ids = _definition(checks)
    if result_format is None:
        return definition.run(batch_parameters={"dataframe": dataframe}), ids
    return definition.run(batch_parameters={"dataframe": dataframe}, result_format=result_format), ids


#: The validation definitions of the process's context, by their expectations (`_definition`):
#: lakecleaner's lists are a handful; a process that validated more keeps the latest.
_definitions: dict[str, tuple[Any, list[str]]] = {}
MAX_DEFINITIONS = 16


def _definition(checks: list[Check]) -> tuple[Any, list[str]]:
    """The validation definition of the expectations of `checks` on a whole pandas DataFrame, with
    its expectations' ids in their order: made once per process for each list of expectations
    (its data source, suite and definition stay in the process's context), since adding them
    costs more than running them (GX serialises each expectation and saves the context's
    configuration as YAML: two thirds of a compaction gate's validation, measured), and the gate
    and retention validate the same few lists on every run."""
    key = "[" + ",".join(f"{type(c.expectation).__name__}:{c.expectation.json(exclude={'id'})}" for c in checks) + "]"
    if key not in _definitions:
        gx = _great_expectations()
        context = _context()
        name = f"lakecleaner-{uuid.uuid4().hex[:8]}"
        source = context.data_sources.add_pandas(name)
        batch = source.add_dataframe_asset(name).add_batch_definition_whole_dataframe(name)
        suite = context.suites.add(gx.ExpectationSuite(name=name))
        ids = [str(suite.add_expectation(c.expectation.copy(update={"id": None})).id) for c in checks]
        definition = context.validation_definitions.add(gx.ValidationDefinition(name=name, data=batch, suite=suite))
        if len(_definitions) >= MAX_DEFINITIONS:  # a list seen long ago leaves the context
            _forget(context, next(iter(_definitions)))
        _definitions[key] = (definition, ids)
    return _definitions[key]


def _forget(context: Any, key: str) -> None:
    """Remove a validation definition, its suite and its data source from the context."""
    name = _definitions.pop(key)[0].name
    context.validation_definitions.delete(name)
    context.suites.delete(name)
    context.data_sources.delete(name)
