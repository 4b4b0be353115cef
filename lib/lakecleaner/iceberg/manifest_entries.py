"""A manifest's entries read once per process (issue 80: a commit's cost must not grow with the
table). A sync reads the current snapshot's manifests several times (the files it holds, the
manifests a row delta keeps or rewrites, the manifests a merge rewrites), and most of them are the
same from one commit to the next. A manifest file is immutable (Iceberg spec "Manifests": a commit
writes new ones at new locations and never rewrites one), so its entries are kept by location,
with the manifest-list fields they inherit (the sequence number and the snapshot that added it),
the most recently used first, up to `KEPT_ENTRIES` entries in all.

The entries handed out are shared: callers read them and build new entries to write (pyiceberg's
manifest writers do), never change them.
"""

from __future__ import annotations

from pyiceberg.io import FileIO
from pyiceberg.manifest import ManifestEntry, ManifestEntryStatus, ManifestFile

from lakecleaner.io.kept import Kept

#: How many manifest entries the process keeps in all (about a kilobyte each).
KEPT_ENTRIES = 100_000

#: A manifest by its location and the manifest-list fields its entries inherit.
_Key = tuple[str, int | None, int | None]

_KEPT: Kept[_Key, tuple[ManifestEntry, ...]] = Kept(KEPT_ENTRIES, len)


def manifest_entries(io: FileIO, manifest: ManifestFile, discard_deleted: bool = True) -> list[ManifestEntry]:
    """The manifest's entries (without those marked DELETED when `discard_deleted`), as
    `ManifestFile.fetch_manifest_entry` reads them, read from storage once per process. A manifest
    not yet in a committed snapshot (its sequence number unassigned) is read each time."""
    key = (manifest.manifest_path, manifest.sequence_number, manifest.added_snapshot_id)
    entries = _KEPT.get(key)
    if entries is None:
        entries = tuple(manifest.fetch_manifest_entry(io, discard_deleted=False))
        if manifest.sequence_number is not None and manifest.sequence_number >= 0:
            _KEPT.put(key, entries)
    if discard_deleted:
        return [e for e in entries if e.status != ManifestEntryStatus.DELETED]
    return list(entries)


__all__ = ["KEPT_ENTRIES", "manifest_entries"]
