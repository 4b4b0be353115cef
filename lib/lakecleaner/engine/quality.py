"""The quality gate (DESIGN section 5): Great Expectations checks of the staged output against
the input, on a Spark DataFrame, before anything is committed.

`gate_rows` reads every group's input and staged output back from storage, after staging, and
settles the facts that need one record and its input: unchanged, horizon as KIP-534 says,
offsets increasing, record counts, a keyed record of the cleaned range that is not an expired
tombstone. It also emits the input records that could be their key's winner. Spark then
decides, independently of pass 1 and in Spark SQL (the KIP-280 header version is parsed from
the raw headers here, not by `versions`), whether the output holds exactly each key's winner:

- each output record is joined (broadcast when small) to the candidates of its key; a candidate
  that beats it — a higher (order columns…, offset) — is a violation;
- the keys with no output record are ranked with a window (usually few: deleted keys); the
  winner of each must be an expired tombstone.

With "keys are unique" and the per-record facts, that is exactly "for every key the output
holds the winner, or nothing for an expired tombstone".

The comparison DataFrame has a row per output record (with its flags), per violating
candidate, per key without output (its winner), and per segment of the uncleanable range
[U, next offset), flagged when the manifest the commit would write changes it. Flags of other
kinds of rows are null, which GX's column-map expectations skip, so each check is one
expectation: `expect_column_values_to_be_in_set` on a flag, or `expect_column_values_to_be_unique`.
They run through the project's GX runner, `lakecleaner.quality`, imported only when a gate runs
(Spark's Python workers never load Great Expectations). All partitions are validated together,
computing only success; when that fails, each partition is validated on its own with samples of
the offending rows, so the report names the failing partitions and rows. A partition also fails
when one of its files cannot be read back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import partial
from typing import TYPE_CHECKING, Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from lakecleaner.config import TopicConfig
from lakecleaner.engine.gate_rows import GATE_SCHEMA, GateRules, GateTask, gate_scan
from lakecleaner.engine.sparkio import Collector, ddl, map_tasks
from lakecleaner.engine.storage import StoreSpec
from lakecleaner.engine.versions import VERSION_BYTES

if TYPE_CHECKING:
    from lakecleaner.quality import Check, QualityReport

INDEX_COLUMNS = ["partition", "offset", "segment_id"]
READABLE_RULE = "every input and staged file of the partition can be read back"


@dataclass(frozen=True)
class GateCheck:
    """One expectation on a flag column of the comparison DataFrame, and its rule in words."""

    column: str
    rule: str
    unique: bool = False


CHECKS = (
    GateCheck("pkey", "keys are unique in the cleaned range", unique=True),
    GateCheck("has_key", "every output record has a key"),
    GateCheck("in_input", "every output record exists in the input at the same offset"),
    GateCheck("unchanged", "every output record is unchanged (key, value, timestamp, headers)"),
    GateCheck(
        "horizon_as_expected",
        "delete_horizon_ms is unchanged, or set to now + delete.retention.ms on a tombstone that had none",
    ),
    GateCheck("survives", "every output record is a keyed record of the cleaned range, not an expired tombstone"),
    GateCheck("offset_increasing", "offsets strictly increase in each output segment, within its range"),
    GateCheck("entry_matches", "every staged file holds as many records as its manifest entry says"),
    GateCheck("not_beaten", "no input record beats the output record of its key (it is the key's winner)"),
    GateCheck("winner_expired", "a key is left out of the output only when its winner is an expired tombstone"),
    GateCheck("untouched", "the uncleanable range [U, next offset) is untouched"),
)


@dataclass(frozen=True)
class UncleanableSegment:
    """A segment at or after U and whether the manifest the commit would write leaves it as it is."""

    partition: int
    segment_id: str
    base_offset: int
    untouched: bool


def _order_columns(config: TopicConfig) -> dict[str, Column]:
    """The winner ordering in Spark SQL, most significant first, compared before the offset."""
    if config.compaction_strategy == "timestamp":
        return {"order_timestamp": F.col("timestamp")}
    if config.compaction_strategy == "header":
        name = config.compaction_strategy_header
        valid = F.filter(
            "headers",
            lambda h: (h.getField("key") == F.lit(name)) & (F.octet_length(h.getField("value")) == VERSION_BYTES),
        )
        raw = F.try_element_at(valid, F.lit(-1)).getField("value")
        unsigned = F.conv(F.hex(raw), 16, 10).cast("decimal(20,0)")
        signed = F.when(unsigned >= F.lit(Decimal(2**63)), unsigned - F.lit(Decimal(2**64))).otherwise(unsigned)
        return {"order_has_version": raw.isNotNull(), "order_version": F.coalesce(signed, F.lit(Decimal(0)))}
    return {}


def _ordered(rows: DataFrame, config: TopicConfig, prefix: str = "") -> list[Column]:
    """The ordering columns of `rows`, then the offset, named with `prefix`."""
    order = _order_columns(config)
    return [*[value.alias(prefix + name) for name, value in order.items()], F.col("offset").alias(prefix + "offset")]


def _output_rows(rows: DataFrame) -> DataFrame:
    c = F.col
    pkey = F.concat_ws(":", c("partition").cast("string"), F.base64("out_key"))
    return rows.where(c("is_output")).select(
        "partition",
        "offset",
        F.when(c("out_key").isNotNull(), pkey).alias("pkey"),
        c("out_key").isNotNull().alias("has_key"),
        "in_input",
        "unchanged",
        "horizon_as_expected",
        (c("candidate") & ~c("expired")).alias("survives"),
        c("increasing").alias("offset_increasing"),
        "entry_matches",
    )


def _winner_rows(rows: DataFrame, config: TopicConfig, broadcast_output: bool) -> tuple[DataFrame, DataFrame]:
    """(candidates that beat the output record of their key, flagged; the winner of each key
    with no output record, flagged unless it is an expired tombstone)."""
    c = F.col
    names = [*_order_columns(config), "offset"]
    kept = rows.where(c("is_output") & c("candidate")).select("partition", "key", *_ordered(rows, config, "kept_"))
    candidates = rows.where(~c("is_output")).select("partition", "key", *_ordered(rows, config), "expired")
    joined = candidates.join(F.broadcast(kept) if broadcast_output else kept, ["partition", "key"], "left")
    beats = F.struct(*[c(n) for n in names]) > F.struct(*[c(f"kept_{n}") for n in names])
    beaten = joined.where(c("kept_offset").isNotNull() & beats).select(
        "partition", "offset", F.lit(False).alias("not_beaten")
    )
    by_key = Window.partitionBy("partition", "key").orderBy(*[c(n).desc() for n in names])
    vanished = (
        joined.where(c("kept_offset").isNull())
        .withColumn("rank", F.row_number().over(by_key))
        .where(c("rank") == 1)
        .select("partition", "offset", c("expired").alias("winner_expired"))
    )
    return beaten, vanished


def comparison_frame(
    spark: SparkSession,
    spec: StoreSpec,
    tasks: Sequence[GateTask],
    segments: Sequence[UncleanableSegment],
    config: TopicConfig,
    now_ms: int,
    errors: Collector,
    *,
    broadcast_output: bool,
) -> tuple[DataFrame, DataFrame]:
    """(the comparison DataFrame, the persisted gate rows it is computed from — unpersist both)."""
    scan = partial(gate_scan, spec, GateRules.of(config, now_ms), errors)
    rows = map_tasks(spark, tasks, scan, ddl(GATE_SCHEMA)).persist(StorageLevel.MEMORY_AND_DISK)
    beaten, vanished = _winner_rows(rows, config, broadcast_output)
    segment_rows = spark.createDataFrame(
        [(s.partition, s.base_offset, s.segment_id, s.untouched) for s in segments],
        "partition int, offset long, segment_id string, untouched boolean",
    )
    frame = _output_rows(rows)
    for more in (beaten, vanished, segment_rows):
        frame = frame.unionByName(more, allowMissingColumns=True)
    return frame.coalesce(spark.sparkContext.defaultParallelism), rows


def _checks() -> list[Check]:
    """The GX expectations, one per GateCheck."""
    from great_expectations import expectations as gxe

    from lakecleaner.quality import Check

    out: list[Check] = []
    for c in CHECKS:
        if c.unique:
            expectation: Any = gxe.ExpectColumnValuesToBeUnique(column=c.column)
        else:
            expectation = gxe.ExpectColumnValuesToBeInSet(column=c.column, value_set=[True])
        out.append(Check(c.rule, expectation))
    return out


def _with_unreadable(report: QualityReport, message: str) -> QualityReport:
    from lakecleaner.quality import CheckOutcome, QualityReport

    failed = CheckOutcome(READABLE_RULE, "read_segment_file", False, sample=[message])
    return QualityReport(report.subject, (*report.outcomes, failed))


def run_gate(
    spark: SparkSession,
    spec: StoreSpec,
    topic: str,
    tasks: Sequence[GateTask],
    partitions: Sequence[int],
    segments: Sequence[UncleanableSegment],
    config: TopicConfig,
    now_ms: int,
    *,
    broadcast_output: bool = True,
) -> dict[int, QualityReport]:
    """Validate the staged output of `partitions`; one report per partition. `broadcast_output`:
    join the output records to the input candidates by broadcast (they fit in memory)."""
    from lakecleaner.quality import SAMPLE_SIZE, validate

    partitions = sorted(partitions)
    if not partitions:
        return {}
    errors = Collector(spark)
    frame, facts = comparison_frame(
        spark, spec, tasks, segments, config, now_ms, errors, broadcast_output=broadcast_output
    )
    frame = frame.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        spark.sparkContext.setJobDescription("lakecleaner quality gate: comparison rows")
        frame.count()
        facts.unpersist()
        unreadable: dict[int, str] = {}
        for partition, message in errors.items:
            unreadable.setdefault(int(partition), str(message))
        spark.sparkContext.setJobDescription("lakecleaner quality gate: expectations")
        subject = f"compaction of {topic} partitions {','.join(map(str, partitions))}"
        together = validate(subject, frame, _checks(), result_format="BOOLEAN_ONLY")
        if together.success and not unreadable:
            return dict.fromkeys(partitions, together)
        detailed = {
            "result_format": "SUMMARY",
            "unexpected_index_column_names": INDEX_COLUMNS,
            "partial_unexpected_count": SAMPLE_SIZE,
        }
        reports: dict[int, QualityReport] = {}
        for p in partitions:
            one = frame.where(F.col("partition") == p)
            report = validate(f"compaction of {topic}-{p}", one, _checks(), result_format=detailed)
            reports[p] = _with_unreadable(report, unreadable[p]) if p in unreadable else report
        return reports
    finally:
        frame.unpersist()
        facts.unpersist()
