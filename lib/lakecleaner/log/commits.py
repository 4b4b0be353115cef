"""Commit records: the proof, kept beside the manifest, that a commit which added files landed.

A data file is written before the commit that references it, so a partition's `segments/` can hold
files no commit acknowledged: the file of an append that crashed before its manifest write, or that
lost the race for its manifest version to another writer (same offsets, same intended version, and
often written later than the winner's). While the manifest is readable it alone says which files
make the log. When it is lost or damaged, `lakecleaner repair` must tell the acknowledged file from
the orphan, and neither the intended version nor the time of writing can (both writers of a lost
race intended the same version, and the loser may well have written last).

So every commit that adds files, once its manifest write has landed and before the writer is told
it succeeded, writes one small object per file it added: `_commits/<file name>@<version>` under the
partition, its body the commit id the manifest carries (`Manifest.commit_id`). Everything repair
and gc need is in the name, so they read a listing and no object: a file is acknowledged when a
record names it, by the version the record's name gives. A writer that was acknowledged has its
records; an orphan never has one. A crash between the manifest write and the records leaves a
landed commit without them: the writer was not told it succeeded, and repair treats its files as
unacknowledged (kept unless they contradict an acknowledged file, never chosen over one on a guess:
see `log/repair.py`).

gc removes a record once its file is gone from the partition (`stale_records`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from lakecleaner.io import ObjectInfo, ObjectStore
from lakecleaner.io.concurrent import map_ordered

#: The folder of a partition that holds its commit records.
COMMITS = "_commits/"
#: A record names a segment file or a file's deletion vector (`log.deletion_vectors.VECTOR_PATH`).
_RECORD_NAME = re.compile(r"^([A-Za-z0-9_.=-]+\.parquet(?:\.dv-\d{1,19}-[0-9a-f]{12}\.bin)?)@(\d{1,18})$")


@dataclass(frozen=True)
class CommitRecord:
    """The file `path` (relative to the partition) was added by the commit that landed as manifest
    `version`."""

    path: str
    version: int

    @property
    def name(self) -> str:
        """The record's path relative to its partition."""
        return f"{COMMITS}{self.path.rsplit('/', 1)[-1]}@{self.version}"

    @staticmethod
    def parse(name: str) -> CommitRecord | None:
        """The record a path relative to a partition names, or None when it names none."""
        m = _RECORD_NAME.match(name[len(COMMITS) :]) if name.startswith(COMMITS) else None
        return None if m is None else CommitRecord(f"segments/{m.group(1)}", int(m.group(2)))


def write_commit_records(
    store: ObjectStore, partition_prefix: str, paths: Iterable[str], version: int, commit_id: str, max_workers: int
) -> None:
    """Store the records of a landed commit that added `paths` (new, never-reused names: plain
    writes, at once over the bounded metadata pool)."""
    body = json.dumps({"commit_id": commit_id, "version": version}).encode()
    names = [CommitRecord(path, version).name for path in paths]
    map_ordered(lambda name: store.write(partition_prefix + name, body), names, max_workers)


def acknowledged_files(listed: Iterable[ObjectInfo], partition_prefix: str) -> dict[str, int]:
    """From a listing of the partition: each file a commit record names, with the latest version
    that acknowledged it (a compaction that keeps a file adds no record for it)."""
    found: dict[str, int] = {}
    for obj in listed:
        record = CommitRecord.parse(obj.key[len(partition_prefix) :])
        if record is not None:
            found[record.path] = max(record.version, found.get(record.path, 0))
    return found


def stale_records(listed: Iterable[ObjectInfo], partition_prefix: str, present: Collection[str]) -> list[str]:
    """The commit records (paths relative to the partition) of a listing whose file is not among
    `present` (the partition's files after gc deleted what it deletes). A record is written after
    its file, and a listing returns keys in order (`_commits/` before `segments/`), so a listed
    record's file, unless it was deleted, was there when the listing reached `segments/`."""
    stale = []
    for obj in listed:
        name = obj.key[len(partition_prefix) :]
        record = CommitRecord.parse(name)
        if record is not None and record.path not in present:
            stale.append(name)
    return stale


__all__ = ["COMMITS", "CommitRecord", "acknowledged_files", "stale_records", "write_commit_records"]
