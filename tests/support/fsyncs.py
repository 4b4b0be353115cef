"""The files this process fsyncs, in order, for tests of what a local lake makes durable before a
commit names it (`ObjectStore.write(synced=False)`, `ObjectStore.sync`)."""

from __future__ import annotations

import os

import pytest

from lakecleaner.log.layout import MANIFEST_NAME


def record_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A list that fills with the path of each file this process fsyncs from now on (the fsync
    still happens). Spark's Python workers are processes of their own: theirs are not seen."""
    synced: list[str] = []
    fsync = os.fsync

    def recording(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        fsync(fd)

    monkeypatch.setattr(os, "fsync", recording)
    return synced


def synced_before_manifest(synced: list[str], folder: str) -> set[str]:
    """The paths fsynced before the first manifest written in `folder` (a partition's absolute
    path, ending in /); StopIteration when none was."""
    manifest = next(i for i, path in enumerate(synced) if path.startswith(folder) and MANIFEST_NAME in path)
    return set(synced[:manifest])
