"""Registry settings: Confluent's keys and defaults, errors naming the key, client settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from moldau.client.errors import ConfigError
from moldau.registry.config import build_config, load_config


def test_defaults_are_confluents() -> None:
    config = build_config({"kafkastore.bootstrap.servers": "h:9092"})
    assert config["listeners"] == "http://0.0.0.0:8081"
    assert config["kafkastore.topic"] == "_schemas"
    assert config["kafkastore.topic.replication.factor"] == 3
    assert config["kafkastore.timeout.ms"] == 500
    assert config["kafkastore.init.timeout.ms"] == 60000
    assert config["schema.compatibility.level"] == "BACKWARD"
    assert config["mode.mutability"] is True
    assert config["schema.registry.group.id"] == "schema-registry"
    assert config["leader.eligibility"] is True
    assert config.client == {"bootstrap.servers": "h:9092",
                             "client.id": "moldau-schema-registry"}


def test_kafkastore_keys_reach_the_client(caplog: pytest.LogCaptureFixture) -> None:
    config = build_config({
        "kafkastore.bootstrap.servers": "h:9092",
        "kafkastore.broker.address.map": "10.0.0.1=127.0.0.1",
        "kafkastore.request.timeout.ms": "5000",
        "kafkastore.security.protocol": "PLAINTEXT",
        "kafkastore.sasl.mechanism": "PLAIN",
        "some.unknown.key": "x",
    })
    assert config.client["broker.address.map"] == "10.0.0.1=127.0.0.1"
    assert config.client["request.timeout.ms"] == "5000"
    assert "security.protocol" not in config.client and "sasl.mechanism" not in config.client
    assert "kafkastore.sasl.mechanism" in caplog.text and "some.unknown.key" in caplog.text


@pytest.mark.parametrize("raw, words", [
    ({}, ["kafkastore.bootstrap.servers", "required"]),
    ({"kafkastore.bootstrap.servers": "nohost"}, ["kafkastore.bootstrap.servers", "nohost"]),
    ({"listeners": "localhost:8081"}, ["listeners", "'localhost:8081'"]),
    ({"schema.compatibility.level": "mostly"}, ["schema.compatibility.level", "mostly"]),
    ({"kafkastore.timeout.ms": "soon"}, ["kafkastore.timeout.ms", "soon"]),
    ({"mode.mutability": "perhaps"}, ["mode.mutability", "perhaps"]),
    ({"kafkastore.security.protocol": "SSL"}, ["kafkastore.security.protocol", "PLAINTEXT"]),
])
def test_bad_values_name_the_key(raw: dict[str, str], words: list[str]) -> None:
    if raw and "kafkastore.bootstrap.servers" not in raw:
        raw = {"kafkastore.bootstrap.servers": "h:9092", **raw}
    with pytest.raises(ConfigError) as info:
        build_config(raw)
    for word in words:
        assert word in str(info.value)


def test_file_then_overrides(tmp_path: Path) -> None:
    path = tmp_path / "schema-registry.properties"
    path.write_text("listeners=http://0.0.0.0:8081\nkafkastore.bootstrap.servers=a:1\n"
                    "schema.compatibility.level=full\n")
    config = load_config(path, {"kafkastore.bootstrap.servers": "b:2"})
    assert config["kafkastore.bootstrap.servers"] == "b:2"
    assert config["schema.compatibility.level"] == "FULL"
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.properties")


def test_configuration_doc_lists_every_key() -> None:
    from moldau.registry.config import keys_table

    doc = (Path(__file__).resolve().parents[3] / "docs" / "configuration.md").read_text()
    assert keys_table() in doc, "paste `python -m moldau.registry.config` into the doc"
