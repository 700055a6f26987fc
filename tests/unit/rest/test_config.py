"""REST Proxy settings: Confluent's keys and defaults, client prefixes, errors naming the key,
and the docs table kept current."""

from __future__ import annotations

from pathlib import Path

import pytest

from moldau.client.errors import ConfigError
from moldau.rest.config import build_config, keys_table, load_config


def test_defaults_are_confluents() -> None:
    config = build_config({"bootstrap.servers": "localhost:9092"})
    assert config["listeners"] == "http://0.0.0.0:8082"
    assert config["consumer.instance.timeout.ms"] == 300000
    assert config["consumer.request.timeout.ms"] == 1000
    assert config["consumer.request.max.bytes"] == 67108864
    assert config["fetch.min.bytes"] == -1
    assert config["schema.registry.url"] == "http://localhost:8081"
    assert config["host.name"] == "" and config["advertised.listeners"] == ""
    assert config["id"] == "" and config["api.v2.enable"] is True


def test_client_prefixes_most_specific_wins() -> None:
    config = build_config({
        "bootstrap.servers": "PLAINTEXT://h1:9092,h2:9093",
        "client.request.timeout.ms": "5000", "consumer.request.timeout.ms": "2000",
        "producer.linger.ms": "20", "client.linger.ms": "1", "admin.client.id": "a",
        "consumer.max.partition.fetch.bytes": "65536", "client.security.protocol": "PLAINTEXT",
        "consumer.no.such.key": "1", "client.ssl.truststore.location": "/x",
    })
    assert config["bootstrap.servers"] == "h1:9092,h2:9093"
    producer, consumer, admin = (config.client(k) for k in ("producer", "consumer", "admin"))
    assert producer["linger.ms"] == "20" and producer["request.timeout.ms"] == "5000"
    assert producer["bootstrap.servers"] == "h1:9092,h2:9093"
    # consumer.request.timeout.ms is the proxy's own key, not the consumer client's
    assert consumer["request.timeout.ms"] == "5000"
    assert config["consumer.request.timeout.ms"] == 2000
    assert consumer["max.partition.fetch.bytes"] == "65536"
    assert "no.such.key" not in consumer and "ssl.truststore.location" not in consumer
    assert admin["client.id"] == "a" and "linger.ms" not in admin


@pytest.mark.parametrize("raw, words", [
    ({}, ["bootstrap.servers is required"]),
    ({"bootstrap.servers": "nohostport"}, ["bootstrap.servers", "nohostport"]),
    ({"bootstrap.servers": "h:1", "listeners": "h:8082"}, ["listeners", "'h:8082'"]),
    ({"bootstrap.servers": "h:1", "consumer.instance.timeout.ms": "soon"},
     ["consumer.instance.timeout.ms", "integer"]),
    ({"bootstrap.servers": "h:1", "fetch.min.bytes": "-5"}, ["fetch.min.bytes", "between"]),
    ({"bootstrap.servers": "h:1", "client.security.protocol": "SSL"}, ["PLAINTEXT"]),
    ({"bootstrap.servers": "h:1", "producer.linger.ms": "x"}, ["linger.ms"]),
])
def test_errors_name_the_key(raw: dict[str, str], words: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        build_config(raw)
    for word in words:
        assert word in str(info.value)


def test_file_then_overrides(tmp_path: Path) -> None:
    path = tmp_path / "kafka-rest.properties"
    path.write_text("bootstrap.servers=h:1\nid=from-file\nlisteners=http://0.0.0.0:1\n")
    config = load_config(path, {"listeners": "http://127.0.0.1:0"})
    assert config["id"] == "from-file" and config["listeners"] == "http://127.0.0.1:0"
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.properties")


def test_the_doc_carries_the_keys_table() -> None:
    doc = (Path(__file__).resolve().parents[3] / "docs" / "rest-proxy.md").read_text()
    assert keys_table() in doc, "paste `python -m moldau.rest.config` into docs/rest-proxy.md"
