"""The merge-on-read sync's decision (`iceberg.upserts`, issue 80) against a small reference
model: after any sequence of batches (updates, tombstones, keys that come back, late records that
lose by timestamp) and log-start moves, the live rows — every appended row not deleted by
position — are each key's winner by the reference model's KIP-280 rule when it is a live value.
Each sync is handed only what `located.locate` finds (`iceberg.file_keys`): the live rows whose
key hashes like a batch key's or whose offset is below the log start."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from lakecleaner.engine.keys import key_hash
from lakecleaner.iceberg.file_keys import of_rows
from lakecleaner.iceberg.upserts import made_anew, needs_earlier, upsert
from tests.engine.reference_model import beats
from tests.policy.policy_builders import COMPACT

RECORD = pa.schema([("key", pa.binary()), ("offset", pa.int64()), ("timestamp", pa.int64()), ("value", pa.binary())])

batches = st.lists(
    st.tuples(
        st.lists(st.tuples(st.integers(0, 6), st.integers(0, 5), st.booleans()), max_size=8),
        st.integers(0, 3),  # how far the log start moves after the batch
    ),
    max_size=8,
)


@settings(max_examples=150, deadline=None)
@given(batches, st.sampled_from(["offset", "timestamp"]))
def test_the_live_rows_are_each_keys_winner_when_it_is_a_value(script: list[Any], strategy: str) -> None:
    config = dataclasses.replace(COMPACT, compaction_strategy=strategy)
    files: dict[str, pa.Table] = {}  # each appended batch is a data file
    deleted: set[tuple[str, int]] = set()
    log: list[dict[str, Any]] = []
    log_start = reflected_start = 0
    for number, (records, moves) in enumerate(script):
        first = len(log)
        batch = [
            {"key": b"k%d" % k, "offset": o, "timestamp": ts, "value": None if dead else b"v%d" % o}
            for o, (k, ts, dead) in enumerate(records, start=first)
        ]
        log += batch
        log_start = min(log_start + moves, len(log))
        first = max(first, log_start)  # a sync reads the batch from the log start (`latest._upserted`)
        if made_anew(config, reflected_start, log_start):  # what `latest._rebuilt` commits
            rebuilt = [r for r in log[log_start:] if r["offset"] in _model(log, log_start, config)]
            files, deleted, reflected_start = {f"r{number}": pa.Table.from_pylist(rebuilt, RECORD)}, set(), log_start
            assert sorted(_live(files, deleted).column("offset").to_pylist()) == _model(log, log_start, config)
            continue
        reflected_start = log_start
        earlier = pa.Table.from_pylist(log[log_start:first], RECORD) if needs_earlier(config) else None
        records = pa.Table.from_pylist(log[first:], RECORD)
        located = _live(files, deleted, _found(files, records.column("key"), log_start))
        change = upsert(located, records, config, log_start, earlier)
        gone = change.deleted.to_pydict()
        deleted |= set(zip(gone["file_path"], gone["pos"], strict=True))
        if change.appended.num_rows:
            files[f"f{number}"] = change.appended.select(RECORD.names)
        assert sorted(_live(files, deleted).column("offset").to_pylist()) == _model(log, log_start, config)


def _found(files: dict[str, pa.Table], keys: pa.ChunkedArray, log_start: int) -> dict[str, np.ndarray]:
    """The positions of each file's rows whose key hashes like one of `keys` or whose offset is
    below `log_start`, as `located.locate` finds them."""
    wanted = key_hash(keys)
    return {path: of_rows(rows).positions(wanted, log_start) for path, rows in files.items()}


def _live(
    files: dict[str, pa.Table], deleted: set[tuple[str, int]], only: dict[str, np.ndarray] | None = None
) -> pa.Table:
    """The files' rows not deleted (only those at the positions `only` gives, when given)."""
    parts = []
    for path, rows in files.items():
        positions = np.arange(rows.num_rows) if only is None else only[path]
        parts.append(
            rows.take(pa.array(positions, pa.int64()))
            .append_column("file_path", pa.array([path] * len(positions), pa.string()))
            .append_column("pos", pa.array(positions, pa.int64()))
        )
    schema = pa.schema([*RECORD, ("file_path", pa.string()), ("pos", pa.int64())])
    table = pa.concat_tables(parts) if parts else schema.empty_table()
    located = table.select(["file_path", "pos"]).to_pydict()
    keep = [(p, i) not in deleted for p, i in zip(located["file_path"], located["pos"], strict=True)]
    return table.filter(pa.array(keep, pa.bool_()))


def _model(log: list[dict[str, Any]], log_start: int, config: Any) -> list[int]:
    """The offsets of each key's winner among the records from the log start (what `consume`
    reads), if a value."""
    best: dict[bytes, dict[str, Any]] = {}
    for row in log[log_start:]:
        if row["key"] not in best or beats(row, best[row["key"]], config):
            best[row["key"]] = row
    return sorted(r["offset"] for r in best.values() if r["value"] is not None)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 40), max_size=60),
    st.lists(st.integers(0, 50), max_size=20),
    st.integers(0, 70),
)
def test_a_files_keys_find_the_rows_of_the_keys_asked_and_those_below_the_log_start(
    stored: list[int], asked: list[int], log_start: int
) -> None:
    rows = pa.table({"key": [b"k%d" % k for k in stored], "offset": pa.array(range(len(stored)), pa.int64())})
    keys = pa.array([b"k%d" % k for k in asked], pa.binary())
    found = of_rows(rows).positions(key_hash(keys), log_start)
    wanted = {i for i, k in enumerate(stored) if k in set(asked) or i < log_start}
    assert found.tolist() == sorted(wanted)
