"""The quality gate (DESIGN section 5): Great Expectations checks of the staged output against
the input, before anything is committed.

Pass 2 settles what each group must hold from the input it reads and pass 1's winners
(`gate_rows.Expected`); after staging, Spark tasks read back every file the new log would hold
for the cleaned range and emit a row per violation (`gate_rows`). A partition cleaned by one task
(`recopy.PartitionTask`) whose output fits one offset map is read back by that task straight
after pass 2 (`recopy.gate_in_task`), and its findings stand while every staged file has the HEAD
the task saw before reading it; the other partitions, and one whose staged file changed since,
are read back by the gate's own tasks: a task per partition, or, for a partition whose keys
outgrow one offset map, record tasks over shares of its groups and then a task per key bucket
over the keys they spilled. The uncleanable range [U, next offset) is checked on the driver: a
segment there is flagged when the manifest the commit would write changes it.

Validation runs through the project's GX runner, `lakecleaner.quality`, imported only when a
gate runs (Spark's Python workers never load Great Expectations), on pandas DataFrames on the
driver, where the violations already are: GX's Spark engine would start several Spark jobs for a
table of a few rows (0.5 s a run, measured, against 0.07 s), and it works on every kind of Spark
session, Connect included. Two levels of detail:

- always: the violations are counted per partition and check, and one
  `expect_column_max_to_be_between(max_value=0)` per check runs on that DataFrame of counts
  (a row per partition), so all partitions are validated together;
- when that fails: each partition's flag rows (a row per violation, its check false and the
  others null, and a row per segment of [U, next offset)) are validated on their own with
  `expect_column_values_to_be_in_set([True])` per check, so the report names the failing
  partitions and samples the offending rows by (partition, offset, segment_id).

A partition also fails when one of its files cannot be read back.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyarrow as pa
from pyspark.sql import SparkSession

from lakecleaner.config import TopicConfig
from lakecleaner.engine.gate_rows import (
    VIOLATION_SCHEMA,
    GateOutcome,
    GateRules,
    GateTask,
    KeysTask,
    gate_check,
    gate_keys,
)
from lakecleaner.engine.sparkio import Overlap, is_connect, run_tasks
from lakecleaner.engine.storage import StoreSpec
from lakecleaner.log.key_index import KeyIndex
from lakecleaner.quality import SAMPLE_SIZE

if TYPE_CHECKING:
    from lakecleaner.quality import Check, QualityReport

INDEX_COLUMNS = ["partition", "offset", "segment_id"]
#: The key index the gate wrote of each file it read back (`gate_rows._index_of`), by partition
#: and file path.
KeyIndexes = dict[int, dict[str, KeyIndex]]
READABLE_RULE = "every input and staged file of the partition can be read back"


@dataclass(frozen=True)
class GateCheck:
    """A flag column of the flag DataFrame, and its rule in words."""

    column: str
    rule: str


#: Pass 1 trusts the cleaned section below the cleaner checkpoint to hold each key once; when it
#: does not, the run resets the checkpoint (`engine.run`).
CLEAN_KEYS_ONCE = GateCheck(
    "clean_keys_once",
    "the cleaned section below the cleaner checkpoint holds each key once (if not, the checkpoint was moved "
    "over records never cleaned: the run resets it, and the next run maps the partition from its log start)",
)
CHECKS = (
    GateCheck("unique_key", "keys are unique in the cleaned range"),
    CLEAN_KEYS_ONCE,
    GateCheck("has_key", "every output record has a key"),
    GateCheck(
        "is_winner",
        "every output record is its key's winner (pass 1) at or after the log start, not an expired tombstone",
    ),
    GateCheck("winner_kept", "every key's winner is in the output, unless it is an expired tombstone"),
    GateCheck(
        "unchanged", "every output record is the input record at its offset, unchanged (key, value, timestamp, headers)"
    ),
    GateCheck(
        "horizon_as_expected",
        "delete_horizon_ms is unchanged, or set to now + delete.retention.ms on a tombstone that had none",
    ),
    GateCheck("offset_increasing", "offsets strictly increase in each output segment, within its range"),
    GateCheck("entry_matches", "every staged file holds as many records as its manifest entry says"),
    GateCheck("untouched", "the uncleanable range [U, next offset) is untouched"),
)


@dataclass(frozen=True)
class UncleanableSegment:
    """A segment at or after U and whether the manifest the commit would write leaves it as it is."""

    partition: int
    segment_id: str
    base_offset: int
    untouched: bool


def _violations(
    spark: SparkSession, spec: StoreSpec, tasks: Sequence[GateTask], checked: Sequence[GateOutcome], rules: GateRules
) -> tuple[pa.Table, dict[int, str], KeyIndexes]:
    """Every task's violation rows (`gate_rows`; none when the output is right), why a
    partition's files could not be read back and the key indexes written of its files:
    those pass 2's tasks found (`checked`), then the record tasks, then the key tasks of the
    partitions checked in several buckets; their spills are deleted whatever happens."""
    try:
        outcomes = run_tasks(
            spark,
            tasks,
            partial(gate_check, spec, rules),
            "lakecleaner quality gate: read back the output",
            weight=lambda t: sum(f.size_bytes for g in t.groups for f in g.files),
            overlap=Overlap.of(spec),
        )
        outcomes += run_tasks(
            spark,
            _keys_tasks(tasks, outcomes),
            partial(gate_keys, spec),
            "lakecleaner quality gate: repeated keys",
            weight=lambda t: sum(s.rows for s in t.spills),
        )
    finally:
        store = spec.open()
        for task in tasks:
            if task.spill:
                store.delete(task.prefix + task.spill)
    outcomes = [*checked, *outcomes]
    unreadable = {o.partition: o.unreadable for o in outcomes if o.unreadable is not None}
    indexes: KeyIndexes = {}
    for o in outcomes:
        indexes.setdefault(o.partition, {}).update(o.indexes)
    violations = pa.concat_tables([VIOLATION_SCHEMA.empty_table(), *[o.violations for o in outcomes]])
    return violations, unreadable, indexes


def _keys_tasks(tasks: Sequence[GateTask], outcomes: Sequence[GateOutcome]) -> list[KeysTask]:
    """A task per key bucket of each partition checked in several, over its record tasks' spills
    (none for a partition whose files could not all be read back)."""
    failed = {o.partition for o in outcomes if o.unreadable is not None}
    spilled: dict[int, list[GateOutcome]] = {}
    for task, outcome in zip(tasks, outcomes, strict=True):
        if task.buckets > 1 and task.partition not in failed:
            spilled.setdefault(task.partition, []).append(outcome)
    first = {t.partition: t for t in tasks}
    return [
        KeysTask(p, first[p].prefix, first[p].clean_end, tuple(o.spills[b] for o in found))
        for p, found in spilled.items()
        for b in range(first[p].buckets)
    ]


def violation_counts(
    violations: pa.Table, partitions: Sequence[int], segments: Sequence[UncleanableSegment]
) -> pd.DataFrame:
    """Per partition, how many records, offsets, groups and segments break each check: a row for
    each of `partitions`."""
    found = Counter(
        zip(violations.column("partition").to_pylist(), violations.column("check").to_pylist(), strict=True)
    )
    found.update((s.partition, "untouched") for s in segments if not s.untouched)
    columns = {check.column: pa.array([found[(p, check.column)] for p in partitions], pa.int64()) for check in CHECKS}
    return pa.table({"partition": pa.array(partitions, pa.int32()), **columns}).to_pandas()


def flag_frame(violations: pa.Table, segments: Sequence[UncleanableSegment]) -> pd.DataFrame:
    """The checks row by row: a row per violation (its check false, the others null) and per
    segment of [U, next offset)."""
    rows = [
        {
            "partition": p,
            "offset": o,
            "segment_id": None,
            **{c.column: False if c.column == check else None for c in CHECKS},
        }
        for p, o, check in zip(
            *(violations.column(n).to_pylist() for n in ("partition", "offset", "check")), strict=True
        )
    ]
    rows += [
        {"partition": s.partition, "offset": s.base_offset, "segment_id": s.segment_id, "untouched": s.untouched}
        for s in segments
    ]
    columns = ["partition", "offset", "segment_id", *[c.column for c in CHECKS]]
    return pd.DataFrame(rows, columns=columns).astype({c.column: "object" for c in CHECKS})


def _row_checks() -> list[Check]:
    """Row level: each flag column is true wherever it applies (GX skips nulls)."""
    from lakecleaner.quality import Check, expectations

    gxe = expectations()
    return [Check(c.rule, gxe.ExpectColumnValuesToBeInSet(column=c.column, value_set=[True])) for c in CHECKS]


def _count_checks() -> list[Check]:
    """Per partition: no row breaks any check."""
    from lakecleaner.quality import Check, expectations

    gxe = expectations()
    return [Check(c.rule, gxe.ExpectColumnMaxToBeBetween(column=c.column, max_value=0)) for c in CHECKS]


def _with_unreadable(report: QualityReport, message: str) -> QualityReport:
    from lakecleaner.quality import CheckOutcome, QualityReport

    failed = CheckOutcome(READABLE_RULE, "read_segment_file", False, sample=[message])
    return QualityReport(report.subject, (*report.outcomes, failed))


@dataclass(frozen=True)
class Validation:
    """One GX validation of the gate: `checks` ("counts" or "rows") on a pandas DataFrame."""

    subject: str
    frame: pd.DataFrame
    checks: str
    result_format: dict[str, Any] | None = None


def validate_frame(validation: Validation) -> QualityReport:
    """Run one of the gate's validations, wherever this runs (GX is imported on first use)."""
    from lakecleaner.quality import validate

    checks = _count_checks() if validation.checks == "counts" else _row_checks()
    return validate(validation.subject, validation.frame, checks, result_format=validation.result_format)


