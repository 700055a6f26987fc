"""Kafka's listener rules, with messages that name the key, the value and the fix."""

from __future__ import annotations

import socket

import pytest

from moldau.broker.config import ConfigError, load_config

SEED_000 = {
    "KAFKA_LISTENERS": "LISTENER_BOB://kafka0:29092,LISTENER_FRED://kafka0:9092,"
                       "LISTENER_ALICE://kafka0:29094",
    "KAFKA_ADVERTISED_LISTENERS": "LISTENER_BOB://kafka0:29092,LISTENER_FRED://localhost:9092,"
                                  "LISTENER_ALICE://never-gonna-give-you-up:29094",
    "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "LISTENER_BOB:PLAINTEXT,LISTENER_FRED:PLAINTEXT,"
                                            "LISTENER_ALICE:PLAINTEXT",
    "KAFKA_INTER_BROKER_LISTENER_NAME": "LISTENER_BOB",
    "KAFKA_BROKER_ID": "0",
}


def test_seed_000_configuration() -> None:
    config = load_config(None, [], SEED_000)
    adv = {e.name: (e.host, e.port) for e in config.listeners.advertised}
    assert adv == {"LISTENER_BOB": ("kafka0", 29092), "LISTENER_FRED": ("localhost", 9092),
                   "LISTENER_ALICE": ("never-gonna-give-you-up", 29094)}
    assert config.listeners.inter_broker_listener == "LISTENER_BOB"
    assert config.node_id == 0


def test_aws_option_2() -> None:
    config = load_config(None, [
        "listeners=INTERNAL://0.0.0.0:19092,EXTERNAL://0.0.0.0:9092",
        "listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
        "advertised.listeners=INTERNAL://ip-172-31-18-160.us-west-2.compute.internal:19092,"
        "EXTERNAL://ec2-54-191-84-122.us-west-2.compute.amazonaws.com:9092",
        "inter.broker.listener.name=INTERNAL",
    ], {})
    assert [e.host for e in config.listeners.listeners] == ["0.0.0.0", "0.0.0.0"]
    assert config.listeners.advertised_for("EXTERNAL").port == 9092


def test_empty_advertised_host_is_canonical_host_name() -> None:
    config = load_config(None, ["listeners=PLAINTEXT://:0"], {})
    assert config.listeners.advertised[0].host == socket.getfqdn()


@pytest.mark.parametrize(("overrides", "needles"), [
    (["advertised.listeners=PLAINTEXT://0.0.0.0:9092"],
     ["advertised.listeners", "0.0.0.0", "non-routable"]),
    (["listeners=PLAINTEXT://:9092,PLAINTEXT://:9093"], ["listeners", "different name"]),
    (["listeners=A://:9092,B://:9092", "listener.security.protocol.map=A:PLAINTEXT,B:PLAINTEXT",
      "inter.broker.listener.name=A"], ["listeners", "different port", "9092"]),
    (["listeners=BOB://:9092"], ["listeners", "BOB", "listener.security.protocol.map",
                                 "BOB:PLAINTEXT"]),
    (["listeners=SSL://:9093"], ["SSL", "not support"]),
    (["listeners=PLAINTEXT://localhost"], ["listeners", "NAME://host:port"]),
    (["advertised.listeners=OTHER://h:1", "listener.security.protocol.map=OTHER:PLAINTEXT,"
      "PLAINTEXT:PLAINTEXT"], ["advertised.listeners", "OTHER", "subset"]),
    (["inter.broker.listener.name=NOPE"], ["inter.broker.listener.name", "NOPE"]),
    (["inter.broker.listener.name=PLAINTEXT", "security.inter.broker.protocol=PLAINTEXT"],
     ["inter.broker.listener.name", "security.inter.broker.protocol"]),
    (["listener.security.protocol.map=PLAINTEXT"], ["listener.security.protocol.map",
                                                    "NAME:PROTOCOL"]),
])
def test_invalid_listener_configs(overrides: list[str], needles: list[str]) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(None, overrides, {})
    for needle in needles:
        assert needle in str(err.value), str(err.value)


def test_advertised_may_share_ports() -> None:
    config = load_config(None, [
        "listeners=A://:9092,B://:9093",
        "advertised.listeners=A://h1:9092,B://h2:9092",
        "listener.security.protocol.map=A:PLAINTEXT,B:PLAINTEXT",
        "inter.broker.listener.name=A",
    ], {})
    assert [e.port for e in config.listeners.advertised] == [9092, 9092]
