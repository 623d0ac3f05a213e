"""Eddy: stateful stream processing with Flink's event-time semantics on Kafka."""

__version__ = "0.1.0"
