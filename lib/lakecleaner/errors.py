"""The project's exceptions.

Every error names the thing it is about (a config key, an object key, a topic) and, where
there is one, the fix. No message ever carries credentials: storage errors are built from
the bucket and key only, never from a client's configuration.
"""

from __future__ import annotations


class LakeCleanerError(Exception):
    """Base class of every error lakecleaner raises on purpose."""


class ConfigError(LakeCleanerError):
    """One or more configuration problems; `problems` lists them one per line."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


class ConfigFileSyntax(ConfigError):
    """A config file that is not YAML: one problem, `<file>:<line>:<column>: <what>`."""


class InvalidRunParams(LakeCleanerError, ValueError):
    """A DAG run's trigger parameter that cannot be used; the message names it and says why."""


class InvalidTopicName(LakeCleanerError, ValueError):
    """A topic name that breaks Kafka's naming rule."""


class StorageError(LakeCleanerError):
    """A storage operation failed permanently (after retries, where it was retryable)."""

    def __init__(self, operation: str, location: str, reason: str) -> None:
        self.operation = operation
        self.location = location
        self.reason = reason
        super().__init__(f"{operation} {location}: {reason}")


class ObjectNotFound(StorageError):
    """The object does not exist."""


class ConditionFailed(StorageError):
    """A conditional write lost: the object exists (create) or changed (replace)."""


class NotSupported(StorageError):
    """The store does not implement the request (S3's 501 NotImplemented, 405 MethodNotAllowed):
    asking again cannot help."""


class UnsafeStore(StorageError):
    """The object store ignores conditional writes: lakecleaner refuses to write to it."""


class CommitStateUnknown(LakeCleanerError):
    """A manifest write failed in a way that does not say whether it landed, and the manifest could
    not be read back to find out (pyiceberg's CommitStateUnknownException). Nothing the commit would
    have referenced may be deleted: the next run, or `lakecleaner repair`, settles it."""


class InvalidTransition(LakeCleanerError):
    """A commit would move a partition backwards (its version not the next one, its next offset,
    log start offset or cleaner checkpoint lower): refused, nothing written. Only `repair` may."""


class AdoptedByRepair(LakeCleanerError):
    """A writer's files were taken into the log by `lakecleaner repair` before its own commit
    landed: the log holds them as the repair rebuilt it, and the writer's commit did not land.
    Nothing it wrote may be deleted (the log references it now)."""


class CorruptManifest(LakeCleanerError):
    """A manifest that cannot be parsed or fails its consistency checks."""


class CorruptSegment(LakeCleanerError):
    """A segment file that is missing, unreadable or disagrees with the manifest."""


class CorruptOffsets(LakeCleanerError):
    """A consumer group's offsets file that cannot be parsed."""


class CorruptCleanerState(LakeCleanerError):
    """A topic's cleaner state file (uncleanable partitions, last run) that cannot be parsed."""


class ConcurrentModification(LakeCleanerError):
    """A commit kept losing races, or its inputs were changed by another writer."""


class OffsetOutOfRange(LakeCleanerError):
    """A read or trim at an offset outside [log start offset, next offset]."""


class InvalidRecord(LakeCleanerError, ValueError):
    """A record the log refuses (e.g. no key on a compacted topic)."""


class TopicNotFound(LakeCleanerError):
    """The topic or partition does not exist in the lake."""


class TopicExists(LakeCleanerError):
    """The topic already exists."""


class KafkaUnavailable(LakeCleanerError):
    """A Kafka cluster did not answer, or answered with an error (the message names the cluster by
    its name and bootstrap servers, never by its credentials)."""


class KafkaAccessDenied(KafkaUnavailable):
    """A Kafka cluster refused lakecleaner's credentials (SASL, SSL) or rights (ACLs): no retry
    mends it (the message names the cluster and the properties to check, never their values)."""


class MirrorMismatch(LakeCleanerError):
    """The Kafka topic and the lake topic mirroring it disagree (another topic id or cluster id,
    fewer partitions, records that differ at offsets the lake holds): nothing is written until
    someone decides."""


class WriterRefused(LakeCleanerError):
    """An append to a topic whose records come from a source (`mirror:`, `adopt:`) by a writer
    other than that source's: one writer per topic keeps the lake's offsets the source's."""


class CorruptSummary(LakeCleanerError):
    """A topic's summary (issue 50) that cannot be parsed: the views read its manifests instead."""


class SparkNotInstalled(LakeCleanerError):
    """No Spark distribution to run: pyspark is not installed (and, for spark-submit, SPARK_HOME is not set)."""


class TableUnreadable(LakeCleanerError):
    """An Iceberg table whose current snapshot cannot be read (a file it reaches is gone, its
    metadata damaged): the tables are rebuilt from the manifests (`iceberg sync --rebuild`)."""


class TableOfAnotherLake(LakeCleanerError):
    """An Iceberg table that another lake owns (two lakes sharing one catalog and namespace):
    never synced, expired or dropped by this one."""
