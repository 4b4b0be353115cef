"""The catalog of the lake's Iceberg tables: pyiceberg's `load_catalog` with the config file's
properties, or, for a file:// lake that names none, a SQL catalog on a SQLite file in the lake's
`_lakecleaner/iceberg/` (no server). For an s3:// lake the storage settings the lake already
has (endpoint, region, keys) are passed as pyiceberg's `s3.*` properties unless the catalog
section sets them, so readers of the table reach the same store.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from lakecleaner.config import LakeConfig
from lakecleaner.errors import LakeCleanerError

#: The name pyiceberg knows the catalog by (in its errors; `load_catalog(name, **properties)`).
CATALOG_NAME = "lakecleaner"
#: The embedded catalog's folder, under a file:// lake's root.
EMBEDDED_FOLDER = "_lakecleaner/iceberg"


def catalog_properties(config: LakeConfig, root_uri: str) -> dict[str, str]:
    """What a reader passes to `load_catalog` to see the lake's tables (secrets included: show
    them through `iceberg.shown`)."""
    properties = dict(config.iceberg.catalog)
    if not properties:
        database = Path(root_uri.removeprefix("file://")) / EMBEDDED_FOLDER / "catalog.db"
        properties = {"type": "sql", "uri": f"sqlite:///{database}"}
    properties.setdefault("warehouse", root_uri)
    if root_uri.startswith("s3://"):
        storage = config.storage
        for key, value in (
            ("s3.endpoint", storage.endpoint_url),
            ("s3.region", storage.region),
            ("s3.access-key-id", storage.access_key_id),
            ("s3.secret-access-key", storage.secret_access_key),
            ("s3.session-token", storage.session_token),
        ):
            if value:
                properties.setdefault(key, value)
    return properties


def open_catalog(config: LakeConfig, root_uri: str) -> Any:
    """The lake's catalog (pyiceberg's `Catalog`), one per set of properties in a process (a SQL
    catalog holds a database engine and its connection pool; opening one costs a tenth of a
    second), opened again when its SQLite file was deleted and made anew (a lake removed and
    created again), so nothing is written through a connection to the deleted file. The embedded
    catalog's folder is made first."""
    properties = catalog_properties(config, root_uri)
    if not config.iceberg.catalog:
        (Path(root_uri.removeprefix("file://")) / EMBEDDED_FOLDER).mkdir(parents=True, exist_ok=True)
    key = tuple(sorted(properties.items()))
    with _OPENED_LOCK:
        opened = _OPENED.get(key)
        if opened is not None and opened[0] == _database_file(properties):
            return opened[1]
        catalog = _load(properties)
        _OPENED[key] = (_database_file(properties), catalog)
        return catalog


def catalog_exists(config: LakeConfig, root_uri: str) -> bool:
    """Whether the lake's catalog may hold tables: False only for the embedded SQLite catalog
    whose file was never made (opening it would make it: a reader must not)."""
    if config.iceberg.catalog:
        return True
    return (Path(root_uri.removeprefix("file://")) / EMBEDDED_FOLDER / "catalog.db").exists()


#: The catalogs opened in this process, by their properties, with their SQLite file's identity.
_OPENED: dict[tuple[tuple[str, str], ...], tuple[tuple[int, int] | None, Any]] = {}
_OPENED_LOCK = threading.Lock()


def _database_file(properties: dict[str, str]) -> tuple[int, int] | None:
    """The identity (device, inode) of a SQLite catalog's file; None for other catalogs."""
    uri = properties.get("uri", "")
    if properties.get("type") != "sql" or not uri.startswith("sqlite:///"):
        return None
    try:
        stat = os.stat(uri.removeprefix("sqlite:///"))  # sqlite:////abs/path, sqlite:///relative/path
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


def _load(properties: dict[str, str]) -> Any:
    try:
        from pyiceberg.catalog import load_catalog

        from lakecleaner.iceberg.parsed_metadata import keep_parsed_metadata
    except ImportError as exc:
        raise LakeCleanerError(
            "Iceberg tables need pyiceberg: install lakecleaner with the `iceberg` extra "
            "(pip install 'lakecleaner[iceberg]')"
        ) from exc
    return keep_parsed_metadata(load_catalog(CATALOG_NAME, **properties))


__all__ = ["CATALOG_NAME", "catalog_exists", "catalog_properties", "open_catalog"]
