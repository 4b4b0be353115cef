"""What a batch of records changes in a partition's latest values (issue 80): the rows to append
and the rows to delete, from where each live row is, never from its value.

The live rows come as their data file and position (`file_path`, `pos`) beside the columns that
order a key's records (`engine.versions.source_columns`: key and offset, and the timestamp or
headers of KIP-280's strategies). Only the live rows of keys the batch holds compete with it: each
such key's winner, by the topic's compaction strategy as compaction keeps it, is either its live
row (nothing changes) or a record of the batch, which supersedes the live row (deleted) and, when
it is not a tombstone, is appended. A live row whose offset fell below the log start (retention
and trim took the key's winner, and by offset the log then no longer has the key) is deleted too;
by timestamp or header version a record above the log start that lost to it may win again, so
such a partition is made anew from the log when its log start moves (`made_anew`). Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from lakecleaner.config import TopicConfig
from lakecleaner.engine.versions import latest_per_key, order_table, source_columns

#: The columns locating a live row in the table's data files (a position-delete file's columns).
LOCATION = ["file_path", "pos"]


@dataclass(frozen=True)
class Upsert:
    """The batch's winners that are live values (records, to append) and the live rows they
    supersede or that fell below the log start (`LOCATION`, to delete)."""

    appended: pa.Table
    deleted: pa.Table


def winners(records: pa.Table, config: TopicConfig) -> pa.Table:
    """Each key's winning record by the topic's compaction strategy (KIP-280: offset, timestamp
    or header version, ties to the highest offset), as the compaction keeps it
    (`engine.versions`); offsets are unique among `records`."""
    if records.num_rows == 0:
        return records
    ordered, _ = order_table(records, config)
    best = latest_per_key(ordered)
    return records.filter(pc.is_in(records.column("offset"), value_set=best.column("offset")))


def needs_earlier(config: TopicConfig) -> bool:
    """Whether a batch's records may lose to a tombstone the table does not hold: by KIP-280's
    timestamp or header version a later record may lose to an earlier tombstone still in the log
    (a key without a live row); by offset a later record always wins."""
    return config.compaction_strategy != "offset"


def made_anew(config: TopicConfig, reflected_start: int, log_start: int) -> bool:
    """Whether a partition's rows are made anew from the log rather than upserted: by timestamp
    or header version once the log start moved, since a record above it that lost to a winner
    (a value or a tombstone) now below it wins again, and its value is in no table."""
    return needs_earlier(config) and log_start > reflected_start


def upsert(
    live: pa.Table, batch: pa.Table, config: TopicConfig, log_start: int, earlier: pa.Table | None = None
) -> Upsert:
    """What `batch` (records above every live row's offset) changes in the live rows `live`
    (`LOCATION` and the strategy's source columns) with the log starting at `log_start`.
    `earlier`: the source columns of the log's records from the log start below the batch, which
    `needs_earlier` strategies compete with too (the tombstones among them are in no table)."""
    below = pc.less(live.column("offset"), log_start)
    columns = source_columns(config.compaction_strategy)
    keys = batch.column("key").combine_chunks()
    rivals = pc.is_in(live.column("key"), value_set=keys)
    schema = batch.select(columns).schema
    competing = [live.filter(rivals).select(columns).cast(schema), batch.select(columns)]
    if earlier is not None:
        competing.append(earlier.filter(pc.is_in(earlier.column("key"), value_set=keys)).select(columns).cast(schema))
    best = winners(pa.concat_tables(competing), config).column("offset")
    won = batch.filter(pc.is_in(batch.column("offset"), value_set=best))
    appended = won.filter(pc.and_(pc.is_valid(won.column("value")), pc.greater_equal(won.column("offset"), log_start)))
    superseded = pc.and_(rivals, pc.invert(pc.is_in(live.column("offset"), value_set=best)))
    gone = pc.or_(superseded, below)
    return Upsert(appended, live.filter(gone).select(LOCATION))


__all__ = ["LOCATION", "Upsert", "made_anew", "needs_earlier", "upsert", "winners"]
