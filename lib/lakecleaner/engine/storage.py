"""Reaching the lake from Spark tasks.

Tasks read and write segment files with pyarrow's filesystems, never through a Hadoop
connector (DESIGN section 5). A task gets a picklable `StoreSpec` (the lake root URI and the
StorageSettings) and opens the ObjectStore itself; a Python worker reuses one store per spec.
StorageSettings keeps secrets out of its repr, so a spec never prints them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from lakecleaner.config import StorageSettings
from lakecleaner.io import ObjectStore, open_store
from lakecleaner.lake import Lake


@dataclass(frozen=True)
class StoreSpec:
    """How a task opens the lake: the store's absolute root URI and its settings."""

    uri: str
    settings: StorageSettings

    @staticmethod
    def of(lake: Lake) -> StoreSpec:
        return StoreSpec(lake.store.root_uri, lake.config.storage)

    def open(self) -> ObjectStore:
        return _open(self)

    @property
    def local(self) -> bool:
        """Whether the lake is a directory of this machine's (file://), whose reads wait on no network."""
        return self.uri.startswith("file://")


@lru_cache(maxsize=8)
def _open(spec: StoreSpec) -> ObjectStore:
    return open_store(spec.uri, spec.settings)
