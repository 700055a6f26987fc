"""Client configuration parsing."""

from __future__ import annotations

import pytest

from moldau.client.config import parse_config
from moldau.client.errors import ConfigError
from moldau.protocol.records.compression import Codec


def test_defaults_follow_java_client() -> None:
    c = parse_config("producer", {"bootstrap.servers": "a:1,b:2"})
    assert c["bootstrap.servers"] == [("a", 1), ("b", 2)]
    assert c["acks"] == -1
    assert c["enable.idempotence"] is True
    assert c["batch.size"] == 16384
    assert c["max.in.flight.requests.per.connection"] == 5
    assert c["compression.type"] is Codec.NONE
    consumer = parse_config("consumer", {"bootstrap.servers": ["[::1]:9092"]})
    assert consumer["bootstrap.servers"] == [("::1", 9092)]
    assert consumer["auto.offset.reset"] == "latest"
    assert consumer["fetch.max.bytes"] == 52428800


def test_string_values_are_converted() -> None:
    c = parse_config("producer", {"bootstrap.servers": "h:1", "linger.ms": "7", "acks": "1",
                                  "enable.idempotence": "false", "compression.type": "ZSTD"})
    assert (c["linger.ms"], c["acks"], c["enable.idempotence"]) == (7, 1, False)
    assert c["compression.type"] is Codec.ZSTD


@pytest.mark.parametrize(("kind", "given", "fragment"), [
    ("producer", {"lingerms": 5}, "unknown producer config 'lingerms'; did you mean 'linger.ms'"),
    ("producer", {"group.id": "g"}, "it is a consumer setting"),
    ("consumer", {"acks": "all"}, "unknown consumer config 'acks'"),
    ("producer", {"acks": "2"}, "acks must be all, -1, 0 or 1"),
    ("producer", {"linger.ms": -1}, "linger.ms must be at least 0"),
    ("producer", {"linger.ms": "soon"}, "linger.ms must be an integer"),
    ("producer", {"compression.type": "brotli"}, "unknown compression type 'brotli'"),
    ("consumer", {"auto.offset.reset": "smallest"}, "earliest, latest, none"),
    ("consumer", {"check.crcs": "maybe"}, "check.crcs must be true or false"),
])
def test_bad_config_names_the_key(kind: str, given: dict, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(kind, {"bootstrap.servers": "h:1", **given})
    assert fragment in str(info.value)


@pytest.mark.parametrize("servers", ["", "nohost", "h:", "h:port", ":9092"])
def test_bad_bootstrap_servers(servers: str) -> None:
    with pytest.raises(ConfigError, match=r"bootstrap\.servers"):
        parse_config("admin", {"bootstrap.servers": servers})


def test_missing_bootstrap_servers() -> None:
    with pytest.raises(ConfigError, match=r"bootstrap\.servers is required"):
        parse_config("consumer", {})


def test_idempotence_conflicts() -> None:
    from moldau.client.producer import Producer

    with pytest.raises(ConfigError, match="acks must be all"):
        Producer({"bootstrap.servers": "h:1", "enable.idempotence": True, "acks": 1})
    # implicit idempotence yields to acks=1, as in the Java client
    assert not Producer({"bootstrap.servers": "h:1", "acks": 1}).idempotent
    assert Producer({"bootstrap.servers": "h:1"}).idempotent
