"""Kafka record batches (magic 2): header layout and validation, records, compression."""
