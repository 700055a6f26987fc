"""Acceptance 3 of issue 12, first half: seed 001's own three-broker configuration.

    server0.properties  listeners = PLAINTEXT://localhost:9090
    server1.properties  listeners = PLAINTEXT://localhost:9091,TEXT://localhost:9099
                        listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,
                            SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,TEXT:PLAINTEXT
    server2.properties  listeners = PLAINTEXT://localhost:9090   (9092 here: two brokers on
                                                                    one machine cannot share)

with ports chosen free on 127.0.0.1 and the seed's broker ids 0, 1 and 2. A client
bootstrapping on server1's TEXT listener is told only of broker 1 ("localhost:9099 (id: 1
rack: null)", as the seed's debugger shows); one bootstrapping on PLAINTEXT, through any
broker, is told of all three.
"""

from __future__ import annotations

import pytest

from moldau.protocol import properties
from moldau.testing.cluster import BrokerCluster, BrokerSpec

from .clients import CLIENTS, require
from .conftest import ClusterFactory

SEED001_PROTOCOL_MAP = ("PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                        "SASL_SSL:SASL_SSL,TEXT:PLAINTEXT")


@pytest.fixture(scope="module", autouse=True)
def _clients_installed() -> None:
    require("kcat", "node")


@pytest.fixture
def seed001_cluster(cluster_factory: ClusterFactory) -> BrokerCluster:
    specs = [
        BrokerSpec(broker_id=0),
        BrokerSpec(broker_id=1, listeners={"PLAINTEXT": "PLAINTEXT", "TEXT": "PLAINTEXT"},
                   settings={"listener.security.protocol.map": SEED001_PROTOCOL_MAP}),
        BrokerSpec(broker_id=2),
    ]
    return cluster_factory(specs)


def test_seed001_text_listener_shows_only_broker_1_plaintext_shows_all(
        seed001_cluster: BrokerCluster) -> None:
    cluster = seed001_cluster
    written = properties.parse(cluster.broker(1).config_path.read_text())
    assert written["listener.security.protocol.map"] == SEED001_PROTOCOL_MAP
    text = cluster.broker(1).address("TEXT")
    all_plaintext = {i: node.address("PLAINTEXT") for i, node in cluster.brokers.items()}
    for name, client in CLIENTS.items():
        assert client(text) == {1: text}, f"{name} bootstrapping on TEXT"
        for broker_id in (0, 1, 2):
            seen = client(cluster.broker(broker_id).address("PLAINTEXT"))
            assert seen == all_plaintext, f"{name} on PLAINTEXT through broker {broker_id}"


def test_zookeeper_holds_every_listener_of_server1(seed001_cluster: BrokerCluster) -> None:
    """The registration carries all endpoints (filtering happens per request, as Kafka's
    ``brokers.flatMap(_.getNode(request.context.listenerName))`` the seed quotes)."""
    registration = seed001_cluster.registration(1)
    assert registration is not None
    node = seed001_cluster.broker(1)
    assert sorted(registration["endpoints"]) == sorted([
        f"PLAINTEXT://{node.address('PLAINTEXT')}", f"TEXT://{node.address('TEXT')}"])
    assert registration["listener_security_protocol_map"]["TEXT"] == "PLAINTEXT"
