"""Effective and described topic/broker configs: Kafka's precedence, synonyms and rendering."""

from __future__ import annotations

import uuid

import pytest

from moldau.broker.config import build_config
from moldau.broker.config.definitions import TOPIC_CONFIGS
from moldau.broker.metadata.configs import (
    DYNAMIC_BROKER_CONFIGS,
    ConfigSource,
    ConfigType,
    broker_entries,
    broker_key_synonyms,
    effective_broker_config,
    effective_topic_config,
    java_double,
    render,
    topic_entries,
)
from moldau.broker.metadata.image import MetadataImage
from moldau.broker.metadata.records import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    ConfigRecord,
    TopicRecord,
)

LISTENERS = {"listeners": "PLAINTEXT://127.0.0.1:0", "node.id": "1"}


def config(**settings: str):  # type: ignore[no-untyped-def]
    return build_config({**LISTENERS, **{k.replace("_", "."): v for k, v in settings.items()}})


def image_with_topic(*records: ConfigRecord) -> MetadataImage:
    return MetadataImage.from_records([TopicRecord("t", uuid.uuid4()), *records])


def topic_config(key: str, value: str | None) -> ConfigRecord:
    return ConfigRecord(TOPIC_RESOURCE, "t", key, value)


def broker_config(name: str, key: str, value: str | None) -> ConfigRecord:
    return ConfigRecord(BROKER_RESOURCE, name, key, value)


def entry(entries, name):  # type: ignore[no-untyped-def]
    return next(e for e in entries if e.name == name)


# --- effective_topic_config ------------------------------------------------------------------
def test_defaults_cover_every_topic_key_with_kafka_values() -> None:
    effective = effective_topic_config(image_with_topic(), config(), "t")
    assert set(effective) == {d.name for d, _ in TOPIC_CONFIGS}
    assert effective["retention.ms"] == 7 * 24 * 3_600_000
    assert effective["segment.ms"] == 7 * 24 * 3_600_000
    assert effective["segment.bytes"] == 1073741824
    assert effective["cleanup.policy"] == ["delete"]
    assert effective["max.message.bytes"] == 1048588
    assert effective["min.cleanable.dirty.ratio"] == 0.5
    assert effective["flush.ms"] == 2**63 - 1
    assert effective["unclean.leader.election.enable"] is False


def test_static_broker_synonym_converts_hours_and_minutes() -> None:
    assert effective_topic_config(image_with_topic(), config(log_retention_hours="2"),
                                  "t")["retention.ms"] == 7_200_000
    both = config(log_retention_hours="2", log_retention_minutes="3")
    assert effective_topic_config(image_with_topic(), both, "t")["retention.ms"] == 180_000
    assert effective_topic_config(image_with_topic(), config(log_roll_hours="1"),
                                  "t")["segment.ms"] == 3_600_000


def test_precedence_topic_then_node_then_cluster_default_then_static() -> None:
    static = config(log_retention_ms="1000", log_segment_bytes="5000")
    image = image_with_topic(broker_config("", "log.retention.ms", "2000"))
    assert effective_topic_config(image, static, "t")["retention.ms"] == 2000
    image.replay(broker_config("1", "log.retention.ms", "3000"))
    assert effective_topic_config(image, static, "t")["retention.ms"] == 3000
    image.replay(topic_config("retention.ms", "4000"))
    effective = effective_topic_config(image, static, "t")
    assert effective["retention.ms"] == 4000
    assert effective["segment.bytes"] == 5000  # static, untouched by the others


def test_dynamic_config_of_another_broker_does_not_apply() -> None:
    image = image_with_topic(broker_config("2", "log.segment.bytes", "1234"))
    assert effective_topic_config(image, config(), "t")["segment.bytes"] == 1073741824


def test_dynamic_ms_beats_static_hours() -> None:
    image = image_with_topic(broker_config("", "log.retention.ms", "60000"))
    effective = effective_topic_config(image, config(log_retention_hours="5"), "t")
    assert effective["retention.ms"] == 60000


def test_topic_list_values_are_typed() -> None:
    image = image_with_topic(topic_config("cleanup.policy", "compact, delete"))
    assert effective_topic_config(image, config(), "t")["cleanup.policy"] == ["compact",
                                                                             "delete"]


def test_deleted_topic_override_falls_back() -> None:
    image = image_with_topic(topic_config("retention.ms", "5"), topic_config("retention.ms",
                                                                             None))
    assert effective_topic_config(image, config(), "t")["retention.ms"] == 604800000


def test_unparseable_stored_value_is_ignored() -> None:
    image = image_with_topic(broker_config("", "log.segment.bytes", "nope"))
    assert effective_topic_config(image, config(), "t")["segment.bytes"] == 1073741824


