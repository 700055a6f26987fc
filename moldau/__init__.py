"""Moldau: a Kafka-compatible event streaming platform written in Python."""

__version__ = "0.1.0"
