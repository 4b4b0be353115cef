"""The s3:// backend, by job: `connection` (the client, key mapping, signed requests), `replies`
(what a reply means), `probe` (refusing a store without conditional writes), `deletes`
(DeleteObjects, versions) and `store` (the ObjectStore)."""

from lakecleaner.io.s3.connection import ENV_CHECKSUM_CALCULATION, split_s3_uri
from lakecleaner.io.s3.store import S3Store

__all__ = ["ENV_CHECKSUM_CALCULATION", "S3Store", "split_s3_uri"]
