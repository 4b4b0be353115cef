"""Kafka in (issue 47): mirror a cluster's topics into the lake at their own offsets
(`mirror.py`), and read the committed offsets of the consumer groups the cluster keeps
(`groups.py`). Clients are librdkafka's (confluent-kafka, the `kafka` extra), made by
`clients.py` from the config file's `kafka.clusters`."""