def _validator(spark: SparkSession) -> Callable[[list[Validation]], list[QualityReport]]:
    """Where the gate's validations run: on the driver of a classic session, which imports Great
    Expectations while Spark starts; for a Spark Connect client, in a Python worker of the server,
    which Spark keeps between tasks and runs, so GX's seconds of import are paid once per worker,
    not once per run."""
    if is_connect(spark):
        return lambda validations: run_tasks(
            spark, validations, validate_frame, "lakecleaner quality gate: expectations"
        )
    return lambda validations: [validate_frame(v) for v in validations]


def run_gate(
    spark: SparkSession,
    spec: StoreSpec,
    topic: str,
    tasks: Sequence[GateTask],
    checked: Sequence[GateOutcome],
    partitions: Sequence[int],
    segments: Sequence[UncleanableSegment],
    config: TopicConfig,
    now_ms: int,
) -> tuple[dict[int, QualityReport], KeyIndexes]:
    """Validate the staged output of `partitions`, read back by the gate's `tasks` or already by
    pass 2's tasks (`checked`); one report per partition, and the key indexes written of the
    files read back."""
    partitions = sorted(partitions)
    if not partitions:
        return {}, {}
    validate = _validator(spark)
    violations, unreadable, indexes = _violations(spark, spec, tasks, checked, GateRules.of(config, now_ms))
    counts = violation_counts(violations, partitions, segments)
    subject = f"compaction of {topic} partitions {','.join(map(str, partitions))}"
    (together,) = validate([Validation(subject, counts, "counts")])
    if together.success and not unreadable:
        return dict.fromkeys(partitions, together), indexes
    detailed = {
        "result_format": "SUMMARY",
        "unexpected_index_column_names": INDEX_COLUMNS,
        "partial_unexpected_count": SAMPLE_SIZE,
    }
    flags = flag_frame(violations, segments)
    one = [
        Validation(
            f"compaction of {topic}-{p}", flags[flags["partition"] == p].reset_index(drop=True), "rows", detailed
        )
        for p in partitions
    ]
    reports = dict(zip(partitions, validate(one), strict=True))
    for p, message in unreadable.items():
        reports[p] = _with_unreadable(reports[p], message)
    return reports, indexes