# --- topic_entries -----------------------------------------------------------------------------
def test_topic_entry_sources_and_synonym_chain() -> None:
    image = image_with_topic(topic_config("retention.ms", "1000"),
                             broker_config("", "log.retention.ms", "2000"))
    entries = topic_entries(image, config(log_retention_hours="3"), "t")
    assert [e.name for e in entries] == sorted(e.name for e in entries)
    retention = entry(entries, "retention.ms")
    assert retention.value == "1000"
    assert retention.source == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert [(s.name, s.value, s.source) for s in retention.synonyms] == [
        ("retention.ms", "1000", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ("log.retention.ms", "2000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.hours", "3", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    ]
    assert retention.type == ConfigType.LONG
    assert retention.read_only is False


def test_topic_entry_default_source_and_rendering() -> None:
    entries = topic_entries(image_with_topic(), config(), "t")
    policy = entry(entries, "cleanup.policy")
    assert (policy.value, policy.source, policy.type) == ("delete", ConfigSource.DEFAULT_CONFIG,
                                                          ConfigType.LIST)
    assert entry(entries, "preallocate").value == "false"
    assert entry(entries, "min.cleanable.dirty.ratio").value == "0.5"
    flush = entry(entries, "flush.ms")
    assert [s.name for s in flush.synonyms] == ["log.flush.scheduler.interval.ms"]
    # keys with no broker synonym: DEFAULT_CONFIG with no synonyms
    before = entry(entries, "message.timestamp.before.max.ms")
    assert (before.source, before.synonyms) == (ConfigSource.DEFAULT_CONFIG, ())


def test_topic_entries_filter_and_overrides() -> None:
    entries = topic_entries(image_with_topic(), config(), "t", keys=["segment.bytes", "x"],
                            overrides={"segment.bytes": "2048"})
    assert [(e.name, e.value, e.source) for e in entries] == [
        ("segment.bytes", "2048", ConfigSource.DYNAMIC_TOPIC_CONFIG)]


def test_describe_dict_respects_flags() -> None:
    retention = entry(topic_entries(image_with_topic(), config(), "t"), "retention.ms")
    plain = retention.as_describe(include_synonyms=False, include_documentation=False)
    assert plain["synonyms"] == [] and plain["documentation"] is None
    full = retention.as_describe(include_synonyms=True, include_documentation=True)
    assert full["synonyms"] == [{"name": "log.retention.hours", "value": "168", "source": 5}]
    assert full["documentation"]
    assert full["config_type"] == 5 and full["config_source"] == 5


# --- broker_entries ---------------------------------------------------------------------------
def test_broker_entries_of_this_node() -> None:
    image = image_with_topic(broker_config("1", "log.retention.ms", "9"))
    entries = broker_entries(image, config(log_retention_hours="2"), "1")
    hours = entry(entries, "log.retention.hours")
    assert (hours.value, hours.source, hours.read_only) == ("2",
                                                            ConfigSource.STATIC_BROKER_CONFIG,
                                                            True)
    assert [(s.name, s.source) for s in hours.synonyms] == [
        ("log.retention.hours", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", ConfigSource.DEFAULT_CONFIG)]
    ms = entry(entries, "log.retention.ms")
    assert (ms.value, ms.source, ms.read_only) == ("9", ConfigSource.DYNAMIC_BROKER_CONFIG,
                                                   False)
    minutes = entry(entries, "log.retention.minutes")
    assert (minutes.value, minutes.source) == (None, ConfigSource.DEFAULT_CONFIG)
    assert entry(entries, "auto.create.topics.enable").value == "true"
    assert entry(entries, "auto.create.topics.enable").type == ConfigType.BOOLEAN


def test_broker_entries_of_cluster_default_list_only_dynamic_defaults() -> None:
    image = image_with_topic(broker_config("", "log.segment.bytes", "4096"),
                             broker_config("1", "message.max.bytes", "10"))
    entries = broker_entries(image, config(), "")
    assert [(e.name, e.value, e.source) for e in entries] == [
        ("log.segment.bytes", "4096", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)]
    assert [s.source for s in entries[0].synonyms] == [
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]


def test_effective_broker_config_applies_dynamic_levels() -> None:
    image = image_with_topic(broker_config("", "message.max.bytes", "100"),
                             broker_config("", "log.segment.bytes", "2000"),
                             broker_config("1", "log.segment.bytes", "3000"))
    effective = effective_broker_config(image, config())
    assert effective["message.max.bytes"] == 100
    assert effective["log.segment.bytes"] == 3000
    assert effective["num.partitions"] == 1


# --- helpers ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("value", "text"), [
    (0.5, "0.5"), (1.0, "1.0"), (0.0, "0.0"), (1e-5, "1.0E-5"), (1e7, "1.0E7"),
    (12345678.9, "1.23456789E7"), (0.001, "0.001"), (-2.5e-4, "-2.5E-4"),
])
def test_java_double(value: float, text: str) -> None:
    assert java_double(value) == text


def test_render() -> None:
    assert render(None, ["a", "b"]) == "a,b"
    assert render(None, True) == "true"
    assert render(None, None) is None
    assert render(None, 5) == "5"


def test_dynamic_keys_follow_kafka() -> None:
    assert {"log.retention.ms", "log.retention.bytes", "log.segment.bytes",
            "message.max.bytes", "log.cleanup.policy",
            "log.cleaner.min.cleanable.ratio"} <= DYNAMIC_BROKER_CONFIGS
    # Kafka makes only the first synonym dynamic
    assert "log.retention.hours" not in DYNAMIC_BROKER_CONFIGS
    assert "log.dirs" not in DYNAMIC_BROKER_CONFIGS
    assert "num.partitions" not in DYNAMIC_BROKER_CONFIGS


def test_broker_key_synonyms() -> None:
    assert broker_key_synonyms("log.retention.hours") == (
        "log.retention.ms", "log.retention.minutes", "log.retention.hours")
    assert broker_key_synonyms("num.partitions") == ("num.partitions",)


def test_precomputed_levels_give_the_same_answer() -> None:
    from moldau.broker.metadata.configs import broker_levels

    image = image_with_topic(broker_config("", "log.segment.bytes", "4096"),
                             topic_config("retention.ms", "5"))
    cfg = config(log_retention_hours="3")
    levels = broker_levels(image, cfg)
    assert effective_topic_config(image, cfg, "t", levels=levels) == effective_topic_config(
        image, cfg, "t")
    assert effective_topic_config(image, cfg, "t", levels=levels)["segment.bytes"] == 4096
