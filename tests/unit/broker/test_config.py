"""Broker configuration: properties parsing, KAFKA_* environment, validation messages."""

from __future__ import annotations

import pytest

from moldau.broker.config import ConfigError, load_config
from moldau.broker.config.loader import env_to_key


def test_config_files_are_read_as_java_reads_them(tmp_path) -> None:
    # The broker once read k=\u0041x as u0041x and stripped trailing spaces; the one parser
    # (moldau.protocol.properties, tested against java.util.Properties) reads Ax, and
    # ConfigDef trims typed values afterwards as Kafka's does.
    path = tmp_path / "server.properties"
    path.write_text("log.dirs=/data/\\u0041x\nnum.partitions : 3   \nbroker.rack  r\\\n  1\n"
                    "listeners=PLAINTEXT://127.0.0.1:0\n")
    config = load_config(path, [], {})
    assert [str(d) for d in config.log_dirs] == ["/data/Ax"]
    assert config["num.partitions"] == 3 and config["broker.rack"] == "r1"
    path.write_text("log.dirs=/a\\u00G1\n")
    with pytest.raises(ConfigError, match=r"server\.properties: line 1: malformed \\uxxxx"):
        load_config(path, [], {})


@pytest.mark.parametrize(("env", "key"), [
    ("KAFKA_ADVERTISED_LISTENERS", "advertised.listeners"),
    ("KAFKA_LOG_DIRS", "log.dirs"),
    ("KAFKA_INTER_BROKER_LISTENER_NAME", "inter.broker.listener.name"),
    ("KAFKA_FOO__BAR", "foo_bar"),
    ("KAFKA_FOO___BAR", "foo-bar"),
    ("KAFKA_HEAP_OPTS", None),
    ("PATH", None),
])
def test_env_mapping_follows_docker_images(env: str, key: str | None) -> None:
    assert env_to_key(env) == key


def test_precedence_file_env_override(tmp_path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("num.partitions=2\nlog.dirs=/a\nlisteners=PLAINTEXT://127.0.0.1:0\n")
    config = load_config(path, ["log.dirs=/c"], {"KAFKA_NUM_PARTITIONS": "3",
                                                  "KAFKA_LOG_DIRS": "/b"})
    assert config["num.partitions"] == 3
    assert [str(d) for d in config.log_dirs] == ["/c"]


def test_broker_id_from_env_replaces_embedded_node_id() -> None:
    config = load_config(None, [], {"KAFKA_BROKER_ID": "7"})
    assert config.node_id == 7


def test_defaults_are_kafkas() -> None:
    config = load_config(None, [], {})
    assert config["message.max.bytes"] == 1048588
    assert config["log.segment.bytes"] == 1073741824
    assert config.retention_ms == 168 * 3600 * 1000
    assert config["socket.request.max.bytes"] == 104857600
    defaults = config.topic_defaults()
    assert defaults["retention.ms"] == 604800000
    assert defaults["max.message.bytes"] == 1048588


def test_retention_synonyms() -> None:
    assert load_config(None, ["log.retention.minutes=5"], {}).retention_ms == 300_000
    assert load_config(None, ["log.retention.minutes=5", "log.retention.ms=7"],
                       {}).retention_ms == 7


@pytest.mark.parametrize(("override", "needles"), [
    ("num.partitions=zero", ["num.partitions", "'zero'", "whole number"]),
    ("num.partitions=0", ["num.partitions", "at least 1"]),
    ("auto.create.topics.enable=yes", ["auto.create.topics.enable", "true or false"]),
    ("log.message.timestamp.type=Wall", ["log.message.timestamp.type", "CreateTime"]),
    ("log.segment.bytes=99999999999", ["log.segment.bytes", "between"]),
])
def test_bad_values_name_key_value_and_expectation(override: str, needles: list[str]) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(None, [override], {})
    for needle in needles:
        assert needle in str(err.value)


def test_unreadable_file_is_reported(tmp_path) -> None:
    with pytest.raises(ConfigError, match="Cannot read config file"):
        load_config(tmp_path / "missing.properties", [], {})


def test_unknown_keys_warn_not_fail(caplog) -> None:
    config = load_config(None, ["zookeeper.set.acl=true"], {})
    assert "zookeeper.set.acl" in config.unknown
    assert "isn't a known config" in caplog.text
