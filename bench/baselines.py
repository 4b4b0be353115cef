"""The baselines lakecleaner's compaction is measured against (bench/compaction.py), each run in a
process of its own (`Apart`), so that its peak memory is its own and what it leaves behind
(DuckDB's allocator keeps some of a 9 GB query) is not the next run's:

  (b) the copy floor: every segment file read and written again with pyarrow, no deduplication;
  (c) DuckDB keeping the latest record per (partition, key) by offset, in one query.

Both read and write through a pyarrow filesystem (a local one, or S3 through the latency proxy),
which crosses to the child process pickled.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection

import pyarrow.fs as pafs
import pyarrow.parquet as pq

from lakecleaner.log.segment_files import COMPRESSION, ROW_GROUP_SIZE

DEDUPE = """
    SELECT * {exclude} FROM {source}
    QUALIFY row_number() OVER (PARTITION BY "partition", key ORDER BY "offset" DESC) = 1
"""


def copy_floor(fs: pafs.FileSystem, files: Sequence[tuple[int, str]], out: str) -> str:
    """Every file read and written again, zstd, no deduplication (a thread per core)."""
    fs.create_dir(out, recursive=True)

    def copy(item: tuple[int, str]) -> int:
        partition, path = item
        table = pq.read_table(path, filesystem=fs)
        target = f"{out}/{partition}-{path.rsplit('/', 1)[-1]}"
        pq.write_table(table, target, filesystem=fs, compression=COMPRESSION, row_group_size=ROW_GROUP_SIZE)
        return table.num_rows

    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        copied = sum(pool.map(copy, files))
    return f"{copied} records copied"


def duckdb_dedupe(fs: pafs.FileSystem, files: Sequence[tuple[int, str]], out: str, topic_root: str) -> str:
    """The latest record per (partition, key) by offset, in one DuckDB query. On a local disk DuckDB
    reads and writes the files itself; on S3 it reads them as a pyarrow dataset over pyarrow's S3
    filesystem and its result is written back through it (DuckDB's own S3 reader is an extension,
    downloaded at run time)."""
    import duckdb

    with duckdb.connect() as con:
        if isinstance(fs, pafs.LocalFileSystem):
            paths = ", ".join(f"'{p}'" for _, p in files)
            source = f"read_parquet([{paths}], hive_partitioning = true, filename = true)"
            con.execute(f"COPY ({DEDUPE.format(exclude='EXCLUDE (filename)', source=source)}) TO '{out}' "
                        "(FORMAT parquet, COMPRESSION zstd)")  # fmt: skip
            kept = con.execute(f"SELECT count(*) FROM read_parquet('{out}')").fetchone()
            return f"{kept[0] if kept else 0} records kept"
        import pyarrow.dataset as ds  # pandas with it: a second the local runs' processes need not start with

        segments = ds.dataset(
            [p for _, p in files], filesystem=fs, format="parquet", partitioning="hive", partition_base_dir=topic_root
        )
        con.register("segments", segments)
        reader = con.sql(DEDUPE.format(exclude="", source="segments")).to_arrow_reader()
        written = 0
        with pq.ParquetWriter(out, reader.schema, filesystem=fs, compression=COMPRESSION) as writer:
            for batch in reader:
                writer.write_batch(batch)
                written += batch.num_rows
    return f"{written} records kept"


def _timed_here(fn: Callable[[], str], results: Connection) -> None:
    """In the child: `fn`, timed; sends (seconds, what it did) or (None, the error)."""
    try:
        start = time.perf_counter()
        detail = fn()
        results.send((time.perf_counter() - start, detail))
    except Exception as exc:  # any failure: the parent raises it, named
        results.send((None, f"{type(exc).__name__}: {exc}"))
    finally:
        results.close()


class Apart:
    """`fn` run in a new Python process (spawned: none of this process's memory), started by
    `start`; `result` waits for its time and detail. The process's start-up (its imports) is not
    timed; its peak memory is the caller's to sample (`pid`)."""

    def __init__(self, fn: Callable[[], str]) -> None:
        context = multiprocessing.get_context("spawn")
        self._results, sender = context.Pipe(duplex=False)
        self._process = context.Process(target=_timed_here, args=(fn, sender), daemon=True)
        self._sender = sender

    def start(self) -> int:
        """Start the process; its pid."""
        self._process.start()
        self._sender.close()
        assert self._process.pid is not None
        return self._process.pid

    def result(self) -> tuple[float, str]:
        """(seconds, what it did); RuntimeError naming the failure when `fn` raised or the process died."""
        try:
            seconds, detail = self._results.recv()
        except EOFError:
            seconds, detail = None, "its process ended without a result"
        self._process.join()
        if seconds is None and self._process.exitcode:
            detail += f" (exit code {self._process.exitcode})"
        if seconds is None:
            raise RuntimeError(f"a baseline failed in its own process: {detail}")
        return seconds, detail
