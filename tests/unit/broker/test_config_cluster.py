"""Cluster-mode keys: zookeeper.connect and its siblings, KAFKA_ZOOKEEPER_CONNECT and
KAFKA_BROKER_ID as the seeds' Docker files set them, broker.id against node.id."""

from __future__ import annotations

import pytest

from moldau.broker.config import ConfigError, load_config
from moldau.broker.config.zookeeper import ZooKeeperConnect, parse_connect


def test_without_zookeeper_connect_the_node_is_single() -> None:
    config = load_config(None, [], {})
    assert config["zookeeper.connect"] is None and not config.cluster_mode
    assert config["zookeeper.session.timeout.ms"] == 18000
    assert config.zookeeper_connection_timeout_ms == 18000
    assert config["controlled.shutdown.enable"] is True
    assert config["controlled.shutdown.max.retries"] == 3
    assert config["controlled.shutdown.retry.backoff.ms"] == 5000


def test_seed_environment_turns_cluster_mode_on() -> None:
    # seed 003: -e KAFKA_BROKER_ID=1 -e KAFKA_ZOOKEEPER_CONNECT=zookeeper:2181
    config = load_config(None, [], {"KAFKA_BROKER_ID": "3",
                                    "KAFKA_ZOOKEEPER_CONNECT": "zookeeper:2181",
                                    "KAFKA_ZOOKEEPER_SESSION_TIMEOUT_MS": "6000"})
    assert config.cluster_mode and config.node_id == 3
    assert config.zookeeper == ZooKeeperConnect((("zookeeper", 2181),), "")
    assert config.zookeeper_connection_timeout_ms == 6000
    assert not config.unknown


def test_connection_timeout_defaults_to_the_session_timeout_unless_set() -> None:
    config = load_config(None, ["zookeeper.connect=zk:2181", "zookeeper.session.timeout.ms=9000",
                                "zookeeper.connection.timeout.ms=1500"], {})
    assert config.zookeeper_connection_timeout_ms == 1500


@pytest.mark.parametrize(("text", "servers", "chroot"), [
    ("zk1:2181,zk2:2182,zk3:2183/moldau", (("zk1", 2181), ("zk2", 2182), ("zk3", 2183)),
     "/moldau"),
    ("zk1", (("zk1", 2181),), ""),
    ("zk1:2181/", (("zk1", 2181),), ""),
    ("[::1]:2181,127.0.0.1:2181/a/b", (("::1", 2181), ("127.0.0.1", 2181)), "/a/b"),
])
def test_connect_strings_parse_as_zookeeper_reads_them(text, servers, chroot) -> None:
    parsed = parse_connect(text)
    assert parsed.servers == servers and parsed.chroot == chroot


@pytest.mark.parametrize(("text", "needle"), [
    ("zk1:21x81", "port '21x81'"),
    ("zk1:0", "port '0'"),
    ("zk1:2181,,zk2:2181", "empty"),
    ("zk1:2181/moldau/", "chroot '/moldau/'"),
    ("zk1:2181/a//b", "chroot '/a//b'"),
    ("zk1:2181/a/../b", "not a valid ZooKeeper path"),
    (":2181", "no host name"),
])
def test_bad_connect_strings_name_the_key_and_the_value(text, needle) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(None, [f"zookeeper.connect={text}"], {})
    message = str(err.value)
    assert "zookeeper.connect" in message and repr(text) in message and needle in message


def test_empty_zookeeper_connect_means_single_node() -> None:
    # KAFKA_ZOOKEEPER_CONNECT= (empty) in a compose file: as unset
    assert not load_config(None, [], {"KAFKA_ZOOKEEPER_CONNECT": ""}).cluster_mode


def test_broker_id_and_node_id_that_disagree_are_an_error_naming_both() -> None:
    with pytest.raises(ConfigError) as err:
        load_config(None, ["broker.id=2", "node.id=3"], {})
    assert "broker.id" in str(err.value) and "node.id (3)" in str(err.value)
    assert "2" in str(err.value)
    assert load_config(None, ["broker.id=2", "node.id=2"], {}).node_id == 2


def test_a_cluster_broker_configured_by_environment_claims_no_kraft_roles() -> None:
    # seed 003's brokers get only KAFKA_* variables: the embedded defaults' KRaft
    # process.roles must not leak into a ZooKeeper-mode broker (Kafka's have none: an empty
    # process.roles is what makes Kafka run with ZooKeeper)
    config = load_config(None, [], {"KAFKA_BROKER_ID": "2",
                                    "KAFKA_ZOOKEEPER_CONNECT": "zookeeper:2181"})
    assert config.cluster_mode and config["process.roles"] == []
    assert "process.roles" not in config.explicit
    by_override = load_config(None, ["zookeeper.connect=zk:2181", "broker.id=2"], {})
    assert by_override["process.roles"] == []


def test_a_cluster_broker_properties_file_without_roles_has_none(tmp_path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("broker.id=1\nzookeeper.connect=zk:2181/moldau\nlog.dirs=/tmp/x\n")
    assert load_config(path, [], {})["process.roles"] == []
    assert load_config(path, [], {"KAFKA_PROCESS_ROLES": ""})["process.roles"] == []


def test_the_single_node_keeps_both_roles(tmp_path) -> None:
    assert load_config(None, [], {})["process.roles"] == ["broker", "controller"]
    path = tmp_path / "server.properties"
    path.write_text("node.id=1\nlog.dirs=/tmp/x\n")
    assert load_config(path, [], {})["process.roles"] == ["broker", "controller"]


@pytest.mark.parametrize("how", ["override", "env", "file"])
def test_kraft_roles_with_zookeeper_connect_are_an_error_naming_both_keys(how, tmp_path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("broker.id=1\nzookeeper.connect=zk:2181\n"
                    + ("process.roles=broker\n" if how == "file" else ""))
    overrides = ["process.roles=broker"] if how == "override" else []
    environ = {"KAFKA_PROCESS_ROLES": "broker"} if how == "env" else {}
    with pytest.raises(ConfigError) as err:
        load_config(path, overrides, environ)
    message = str(err.value)
    assert "process.roles" in message and "'broker'" in message
    assert "zookeeper.connect" in message and "remove process.roles" in message
