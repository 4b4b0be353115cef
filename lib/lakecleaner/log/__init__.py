"""The partition log: manifests, segment files, records, the commit protocol, repair and leases
(Kafka's UnifiedLog). A regular package, not a namespace one: executors import lakecleaner from a
zip (spark.submit.pyFiles), and zipimport finds only regular packages."""
