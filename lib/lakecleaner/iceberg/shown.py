"""Catalog properties as people may see them (issue 77): by allow-list, never by guessing which
names hold secrets.

A catalog's properties may hold credentials under any name (`adls.account-key`,
`adls.connection-string`, `header.Authorization`, a password inside a database URI), so only the
properties known to be harmless are shown as they are; every other value is `***`. A URI (`uri`,
and Spark's JDBC `uri`) is shown without its password, parsed by SQLAlchemy's `make_url` (a URI
it cannot parse is masked whole). The same rule serves `iceberg status` (text and `--json`), the
demo's pyiceberg lines, Spark's `--conf` lines, and the errors of a damaged catalog (`scrubbed`).
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import quote, urlsplit

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

MASK = "***"
#: Properties whose values are never credentials (pyiceberg's and Iceberg's Java names).
HARMLESS = frozenset(
    {
        "name",
        "type",
        "warehouse",
        "catalog-impl",
        "io-impl",
        "py-io-impl",
        "s3.endpoint",
        "s3.region",
        "client.region",
        "glue.region",
        "s3.path-style-access",
        "s3.force-virtual-addressing",
        "gcs.project-id",
        "adls.account-name",
    }
)
#: Properties that hold a URI, shown without its password.
URIS = frozenset({"uri"})
#: Spark's catalog configuration: `spark.sql.catalog.<name>` itself (a class name) and its properties.
_SPARK_CATALOG = "spark.sql.catalog."


def shown(properties: Mapping[str, str]) -> dict[str, str]:
    """The properties as people may see them (the module's rule)."""
    return {key: shown_value(key, value) for key, value in properties.items()}


def shown_value(key: str, value: str) -> str:
    """One property's value as people may see it."""
    name = _property_name(key)
    if name is None or name in HARMLESS:
        return value
    if name in URIS:
        return without_password(value)
    return MASK


def _property_name(key: str) -> str | None:
    """The catalog property a key names: itself, or the part after Spark's
    `spark.sql.catalog.<name>.`; None for `spark.sql.catalog.<name>` (the catalog's class)."""
    if not key.startswith(_SPARK_CATALOG):
        return key
    rest = key[len(_SPARK_CATALOG) :]
    return rest.split(".", 1)[1] if "." in rest else None


def without_password(uri: str) -> str:
    """`uri` with its password as `***` (a JDBC URL's `jdbc:` kept). A URI SQLAlchemy cannot
    parse (a JDBC URL such as `jdbc:sqlite:/path`) is shown only when the standard library's URL
    parser finds a scheme in it and neither user information nor options; else it is masked whole."""
    jdbc = uri.startswith("jdbc:")
    bare = uri.removeprefix("jdbc:")
    try:
        url = make_url(bare)
    except (ArgumentError, ValueError):
        parts = urlsplit(bare)
        return uri if parts.scheme and "@" not in bare and not parts.query else MASK
    if url.query:  # a driver's options may carry a password too (`?password=…`): only their names are shown
        url = url.set(query=dict.fromkeys(url.query, MASK))
    text = url.render_as_string(hide_password=True)
    return f"jdbc:{text}" if jdbc else text


def scrubbed(text: str, properties: Mapping[str, str]) -> str:
    """`text` (an error's message) with every value not shown as it is replaced by `***`: the
    secrets of `properties`, and any password inside their URIs."""
    for key, value in sorted(properties.items(), key=lambda item: -len(item[1])):
        value = str(value)
        if shown_value(key, value) == value or len(value) < 3:
            continue
        secret = value if _property_name(key) not in URIS else _password_of(value)
        if secret:
            text = text.replace(secret, MASK).replace(quote(secret, safe=""), MASK)
    return text


def _password_of(uri: str) -> str | None:
    try:
        return make_url(uri.removeprefix("jdbc:")).password
    except (ArgumentError, ValueError):
        return uri


__all__ = ["HARMLESS", "MASK", "scrubbed", "shown", "shown_value", "without_password"]
