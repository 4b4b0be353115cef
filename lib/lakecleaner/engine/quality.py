"""The quality gate (DESIGN section 5): Great Expectations checks of the staged output against
the input, on Spark DataFrames, before anything is committed.

`gate_rows` reads every group's input and staged output back from storage, after staging, and
settles the facts that need one record and its input: unchanged, horizon as KIP-534 says,
offsets increasing, record counts, a keyed record of the cleaned range that is not an expired
tombstone. It also emits the input records that could be their key's winner. Spark then
decides, independently of pass 1 and in Spark SQL (the KIP-280 header version is parsed from
the raw headers here, not by `versions`), whether the output holds exactly each key's winner:
one aggregation per (partition, key) over the candidates and the output records finds the
winner — the highest (order columns…, offset) — and checks that the key has at most one output
record, that every output record of the key is the winner, and that a key without output has
an expired tombstone as its winner. With the per-record facts, that is exactly "for every key
the output holds the winner, or nothing for an expired tombstone".

The flag DataFrame has a row per output record, per key, and per segment of the uncleanable
range [U, next offset) (flagged when the manifest the commit would write changes it); each
check is a boolean column, null on rows it does not apply to. Validation runs through the
project's GX runner, `lakecleaner.quality`, imported only when a gate runs (Spark's Python
workers never load Great Expectations), at two levels of detail:

- always: the flags are counted per partition in one Spark job (how many rows break each
  check), and one `expect_column_max_to_be_between(max_value=0)` per check runs on those
  counts, so all partitions are validated together at the cost of one aggregation;
- when that fails: each partition's flag rows are validated on their own with
  `expect_column_values_to_be_in_set([True])` per check, so the report names the failing
  partitions and samples the offending rows by (partition, offset, segment_id).

A partition also fails when one of its files cannot be read back.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import partial
from typing import TYPE_CHECKING

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
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
    """A flag column of the flag DataFrame, and its rule in words."""

    column: str
    rule: str


CHECKS = (
    GateCheck("unique_key", "keys are unique in the cleaned range"),
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


def _rank(config: TopicConfig) -> Column:
    """A record's rank for its key (higher wins): the ordering columns, then the offset; the
    offset alone for the offset strategy (a long aggregates faster than a struct)."""
    order = [value.alias(name) for name, value in _order_columns(config).items()]
    return F.struct(*order, F.col("offset").alias("offset")) if order else F.col("offset")


def _rank_offset(rank: Column, config: TopicConfig) -> Column:
    """The offset of a `_rank`."""
    return rank.getField("offset") if _order_columns(config) else rank


def _record_flags() -> dict[str, Column]:
    """The checks of one output record, settled by the scan (`gate_rows`)."""
    c = F.col
    return {
        "has_key": c("has_key"),
        "in_input": c("in_input"),
        "unchanged": c("unchanged"),
        "horizon_as_expected": c("horizon_as_expected"),
        "survives": c("candidate") & ~c("expired"),
        "offset_increasing": c("increasing"),
        "entry_matches": c("entry_matches"),
    }


def _ranked(rows: DataFrame, config: TopicConfig) -> DataFrame:
    """The gate rows with `rank`, and `contends`: a candidate, or an output record that is one;
    hash-partitioned by (partition, key) into as many partitions as the cluster has cores, which
    the group-bys by key then use (Spark's default of 200 shuffle partitions costs more here)."""
    c = F.col
    by_key = rows.repartition(rows.sparkSession.sparkContext.defaultParallelism, "partition", "key")
    return by_key.select("*", _rank(config).alias("rank"), (~c("is_output") | c("candidate")).alias("contends"))


def _key_aggregates() -> list[Column]:
    """Per (partition, key) of `_ranked` rows: the winner's rank and whether it is an expired
    tombstone, among the contenders; the lowest rank of an output record that contends; and how
    many output records contend."""
    c = F.col
    contender = F.when(c("contends"), c("rank"))
    return [
        F.max(contender).alias("winner"),
        F.max_by(c("expired"), contender).alias("winner_is_expired"),
        F.min(F.when(c("is_output") & c("candidate"), c("rank"))).alias("lowest_output"),
        F.count_if(c("is_output") & c("candidate")).alias("outputs"),
    ]


def _key_flags() -> dict[str, Column]:
    """The checks of one key, on `_key_aggregates`: at most one output record holds it, every
    output record of the key is the winner, and a key without output has an expired tombstone
    as its winner (null for a group with no contender)."""
    c = F.col
    return {
        "unique_key": c("outputs") <= 1,
        "not_beaten": c("lowest_output").isNull() | (c("lowest_output") == c("winner")),
        "winner_expired": F.when(c("winner").isNotNull(), (c("outputs") > 0) | c("winner_is_expired")),
    }


def _output_rows(rows: DataFrame) -> DataFrame:
    """One row per output record, with its checks."""
    flags = [value.alias(name) for name, value in _record_flags().items()]
    return rows.where(F.col("is_output")).select("partition", "offset", *flags)


def _key_rows(rows: DataFrame, config: TopicConfig) -> DataFrame:
    """One row per (partition, key) with a contender, with its checks; `offset` names the
    lowest output record of the key, or its winner when it has none."""
    c = F.col
    per_key = _ranked(rows, config).where(c("contends")).groupBy("partition", "key").agg(*_key_aggregates())
    offset = F.coalesce(_rank_offset(c("lowest_output"), config), _rank_offset(c("winner"), config))
    return per_key.select("partition", offset.alias("offset"), *[v.alias(k) for k, v in _key_flags().items()])


def _gate_rows(
    spark: SparkSession,
    spec: StoreSpec,
    tasks: Sequence[GateTask],
    config: TopicConfig,
    now_ms: int,
    errors: Collector,
) -> DataFrame:
    scan = partial(gate_scan, spec, GateRules.of(config, now_ms), errors)
    return map_tasks(spark, tasks, scan, ddl(GATE_SCHEMA))


def flag_frame(
    spark: SparkSession, rows: DataFrame, segments: Sequence[UncleanableSegment], config: TopicConfig
) -> DataFrame:
    """The checks row by row: a row per output record, per key and per segment of [U, next
    offset); each check a boolean column, null on rows it does not apply to. `rows` is read
    twice: persist it."""
    segment_rows = spark.createDataFrame(
        [(s.partition, s.base_offset, s.segment_id, s.untouched) for s in segments],
        "partition int, offset long, segment_id string, untouched boolean",
    )
    frame = _output_rows(rows).unionByName(_key_rows(rows, config), allowMissingColumns=True)
    return frame.unionByName(segment_rows, allowMissingColumns=True)


def violation_counts(
    spark: SparkSession,
    rows: DataFrame,
    partitions: Sequence[int],
    segments: Sequence[UncleanableSegment],
    config: TopicConfig,
) -> DataFrame:
    """Per partition, how many output records, keys and segments break each check, computed in
    one Spark job that reads `rows` once (record checks are counted within each key's group);
    returned as a small local DataFrame with a row for each of `partitions`."""
    c = F.col
    records = _record_flags()
    flagged = _ranked(rows, config).select(
        "partition",
        "key",
        "is_output",
        "candidate",
        "expired",
        "rank",
        "contends",
        *[F.when(c("is_output"), value).alias(name) for name, value in records.items()],
    )
    per_key = flagged.groupBy("partition", "key").agg(
        *_key_aggregates(), *[F.count_if(~c(name)).alias(name) for name in records]
    )
    keys = _key_flags()
    per_key = per_key.select("partition", *records, *[v.alias(k) for k, v in keys.items()])
    counts = per_key.groupBy("partition").agg(
        *[F.sum(name).alias(name) for name in records], *[F.count_if(~c(name)).alias(name) for name in keys]
    )
    found = {row["partition"]: row.asDict() for row in counts.collect()}
    touched = Counter(s.partition for s in segments if not s.untouched)
    names = [check.column for check in CHECKS]
    counted = {p: {**found.get(p, {}), "untouched": touched[p]} for p in partitions}
    table = [(p, *[int(counted[p].get(name) or 0) for name in names]) for p in partitions]
    return spark.createDataFrame(table, "partition int, " + ", ".join(f"{name} long" for name in names))


def _row_checks() -> list[Check]:
    """Row level: each flag column is true wherever it applies (GX skips nulls)."""
    from great_expectations import expectations as gxe

    from lakecleaner.quality import Check

    return [Check(c.rule, gxe.ExpectColumnValuesToBeInSet(column=c.column, value_set=[True])) for c in CHECKS]


def _count_checks() -> list[Check]:
    """Per partition: no row breaks any check."""
    from great_expectations import expectations as gxe

    from lakecleaner.quality import Check

    return [Check(c.rule, gxe.ExpectColumnMaxToBeBetween(column=c.column, max_value=0)) for c in CHECKS]


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
) -> dict[int, QualityReport]:
    """Validate the staged output of `partitions`; one report per partition."""
    from lakecleaner.quality import SAMPLE_SIZE, validate

    partitions = sorted(partitions)
    if not partitions:
        return {}
    errors = Collector(spark)
    rows = _gate_rows(spark, spec, tasks, config, now_ms, errors)
    spark.sparkContext.setJobDescription("lakecleaner quality gate: violations per partition")
    counts = violation_counts(spark, rows, partitions, segments, config)
    unreadable: dict[int, str] = {}
    for partition, message in errors.items:
        unreadable.setdefault(int(partition), str(message))
    subject = f"compaction of {topic} partitions {','.join(map(str, partitions))}"
    spark.sparkContext.setJobDescription("lakecleaner quality gate: expectations")
    together = validate(subject, counts, _count_checks())
    if together.success and not unreadable:
        return dict.fromkeys(partitions, together)
    detailed = {
        "result_format": "SUMMARY",
        "unexpected_index_column_names": INDEX_COLUMNS,
        "partial_unexpected_count": SAMPLE_SIZE,
    }
    rows.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        spark.sparkContext.setJobDescription("lakecleaner quality gate: offending rows")
        reports: dict[int, QualityReport] = {}
        flags = flag_frame(spark, rows, segments, config)
        for p in partitions:
            one = flags.where(F.col("partition") == p)
            report = validate(f"compaction of {topic}-{p}", one, _row_checks(), result_format=detailed)
            reports[p] = _with_unreadable(report, unreadable[p]) if p in unreadable else report
        return reports
    finally:
        rows.unpersist()
