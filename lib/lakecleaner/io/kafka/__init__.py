"""Adapters to Kafka, beside `io/s3/`: what a Kafka cluster answers, as values the lake's own
layers take (`committed.py`: consumer groups' committed offsets, whether the lake keeps them or a
cluster does). The clients themselves (`kafka/clients.py`, `kafka/groups.py`) still live in
`kafka/`."""
