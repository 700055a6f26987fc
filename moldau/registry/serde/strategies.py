"""Subject name strategies: which subject a topic's keys or values are registered under.

=========================  ===========================  ==================================
strategy                   subject                      use
=========================  ===========================  ==================================
TopicNameStrategy          ``<topic>-key|value``        the default: one schema per topic
RecordNameStrategy         ``<record full name>``       one type across many topics
TopicRecordNameStrategy    ``<topic>-<record name>``    several types in one topic
=========================  ===========================  ==================================

The record name is the Avro record's full name, the JSON Schema's ``title`` or the Protobuf
message's full name. Strategies are named as in Confluent's serializers, either by their short
name or by the Java class name (``io.confluent.kafka.serializers.subject.RecordNameStrategy``),
or given as a callable ``(topic, is_key, record_name) -> subject``.
"""

from __future__ import annotations

from collections.abc import Callable

from .wire import SerializationError

SubjectNameStrategy = Callable[[str, bool, "str | None"], "str | None"]


def topic_name_strategy(topic: str, is_key: bool, record_name: str | None) -> str:
    """``<topic>-key`` or ``<topic>-value``."""
    return f"{topic}-{'key' if is_key else 'value'}"


def record_name_strategy(topic: str, is_key: bool, record_name: str | None) -> str | None:
    """The record's full name (None when the schema has no name)."""
    return record_name


def topic_record_name_strategy(topic: str, is_key: bool, record_name: str | None
                               ) -> str | None:
    """``<topic>-<record full name>`` (None when the schema has no name)."""
    return None if record_name is None else f"{topic}-{record_name}"


STRATEGIES: dict[str, SubjectNameStrategy] = {
    "TopicNameStrategy": topic_name_strategy,
    "RecordNameStrategy": record_name_strategy,
    "TopicRecordNameStrategy": topic_record_name_strategy,
}


def strategy_from_config(value: str | SubjectNameStrategy | None) -> SubjectNameStrategy:
    """The strategy a ``subject.name.strategy`` setting names (default TopicNameStrategy)."""
    if value is None or value == "":
        return topic_name_strategy
    if callable(value):
        return value
    name = str(value).strip().rsplit(".", 1)[-1]
    found = STRATEGIES.get(name)
    if found is None:
        raise SerializationError(f"unknown subject name strategy {value!r}: expected one of "
                                 f"{', '.join(STRATEGIES)}")
    return found
