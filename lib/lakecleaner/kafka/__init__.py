"""Kafka in (issue 47): mirror a cluster's topics into the lake at their own offsets
(`mirror.py`, `mirror_run.py`, `resume.py`). The clients, the topic identity check and the
consumer groups' offsets are adapters in `io/kafka/`."""
