"""lakecleaner: Kafka log compaction and retention for data lakes."""
