"""What a developer runs beside lakecleaner to try it (issue 78): a real Apache Kafka broker to
mirror from (`lakecleaner dev kafka`, `make kafka`), fetched from Maven Central as the tests fetch
theirs. Nothing here is used by a lake, a DAG or a compaction."""
