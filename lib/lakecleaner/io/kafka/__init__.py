"""Adapters to Kafka, beside `io/s3/`: librdkafka clients of a configured cluster and what their
errors mean (`clients.py`), what the cluster says a topic is (`identity.py`, KIP-516), the
committed offsets of the consumer groups it keeps (`groups.py`), and those offsets as values the
lake's own layers take (`committed.py`). confluent-kafka (the `kafka` extra) is imported only
where a cluster is asked, so a lake without Kafka never loads it."""
