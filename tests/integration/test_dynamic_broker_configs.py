"""Kafka's dynamic broker configs through real admin clients (issue 11, defect 13).

An outside Kafka test suite set ``sasl.kerberos.min.time.before.relogin`` on a broker and got
INVALID_REQUEST "Unknown broker config name(s)": Moldau accepted only the keys it applies.
Every name Kafka's DynamicBrokerConfig accepts is now stored, survives a restart and is
described; Kafka's refusals (listener-only store configs, per-broker configs at the cluster
default, unknown names) keep Kafka's answer. librdkafka and kafka-python cannot name the
cluster-default resource (""), so it is driven with raw requests.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from broker_wire import Wire
from confluent_kafka import KafkaError
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
)
from kafka.admin import ConfigResource as KafkaPythonResource
from kafka.admin import KafkaAdminClient

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.testing.runner import InProcessBroker

TIMEOUT = 30


@pytest.fixture(scope="module")
def broker() -> Iterator[InProcessBroker]:
    with InProcessBroker() as b:
        yield b


@pytest.fixture(scope="module")
def admin(broker: InProcessBroker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 2})


def incremental(admin: AdminClient, name: str, entries: dict[str, str | None]) -> Any:
    """IncrementalAlterConfigs SET (or DELETE for None) on broker ``name``: the error or None."""
    resource = ConfigResource("broker", name, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET if v is not None
                    else AlterConfigOpType.DELETE)
        for k, v in entries.items()])
    [future] = admin.incremental_alter_configs([resource]).values()
    try:
        future.result(TIMEOUT)
    except Exception as exc:  # the KafkaException carries the KafkaError
        return exc.args[0]
    return None


def described(admin: AdminClient, name: str = "1") -> dict[str, Any]:
    [future] = admin.describe_configs([ConfigResource("broker", name)]).values()
    return future.result(TIMEOUT)


def test_confluent_sets_and_describes_kafka_dynamic_configs(admin: AdminClient) -> None:
    assert incremental(admin, "1", {
        "sasl.kerberos.min.time.before.relogin": "120000",
        "listener.name.plaintext.ssl.keystore.password": "secret",
        "listener.name.plaintext.ssl.keystore.location": "/etc/ks.jks",
        "log.cleaner.threads": "2",
    }) is None
    configs = described(admin)
    relogin = configs["sasl.kerberos.min.time.before.relogin"]
    assert (relogin.value, relogin.source, relogin.is_read_only) == (
        "120000", ConfigSource.DYNAMIC_BROKER_CONFIG.value, False)
    assert configs["log.cleaner.threads"].value == "2"
    password = configs["listener.name.plaintext.ssl.keystore.password"]
    assert password.is_sensitive and password.value is None
    assert configs["listener.name.plaintext.ssl.keystore.location"].value == "/etc/ks.jks"
    # Unset Kafka keys are listed with Kafka's defaults, as Kafka lists them.
    kinit = configs["sasl.kerberos.kinit.cmd"]
    assert (kinit.value, kinit.source) == ("/usr/bin/kinit", ConfigSource.DEFAULT_CONFIG.value)
    # The legacy AlterConfigs replaces the broker's dynamic configs with the listed ones.
    [future] = admin.alter_configs([ConfigResource("broker", "1", set_config={
        "sasl.kerberos.ticket.renew.jitter": "0.1"})]).values()
    assert future.result(TIMEOUT) is None
    configs = described(admin)
    assert configs["sasl.kerberos.ticket.renew.jitter"].value == "0.1"
    assert configs["sasl.kerberos.min.time.before.relogin"].value == "60000"  # default again
    assert incremental(admin, "1", {"sasl.kerberos.ticket.renew.jitter": None}) is None


def test_confluent_gets_kafkas_refusals(admin: AdminClient) -> None:
    for entries, message in [
        ({"made.up.name": "1"}, "Unknown broker config name(s): made.up.name"),
        ({"ssl.keystore.location": "/ks"}, "only per-listener using the listener prefix"),
        ({"sasl.kerberos.min.time.before.relogin": "later"}, "Invalid value 'later'"),
        ({"log.dirs": "/elsewhere"}, "Cannot update these configs dynamically: log.dirs"),
    ]:
        error = incremental(admin, "1", entries)
        assert error is not None and error.code() == KafkaError.INVALID_REQUEST, entries
        assert message in error.str(), error.str()


def test_kafka_python_admin(broker: InProcessBroker) -> None:
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=20000)
    try:
        # alter_configs checks names against DescribeConfigs' dynamic keys before sending.
        for incremental_api in (True, False):
            value = f"/opt/kinit-{incremental_api}"
            result = client.alter_configs([KafkaPythonResource(
                "broker", "1", {"sasl.kerberos.kinit.cmd": value})], incremental=incremental_api)
            assert result == {"broker": {"1": "OK"}}
            entry = client.describe_configs(
                [KafkaPythonResource("broker", "1")])["broker"]["1"]["sasl.kerberos.kinit.cmd"]
            assert (entry["value"], entry["config_source"]) == (value, "DYNAMIC_BROKER_CONFIG")
    finally:
        client.close()


def cluster_default(wire: Wire, configs: dict[str, str]) -> dict[str, Any]:
    """IncrementalAlterConfigs SET on the cluster default (resource name "", which neither
    librdkafka nor kafka-python can name)."""
    got = wire.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"validate_only": False, "resources": [
        {"resource_type": 4, "resource_name": "", "configs": [
            {"name": k, "config_operation": 0, "value": v} for k, v in configs.items()]}]})
    return got["responses"][0]


def test_the_cluster_default_takes_cluster_level_keys_only(broker: InProcessBroker,
                                                           admin: AdminClient) -> None:
    with Wire(broker.broker.bound_port()) as wire:
        ok = cluster_default(wire, {"max.connections": "1000",
                                    "log.cleaner.io.max.bytes.per.second": "1e6"})
        assert ok["error_code"] == ErrorCode.none, ok
        refused = cluster_default(wire, {"sasl.kerberos.min.time.before.relogin": "1"})
        assert refused["error_code"] == ErrorCode.invalid_request
        assert refused["error_message"] == (
            "Cannot update these configs at default cluster level, broker id must be "
            "specified: sasl.kerberos.min.time.before.relogin")
    entry = described(admin)["max.connections"]
    assert (entry.value, entry.source) == ("1000",
                                           ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)


def test_stored_configs_survive_a_restart(tmp_path: Path) -> None:
    with InProcessBroker(tmp_path / "data") as first:
        admin = AdminClient({"bootstrap.servers": first.bootstrap, "log_level": 2})
        assert incremental(admin, "1", {"sasl.login.refresh.buffer.seconds": "200"}) is None
        with Wire(first.broker.bound_port()) as wire:
            assert cluster_default(wire, {"metric.reporters": "com.example.Reporter"})[
                "error_code"] == ErrorCode.none
    with InProcessBroker(tmp_path / "data") as again:
        admin = AdminClient({"bootstrap.servers": again.bootstrap, "log_level": 2})
        configs = described(admin)
        entry = configs["sasl.login.refresh.buffer.seconds"]
        assert (entry.value, entry.source) == ("200", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
        assert configs["metric.reporters"].value == "com.example.Reporter"
