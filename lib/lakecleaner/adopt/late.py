"""Records of the sink's files at offsets the log already passed (issue 75): never dropped unseen.

A file the ledger does not know may hold records below the log's next offset: a re-delivery under
another name, a tombstone folder flushed on its own schedule, a file that filled a gap late. Its
records there are checked against the log (`check_below`):
- **Values** the log holds at the same offset with the same key and value are a re-delivery: fine.
  Other bytes there are a conflict (the file named, and the offset): the partition is held, the file
  kept. At an offset in a gap an earlier run reported (no file held it then), the file arrived after
  its offsets were passed: it is reported and kept, never recorded as adopted, so never deleted. At
  an offset the log no longer holds for another reason (compacted away, retention, trim) there is
  nothing to compare with, and the log's history stands.
- **Tombstones** (a tombstone folder's records, or a delete event's) are what erasure is made of:
  a late one is applied as a tombstone for its key at the next offset, unless the log already holds
  a later record of that key, which supersedes it (the deletion is what matters: a key written
  again after its delete stays written). Either way the report counts it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakecleaner.adopt.assemble import CHUNK_SCHEMA, same_or_both_null
from lakecleaner.adopt.connect_plan import Bundle
from lakecleaner.log.manifest import Manifest
from lakecleaner.log.partition import PartitionLog


@dataclass
class LateFindings:
    """What the records below the log's next offset came to: conflicts (in words), files kept as
    having arrived after their offsets were passed (by index in the chunk, with why), the late
    tombstones to append (CHUNK_SCHEMA, offsets to be given), and how many a later record of their
    key superseded."""

    conflicts: list[str] = field(default_factory=list)
    late_files: dict[int, str] = field(default_factory=dict)
    tombstones: pa.Table = field(default_factory=CHUNK_SCHEMA.empty_table)
    superseded: int = 0


def check_below(
    log: PartitionLog,
    manifest: Manifest,
    below: pa.Table,
    bundles: Sequence[Bundle],
    gaps: Sequence[tuple[int, int]],
    appended_keys: pa.Array,
) -> LateFindings:
    """Check a chunk's records at or below the log's last offset (`below`, CHUNK_SCHEMA) against the
    log as `manifest` holds it (the rules above); `appended_keys`: the keys the chunk appends, which
    supersede any late tombstone of theirs."""
    findings = LateFindings()
    if not below.num_rows:
        return findings
    tombstone_files = pa.array([b.main.tombstones for b in bundles])
    from_tombstones = pc.take(tombstone_files, below.column("file"))
    is_tombstone = pc.or_(from_tombstones, pc.is_null(below.column("value")))
    _check_values(log, manifest, below.filter(pc.invert(is_tombstone)), bundles, gaps, findings)
    _late_tombstones(log, manifest, below.filter(is_tombstone), appended_keys, findings)
    return findings


def _check_values(
    log: PartitionLog,
    manifest: Manifest,
    values: pa.Table,
    bundles: Sequence[Bundle],
    gaps: Sequence[tuple[int, int]],
    findings: LateFindings,
) -> None:
    if not values.num_rows:
        return
    offsets = values.column("offset").to_numpy()
    held = _log_rows(log, manifest, int(offsets.min()), int(offsets.max()), ["offset", "key", "value"])
    held_offsets = held.column("offset").to_numpy()
    index = np.searchsorted(held_offsets, offsets)
    present = index < len(held_offsets)
    present[present] = held_offsets[index[present]] == offsets[present]
    files = values.column("file").to_numpy()
    if present.any():
        rows = pa.array(np.nonzero(present)[0])
        mine = values.take(rows)
        theirs = held.take(pa.array(index[present]))
        same = pc.and_(
            same_or_both_null(mine.column("key"), theirs.column("key")),
            same_or_both_null(mine.column("value"), theirs.column("value")),
        )
        for row in np.nonzero(~same.to_numpy(zero_copy_only=False))[0]:
            n = int(mine.column("file")[row].as_py())
            offset = int(mine.column("offset")[row].as_py())
            message = (
                f"{bundles[n].main.key} holds offset {offset} with other bytes than the log (adopted from another "
                "file): kept, and the partition held until it is resolved (move it aside, or --prefer it)"
            )
            if message not in findings.conflicts and not any(bundles[n].main.key in c for c in findings.conflicts):
                findings.conflicts.append(message)
    for row in np.nonzero(~present)[0]:
        offset, n = int(offsets[row]), int(files[row])
        gap = next(((a, b) for a, b in gaps if a <= offset <= b), None)
        if gap is not None and n not in findings.late_files:
            findings.late_files[n] = (
                f"arrived after its offsets were passed: offset {offset} lies in the gap {gap[0]}..{gap[1]} an earlier "
                "run reported; kept, not adopted"
            )


def _late_tombstones(
    log: PartitionLog, manifest: Manifest, tombstones: pa.Table, appended_keys: pa.Array, findings: LateFindings
) -> None:
    """The late tombstones to append: one per key, unless a later record of the key (in the log
    after the tombstone's offset, or in what the chunk appends) supersedes it."""
    if not tombstones.num_rows:
        return
    keys = pc.unique(tombstones.column("key"))
    later = _log_rows(log, manifest, int(pc.min(tombstones.column("offset")).as_py()) + 1, None, ["offset", "key"])
    later = later.filter(pc.is_in(later.column("key"), keys))
    newest: dict[bytes, int] = {}
    for key, offset in zip(later.column("key").to_pylist(), later.column("offset").to_pylist(), strict=True):
        newest[key] = max(offset, newest.get(key, -1))
    appended = set(pc.unique(appended_keys).to_pylist()) if len(appended_keys) else set()
    chosen: dict[bytes, int] = {}
    rows = tombstones.to_pylist()
    for index, row in enumerate(rows):
        if row["key"] in appended or newest.get(row["key"], -1) > row["offset"]:
            findings.superseded += 1
        else:
            chosen[row["key"]] = index  # the last one of a key stands for the others
    picked = tombstones.take(pa.array(sorted(chosen.values()), pa.int64()))
    value = picked.schema.get_field_index("value")
    findings.tombstones = picked.set_column(value, "value", pa.nulls(picked.num_rows, pa.binary()))


def _log_rows(log: PartitionLog, manifest: Manifest, first: int, last: int | None, columns: list[str]) -> pa.Table:
    """The log's records at offsets [first, last] (last None: to its end), as `manifest` holds them."""
    start = min(max(first, manifest.log_start_offset), manifest.next_offset)
    tables = []
    for batch in log.iter_batches(start, columns=columns, manifest=manifest):
        if last is not None and batch.num_rows and batch.column("offset")[0].as_py() > last:
            break
        tables.append(batch)
    schema = pa.schema([CHUNK_SCHEMA.field(c) for c in columns])
    table = pa.concat_tables(tables) if tables else schema.empty_table()
    if last is not None:
        table = table.filter(pc.less_equal(table.column("offset"), last))
    return table


__all__ = ["LateFindings", "check_below"]
