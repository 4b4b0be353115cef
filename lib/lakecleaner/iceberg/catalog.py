"""The catalog of the lake's Iceberg tables: pyiceberg's `load_catalog` with the config file's
properties, or, for a file:// lake that names none, a SQL catalog on a SQLite file in the lake's
`_lakecleaner/iceberg/` (no server). For an s3:// lake the storage settings the lake already
has (endpoint, region, keys) are passed as pyiceberg's `s3.*` properties unless the catalog
section sets them, so readers of the table reach the same store.
"""

from __future__ import annotations

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
    them through `config.iceberg.masked`)."""
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
    """The lake's catalog (pyiceberg's `Catalog`); the embedded one's folder is made first."""
    try:
        from pyiceberg.catalog import load_catalog
    except ImportError as exc:
        raise LakeCleanerError(
            "Iceberg tables need pyiceberg: install lakecleaner with the `iceberg` extra "
            "(pip install 'lakecleaner[iceberg]')"
        ) from exc
    properties = catalog_properties(config, root_uri)
    if not config.iceberg.catalog:
        (Path(root_uri.removeprefix("file://")) / EMBEDDED_FOLDER).mkdir(parents=True, exist_ok=True)
    return load_catalog(CATALOG_NAME, **properties)


__all__ = ["CATALOG_NAME", "catalog_properties", "open_catalog"]
