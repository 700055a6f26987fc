"""Kafka's dynamic broker configs (issue 11, defect 13): every name Kafka's DynamicBrokerConfig
accepts is accepted, type-checked and described; Kafka's placement rules hold; unknown names
are still refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from moldau.broker.config import build_config
from moldau.broker.config.definitions import BROKER_BY_NAME
from moldau.broker.config.kafka_dynamic import (
    BROKER_DEFINITIONS,
    KAFKA_DYNAMIC_NAMES,
    KAFKA_ONLY,
    LISTENER_ONLY,
    PER_BROKER,
    broker_definition,
    is_dynamic,
)
from moldau.broker.metadata.configs import (
    APPLIED_BROKER_CONFIGS,
    DYNAMIC_BROKER_CONFIGS,
    broker_entries,
    broker_key_synonyms,
    validate_broker_changes,
)
from moldau.broker.metadata.image import MetadataImage
from moldau.broker.metadata.records import BROKER_RESOURCE, ConfigRecord
from moldau.protocol.config_source import ConfigSource
from moldau.protocol.errors import ErrorCode

# A sample of Kafka's DynamicBrokerConfig.AllDynamicConfigs, one or more per source set.
KAFKA_SAMPLE = [
    "sasl.kerberos.min.time.before.relogin", "sasl.enabled.mechanisms", "sasl.jaas.config",
    "ssl.keystore.location", "ssl.cipher.suites", "ssl.client.auth", "principal.builder.class",
    "listeners", "advertised.listeners", "listener.security.protocol.map",
    "log.cleaner.threads", "log.cleaner.io.buffer.load.factor", "log.cleaner.backoff.ms",
    "num.io.threads", "num.replica.fetchers", "background.threads", "num.network.threads",
    "num.recovery.threads.per.data.dir", "metric.reporters", "max.connections",
    "max.connections.per.ip.overrides", "max.connection.creation.rate",
    "producer.id.expiration.ms", "transaction.partition.verification.enable",
    "remote.fetch.max.wait.ms", "leader.replication.throttled.rate",
    "log.retention.ms", "message.max.bytes", "compression.zstd.level",
    "log.message.timestamp.after.max.ms", "log.local.retention.bytes",
]


def test_the_data_covers_kafkas_dynamic_broker_configs() -> None:
    assert set(KAFKA_SAMPLE) <= KAFKA_DYNAMIC_NAMES == DYNAMIC_BROKER_CONFIGS
    assert len(KAFKA_DYNAMIC_NAMES) == 93
    # Moldau's own definitions win; the rest is defined once, in kafka_dynamic.
    assert not set(KAFKA_ONLY) & set(BROKER_BY_NAME)
    assert not KAFKA_DYNAMIC_NAMES - set(BROKER_BY_NAME) - set(KAFKA_ONLY)
    # As in Kafka only the first synonym of a topic config is dynamic.
    assert {"log.retention.hours", "log.retention.minutes", "log.roll.hours", "log.dirs",
            "num.partitions", "node.id"}.isdisjoint(KAFKA_DYNAMIC_NAMES)
    assert APPLIED_BROKER_CONFIGS < DYNAMIC_BROKER_CONFIGS
    assert "sasl.kerberos.min.time.before.relogin" not in APPLIED_BROKER_CONFIGS


def test_definitions_carry_kafkas_types() -> None:
    relogin = broker_definition("sasl.kerberos.min.time.before.relogin")
    assert relogin is not None and (relogin.type, relogin.default) == ("long", 60000)
    assert broker_definition("ssl.keystore.password").type == "password"  # type: ignore[union-attr]
    prefixed = broker_definition("listener.name.internal.ssl.keystore.password")
    assert prefixed is not None and prefixed.type == "password"
    assert prefixed.name == "listener.name.internal.ssl.keystore.password"
    mechanism = broker_definition("listener.name.sasl_plaintext.plain.sasl.jaas.config")
    assert mechanism is not None and mechanism.type == "password"
    assert broker_definition("listener.name.x.max.connections").type == "int"  # type: ignore[union-attr]
    for name in ("listener.name.x.no.such.key", "listener.name.x.listeners", "no.such.key",
                 "listener.name.x.plain.sasl.unknown"):
        assert broker_definition(name) is None and not is_dynamic(name), name
    assert "listener.name.a.ssl.protocol" in BROKER_DEFINITIONS
    assert "made.up" not in BROKER_DEFINITIONS


@pytest.mark.parametrize(("resource", "changes"), [
    ("1", {"sasl.kerberos.min.time.before.relogin": "120000"}),
    ("1", {"listener.name.internal.ssl.keystore.location": "/ks.jks",
           "listener.name.internal.ssl.keystore.password": "secret"}),
    ("1", {"listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": "x required;"}),
    ("1", {"ssl.cipher.suites": "TLS_AES_128_GCM_SHA256", "listeners": "PLAINTEXT://:1"}),
    ("", {"max.connections": "100", "num.io.threads": "4", "metric.reporters": "a.B",
          "listener.name.internal.max.connections": "10", "log.cleaner.threads": "2"}),
    ("", {"sasl.kerberos.service.name": None}),  # deleting is always fine
    ("1", {"log.retention.ms": "1000"}),
])
def test_kafka_dynamic_names_are_accepted(resource: str, changes: dict[str, str | None]) -> None:
    assert validate_broker_changes(resource, changes) is None


@pytest.mark.parametrize(("resource", "changes", "message"), [
    ("1", {"made.up.name": "1"}, "Unknown broker config name(s): made.up.name"),
    ("1", {"listener.name.a.made.up": "1"}, "Unknown broker config name(s)"),
    ("1", {"log.dirs": "/x"}, "Cannot update these configs dynamically: log.dirs"),
    ("1", {"connections.max.reauth.ms": "1"}, "Unknown broker config name(s)"),
    ("1", {"sasl.kerberos.min.time.before.relogin": "soon"},
     "Invalid value 'soon' for configuration sasl.kerberos.min.time.before.relogin"),
    ("1", {"sasl.login.refresh.buffer.seconds": "40000"}, "must be between"),
    ("1", {"compression.gzip.level": "12"}, "must be between -1 and 9"),
    ("1", {"ssl.keystore.location": "/ks.jks"},
     "can be dynamically updated only per-listener using the listener prefix"),
    ("", {"sasl.kerberos.min.time.before.relogin": "1"},
     "Cannot update these configs at default cluster level, broker id must be specified: "
     "sasl.kerberos.min.time.before.relogin"),
    ("", {"listener.name.a.ssl.keystore.location": "/ks"},
     "Cannot update these configs at default cluster level"),
])
def test_kafkas_refusals(resource: str, changes: dict[str, str | None], message: str) -> None:
    problem = validate_broker_changes(resource, changes)
    assert problem is not None and problem[0] == ErrorCode.invalid_request
    assert message in problem[1]


def test_placement_sets_follow_kafka() -> None:
    assert "ssl.keystore.location" in LISTENER_ONLY and "ssl.protocol" not in LISTENER_ONLY
    assert {"sasl.jaas.config", "listeners", "ssl.protocol"} <= PER_BROKER
    assert PER_BROKER.isdisjoint({"max.connections", "num.network.threads",
                                  "max.connection.creation.rate", "num.io.threads"})


def test_described_with_kafkas_defaults_values_and_synonyms(tmp_path: Path) -> None:
    config = build_config({"node.id": "1", "log.dirs": str(tmp_path)})
    image = MetadataImage()
    for key, value in {"sasl.kerberos.min.time.before.relogin": "120000",
                       "listener.name.internal.ssl.keystore.password": "secret",
                       "listener.name.internal.ssl.protocol": "TLSv1.2"}.items():
        image.replay(ConfigRecord(BROKER_RESOURCE, "1", key, value))
    image.replay(ConfigRecord(BROKER_RESOURCE, "", "max.connections", "500"))
    entries = {e.name: e for e in broker_entries(image, config, "1")}
    relogin = entries["sasl.kerberos.min.time.before.relogin"]
    assert (relogin.value, relogin.source, relogin.read_only) == (
        "120000", ConfigSource.DYNAMIC_BROKER_CONFIG, False)
    kinit = entries["sasl.kerberos.kinit.cmd"]  # never set: Kafka's default
    assert (kinit.value, kinit.source) == ("/usr/bin/kinit", ConfigSource.DEFAULT_CONFIG)
    assert entries["max.connections"].value == "500"
    assert entries["max.connections"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    secret = entries["listener.name.internal.ssl.keystore.password"]
    assert secret.sensitive and secret.as_describe(True, False)["value"] is None
    protocol = entries["listener.name.internal.ssl.protocol"]
    assert [(s.name, s.value) for s in protocol.synonyms] == [
        ("listener.name.internal.ssl.protocol", "TLSv1.2"), ("ssl.protocol", "TLSv1.3")]
    assert entries["num.partitions"].read_only and not entries["num.io.threads"].read_only
    assert broker_key_synonyms("listener.name.a.plain.sasl.jaas.config") == (
        "listener.name.a.plain.sasl.jaas.config", "sasl.jaas.config")
    defaults = {e.name: e.value for e in broker_entries(image, config, "")}
    assert defaults == {"max.connections": "500"}


def test_list_operations_start_from_kafkas_defaults() -> None:
    from moldau.broker.metadata.validation import OP_APPEND, OP_SUBTRACT, apply_incremental

    assert apply_incremental({}, [("sasl.enabled.mechanisms", OP_APPEND, "PLAIN")],
                             BROKER_DEFINITIONS) == {"sasl.enabled.mechanisms": "GSSAPI,PLAIN"}
    assert apply_incremental({}, [("listener.name.a.ssl.enabled.protocols", OP_SUBTRACT,
                                   "TLSv1.2")], BROKER_DEFINITIONS) == {
        "listener.name.a.ssl.enabled.protocols": "TLSv1.3"}
    problem = apply_incremental({}, [("sasl.kerberos.min.time.before.relogin", OP_APPEND, "1")],
                                BROKER_DEFINITIONS)
    assert isinstance(problem, tuple) and problem[0] == ErrorCode.invalid_config
