"""A damaged table or catalog is one topic's problem, said in one line (issue 77): what pyiceberg,
SQLAlchemy or the catalog's store raise for a topic's tables becomes a `LakeCleanerError` naming
the table (or the catalog) and the fix, its secrets scrubbed (`iceberg.shown`), so that `iceberg
status`, `iceberg sync` and gc report that topic and go on with the others. The log is never
touched: the tables are made from it again (`iceberg sync --rebuild`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from sqlalchemy.exc import SQLAlchemyError

from lakecleaner.errors import LakeCleanerError
from lakecleaner.iceberg.catalog import CATALOG_NAME, catalog_properties
from lakecleaner.iceberg.naming import table_identifier
from lakecleaner.iceberg.shown import scrubbed, without_password

if TYPE_CHECKING:
    from lakecleaner.lake import Lake

#: How much of an error's first line is shown.
SHOWN_CHARS = 240


@contextlib.contextmanager
def iceberg_errors(lake: Lake, topic: str) -> Iterator[None]:
    """Run the block; what it raises about the topic's tables or the catalog, as one line."""
    try:
        yield
    except LakeCleanerError:
        raise
    except Exception as exc:  # pyiceberg, SQLAlchemy, pydantic, pyarrow's file system: damage, said once
        raise LakeCleanerError(damage_line(lake, topic, exc)) from exc


def damage_line(lake: Lake, topic: str, exc: BaseException) -> str:
    """What went wrong with the topic's tables, in one line with the fix and no secret."""
    properties = catalog_properties(lake.config, lake.store.root_uri)
    reason = scrubbed(_first_line(exc), properties)
    if isinstance(exc, SQLAlchemyError):
        where = without_password(properties.get("uri", ""))
        return (
            f"Iceberg catalog {CATALOG_NAME} ({where}) cannot be read: {reason}; mend or replace the catalog's "
            f"database, then `lakecleaner iceberg sync --rebuild` registers every table anew from the manifests"
        )
    table = ".".join(table_identifier(lake.config.iceberg.namespace, topic))
    return (
        f"Iceberg table {table} cannot be read: {reason}; `lakecleaner iceberg sync --topic {topic} --rebuild` "
        "makes its tables anew from the manifests"
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    line = f"{type(exc).__name__}: {text[0] if text else ''}"
    return line if len(line) <= SHOWN_CHARS else line[: SHOWN_CHARS - 1] + "…"


__all__ = ["damage_line", "iceberg_errors"]
