"""How Spark reads the lake's tables with Apache Iceberg's own runtime: the `spark.sql.catalog.*`
configuration equivalent to the pyiceberg catalog properties (`iceberg.catalog`), which
`lakecleaner iceberg status` shows beside them.

pyiceberg's SQL catalog keeps its tables in Iceberg's JDBC schema, so Spark reaches it through
Iceberg's JdbcCatalog: a SQLAlchemy URI becomes a JDBC URL (`sqlite:///p` → `jdbc:sqlite:/p`,
`postgresql+psycopg://u:pw@h/db` → `jdbc:postgresql://h/db` with `jdbc.user` and
`jdbc.password`). Other catalog types (rest, glue, hive) take their properties as they are. The
`s3.*` properties have the same names in Iceberg's S3FileIO but the region (`client.region`) and
the addressing style (`s3.path-style-access`: on, for an endpoint of one's own, unless
`s3.force-virtual-addressing` says otherwise). Spark needs `SPARK_PACKAGES` on its classpath.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import unquote, urlsplit

from lakecleaner.iceberg.catalog import CATALOG_NAME

#: Iceberg's Spark runtime (built for Spark 4.1; Iceberg publishes none for Spark 4.3 yet), its
#: AWS bundle (S3FileIO) and the JDBC drivers of the SQL catalogs pyiceberg keeps.
SPARK_PACKAGES = (
    "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0",
    "org.apache.iceberg:iceberg-aws-bundle:1.12.0",
    "org.xerial:sqlite-jdbc:3.50.3.0",
    "org.postgresql:postgresql:42.7.14",
)
#: pyiceberg's names of catalog properties that Iceberg's Java catalogs spell differently.
_RENAMED = {"s3.region": "client.region"}
#: pyiceberg-only properties with no meaning to the Java catalogs.
_PYICEBERG_ONLY = {"type", "uri", "s3.force-virtual-addressing", "py-io-impl"}
#: JDBC URL schemes of SQLAlchemy dialects.
_JDBC_SCHEMES = {"sqlite": "sqlite", "postgresql": "postgresql", "mysql": "mysql"}


class NoSparkEquivalent(ValueError):
    """The pyiceberg catalog has no Iceberg Java catalog that reads the same tables."""


def spark_catalog_conf(properties: Mapping[str, str], name: str = CATALOG_NAME) -> dict[str, str]:
    """The Spark configuration of an Iceberg catalog `name` over the same tables as pyiceberg's
    catalog of `properties` (raises NoSparkEquivalent when there is none)."""
    prefix = f"spark.sql.catalog.{name}"
    conf = {
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        **{f"{prefix}.{k}": v for k, v in _catalog(properties).items()},
    }
    for key, value in properties.items():
        if key not in _PYICEBERG_ONLY and not key.startswith("jdbc."):
            conf[f"{prefix}.{_RENAMED.get(key, key)}"] = value
    if str(properties.get("warehouse", "")).startswith("s3://"):
        conf[f"{prefix}.io-impl"] = "org.apache.iceberg.aws.s3.S3FileIO"
    if "s3.endpoint" in properties:
        virtual = str(properties.get("s3.force-virtual-addressing", "false")).lower() == "true"
        conf.setdefault(f"{prefix}.s3.path-style-access", "false" if virtual else "true")
    return conf


def _catalog(properties: Mapping[str, str]) -> dict[str, str]:
    """The catalog's own properties: type and URI (and credentials, for JDBC)."""
    kind = properties.get("type", "rest")
    if kind != "sql":
        return {"type": kind, **({"uri": properties["uri"]} if "uri" in properties else {})}
    return {"type": "jdbc", **_jdbc(properties.get("uri", ""))}


def _jdbc(uri: str) -> dict[str, str]:
    """A SQLAlchemy database URI as Iceberg JdbcCatalog's `uri`, `jdbc.user` and `jdbc.password`."""
    dialect = uri.split(":", 1)[0].split("+", 1)[0]
    scheme = _JDBC_SCHEMES.get(dialect)
    if scheme is None:
        raise NoSparkEquivalent(f"no JDBC URL is known for the SQL catalog's database {dialect!r}")
    if scheme == "sqlite":
        return {"uri": "jdbc:sqlite:" + uri.split(":///", 1)[-1]}
    parts = urlsplit(uri)
    host = parts.hostname or "localhost"
    out = {"uri": f"jdbc:{scheme}://{host}{f':{parts.port}' if parts.port else ''}{parts.path}"}
    if parts.username:
        out["jdbc.user"] = unquote(parts.username)
    if parts.password:
        out["jdbc.password"] = unquote(parts.password)
    return out


__all__ = ["SPARK_PACKAGES", "NoSparkEquivalent", "spark_catalog_conf"]
