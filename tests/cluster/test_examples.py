"""examples/cluster: the files a person copies to real machines must work as they are.

Every ``server-N.properties`` (and ``broker-1.env``, seed 003's Docker names) loads with
Moldau's own config loader with no unknown key, in cluster mode, with the listeners,
inter-broker listener, chroot and rack the README promises; ``zoo.cfg``, with only its host
names, ports and directories swapped for loopback ones, forms a real 3-node ensemble.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from moldau.broker.config import load_config
from moldau.devtools.zookeeper import ZooKeeperEnsemble, ZooKeeperNode
from moldau.protocol import properties

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "cluster"
SERVERS = sorted(EXAMPLES.glob("server-*.properties"))


def test_the_examples_are_there() -> None:
    assert [p.name for p in SERVERS] == [f"server-{n}.properties" for n in (1, 2, 3)]
    assert (EXAMPLES / "zoo.cfg").is_file()
    assert (EXAMPLES / "README.md").is_file()


@pytest.mark.parametrize("path", SERVERS, ids=lambda p: p.name)
def test_server_properties_load_with_no_unknown_key(path: Path) -> None:
    config = load_config(path, environ={})
    assert config.unknown == {}
    number = int(path.stem.split("-")[1])
    assert config.cluster_mode
    assert config["broker.id"] == number
    assert config.zookeeper.chroot == "/moldau"
    assert [host for host, _port in config.zookeeper.servers] == ["zk1", "zk2", "zk3"]
    assert config.listeners.inter_broker_listener == "INTERNAL"
    advertised = {e.name: f"{e.host}:{e.port}" for e in config.listeners.advertised}
    assert advertised == {"INTERNAL": f"broker{number}.internal:19092",
                          "EXTERNAL": f"broker{number}.example.com:9092"}
    assert config["broker.rack"] == f"rack-{'abc'[number - 1]}"


def test_the_three_servers_differ_only_in_id_names_and_rack() -> None:
    texts = [properties.parse(p.read_text()) for p in SERVERS]
    differing = {key for key in texts[0] if len({t.get(key) for t in texts}) > 1}
    assert differing == {"broker.id", "advertised.listeners", "broker.rack"}
    assert all(set(t) == set(texts[0]) for t in texts)


def test_the_env_file_is_server_1_in_docker_names() -> None:
    lines = (EXAMPLES / "broker-1.env").read_text().splitlines()
    env = dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))
    assert {"KAFKA_BROKER_ID", "KAFKA_ZOOKEEPER_CONNECT", "KAFKA_LISTENERS",
            "KAFKA_ADVERTISED_LISTENERS", "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"} <= set(env)
    from_env = load_config(None, environ=env)
    from_file = load_config(EXAMPLES / "server-1.properties", environ={})
    assert from_env.unknown == {}
    for key in ("broker.id", "zookeeper.connect", "listeners", "advertised.listeners",
                "listener.security.protocol.map", "inter.broker.listener.name",
                "broker.rack", "log.dirs", "offsets.topic.replication.factor"):
        assert from_env[key] == from_file[key], key
    # Kafka's replication factor of __consumer_offsets: offsets survive a coordinator's loss
    assert from_file["offsets.topic.replication.factor"] == 3


class _ExampleEnsemble(ZooKeeperEnsemble):
    """The example zoo.cfg as it is, but for the machine-specific values: each node's data
    directory, client port and address, and the server.N lines on loopback ports."""

    def _config_text(self, node: ZooKeeperNode) -> str:
        settings = properties.parse((EXAMPLES / "zoo.cfg").read_text())
        settings.update({
            "dataDir": str(node.data_dir),
            "dataLogDir": str(node.data_dir / "txlog"),
            "clientPort": str(node.client_port),
            "clientPortAddress": "127.0.0.1",
        })
        for peer in self.nodes:
            settings[f"server.{peer.server_id}"] = (
                f"127.0.0.1:{peer.quorum_port}:{peer.election_port}")
        return "".join(f"{key}={value}\n" for key, value in settings.items())


def test_zoo_cfg_forms_a_three_node_ensemble(tmp_path: Path) -> None:
    settings = properties.parse((EXAMPLES / "zoo.cfg").read_text())
    assert sorted(k for k in settings if k.startswith("server.")) == [
        "server.1", "server.2", "server.3"]
    assert int(settings["minSessionTimeout"]) <= 18000 <= int(settings["maxSessionTimeout"])
    with _ExampleEnsemble(3, tmp_path) as ensemble:
        assert sorted(node.mode() or "down" for node in ensemble.nodes) == [
            "follower", "follower", "leader"]
        config = ensemble.node(1).config_path.read_text()
        assert "tickTime=2000" in config and "autopurge.purgeInterval=24" in config
