"""Acceptance 1: seed 000's exact listener configuration, checked with ``kcat -L``.

The broker gets the docker-compose environment of seed 000 verbatim (``KAFKA_LISTENERS``,
``KAFKA_ADVERTISED_LISTENERS``, ``KAFKA_LISTENER_SECURITY_PROTOCOL_MAP``,
``KAFKA_INTER_BROKER_LISTENER_NAME``, ``KAFKA_BROKER_ID``, ``KAFKA_ZOOKEEPER_CONNECT``, with
a real ZooKeeper as the compose file's ``zookeeper`` service) and runs in the ``kafka0``
namespace; kcat runs in the kafkacat container's namespace, where ``kafka0`` resolves through
the test's own hosts file. Each port reports the broker at the address the seed shows.
"""

from __future__ import annotations

from .brokers import start_seed000_broker
from .clients import kcat_metadata
from .lab import Lab, netlab
from .topologies import docker_network


@netlab
def test_kcat_sees_each_listener_as_the_seed_shows() -> None:
    with Lab() as lab:
        net = docker_network(lab)
        broker = start_seed000_broker(lab, net)
        assert broker.listeners == {"LISTENER_BOB": ("kafka0", 29092),
                                    "LISTENER_FRED": ("kafka0", 9092),
                                    "LISTENER_ALICE": ("kafka0", 29094)}

        bob = kcat_metadata(net.client, "kafka0:29092")
        assert bob.brokers == [(0, "kafka0:29092")]
        # Seed: "Metadata for all topics (from broker 0: kafka0:29092/0)": the advertised
        # address is the bootstrap address, so kcat already knows it as broker 0.
        assert (bob.from_broker, bob.from_address) == (0, "kafka0:29092/0")

        fred = kcat_metadata(net.client, "kafka0:9092")
        assert fred.brokers == [(0, "localhost:9092")]
        assert (fred.from_broker, fred.from_address) == (-1, "kafka0:9092/bootstrap")

        alice = kcat_metadata(net.client, "kafka0:29094")
        assert alice.brokers == [(0, "never-gonna-give-you-up:29094")]
        assert (alice.from_broker, alice.from_address) == (-1, "kafka0:29094/bootstrap")
