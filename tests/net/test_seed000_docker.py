"""Seed 000's Docker case: internal listener inside the network, forwarded port on the host.

Namespaces: ``host`` (the Docker host: bridge br0, port publishing by DNAT from
localhost), ``kafka0`` (the broker container, seed 000's environment verbatim) and
``kafkacat`` (a client container on the same Docker network).
"""

from __future__ import annotations

from .brokers import start_seed000_broker
from .clients import (
    concurrently,
    confluent_roundtrip,
    doctor,
    kcat_metadata,
    kcat_produce,
    kcat_roundtrip,
    program,
)
from .lab import Lab, netlab
from .topologies import docker_network


@netlab
def test_inside_and_host_clients_each_use_their_listener() -> None:
    with Lab() as lab:
        net = docker_network(lab)
        start_seed000_broker(lab, net)
        def inside() -> None:
            # A client container uses listener BOB: kafka0:29092, resolvable on the network.
            kcat_roundtrip(net.client, "kafka0:29092", "inside")
            confluent_roundtrip(net.client, "kafka0:29092", "inside-confluent")

        def on_host() -> None:
            # A client on the host uses the published port 9092, listener FRED, which
            # advertises localhost:9092: that is the host's own forwarded port again.
            assert kcat_metadata(net.host, "localhost:9092").brokers == [(0, "localhost:9092")]
            kcat_roundtrip(net.host, "localhost:9092", "host")
            confluent_roundtrip(net.host, "localhost:9092", "host-confluent")

        concurrently(inside, on_host)
        # Both sides see the same topics: the host reads what the container wrote.
        assert kcat_metadata(net.host, "localhost:9092").output.count('topic "inside"') == 1
        # The doctor agrees: healthy on both sides.
        for status, text, data in concurrently(
                lambda: doctor(net.client, "kafka0:29092"),
                lambda: doctor(net.host, "localhost:9092")):
            assert status == 0, text
            assert data["findings"] == [] and data["ok"] is True


@netlab
def test_host_client_on_the_internal_listener_fails_and_doctor_explains() -> None:
    with Lab() as lab:
        # The misconfiguration: the internal port 29092 is published too, and a client on
        # the host bootstraps through it.
        net = docker_network(lab, published=(9092, 29092, 29094))
        start_seed000_broker(lab, net)
        meta = kcat_metadata(net.host, "localhost:29092")
        assert meta.brokers == [(0, "kafka0:29092")]

        # Bootstrap works, everything after it fails, the way the seed shows.
        produced, outcome, (status, text, data) = concurrently(
            lambda: kcat_produce(net.host, "localhost:29092", "t", ["x"]),
            lambda: program(net.host, "confluent", "localhost:29092", "t2", timeout=4),
            lambda: doctor(net.host, "localhost:29092", text=True),
        )
        assert produced.returncode != 0
        assert "Failed to resolve 'kafka0:29092'" in produced.stderr, produced.stderr
        assert not outcome["ok"] and outcome["produced"] == 0
        assert any("Failed to resolve 'kafka0:29092'" in line
                   for line in outcome["logs"] + outcome["errors"]), outcome

        assert status == 1, text
        [finding] = data["findings"]
        assert finding["code"] == "unresolvable"
        assert "'kafka0' does not resolve" in finding["message"]
        assert "listener LISTENER_BOB" in finding["message"]
        fixes = {f["kind"]: f["action"] for f in finding["fixes"]}
        # The simplest fix, checked by the doctor: bootstrap through LISTENER_FRED.
        assert finding["fixes"][0]["action"] == "--bootstrap-server localhost:9092"
        assert fixes["advertised.listeners"] == (
            "advertised.listeners=LISTENER_BOB://localhost:29092,"
            "LISTENER_FRED://localhost:9092,LISTENER_ALICE://never-gonna-give-you-up:29094")
        assert fixes["address-map"] == "--address-map kafka0:29092=localhost:29092"
        assert "FAILED: cannot resolve 'kafka0'" in text

        # The fixes the doctor offers work from the host.
        _, mapped, (status, text, data) = concurrently(
            lambda: kcat_roundtrip(net.host, "localhost:9092", "fixed"),
            lambda: program(net.host, "moldau", "localhost:29092", "fixed-map",
                            address_map="kafka0:29092=localhost:29092"),
            lambda: doctor(net.host, "localhost:29092", "--address-map",
                           "kafka0:29092=localhost:29092"),
        )
        assert mapped["ok"], mapped
        assert status == 0, text
        assert [f["code"] for f in data["findings"]] == ["only-via-map"]


@netlab
def test_alice_listener_advertises_a_name_nobody_here_resolves() -> None:
    with Lab() as lab:
        net = docker_network(lab)
        start_seed000_broker(lab, net)
        assert kcat_metadata(net.host, "localhost:29094").brokers == [
            (0, "never-gonna-give-you-up:29094")]
        produced, (status, text, data) = concurrently(
            lambda: kcat_produce(net.host, "localhost:29094", "t", ["x"]),
            lambda: doctor(net.host, "localhost:29094"))
        assert produced.returncode != 0
        assert "Failed to resolve 'never-gonna-give-you-up:29094'" in produced.stderr
        assert status == 1, text
        assert [f["code"] for f in data["findings"]] == ["unresolvable"]
        # LISTENER_FRED's localhost:9092 works from the host: offered first.
        assert data["findings"][0]["fixes"][0]["action"] == "--bootstrap-server localhost:9092"
