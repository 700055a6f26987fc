"""``moldau doctor`` across lab networks (acceptance 3).

Unresolvable names are covered with seed 000 (test_seed000_docker, test_seed000_aws) and a
silently dropped address with seed 002 (test_seed002_nat); here: an address whose network
answers "host unreachable", a bootstrap list mixing listeners, and healthy setups.
"""

from __future__ import annotations

from .brokers import start_broker, start_seed000_broker
from .clients import concurrently, doctor
from .lab import Lab, netlab
from .topologies import HQ_BROKER_IP, NAT_BROKER_IP, docker_network, nat_network


@netlab
def test_unreachable_advertised_address() -> None:
    with Lab() as lab:
        net = nat_network(lab, reject=True)
        start_broker(lab, net.hq, properties={"node.id": "1",
                                              "listeners": f"PLAINTEXT://{HQ_BROKER_IP}:9092"})
        (status, text, data), (hq_status, hq_text, hq_data) = concurrently(
            lambda: doctor(net.branch, f"{NAT_BROKER_IP}:9092", text=True),
            lambda: doctor(net.hq_client, f"{HQ_BROKER_IP}:9092"))
        assert status == 1, text
        [finding] = data["findings"]
        assert finding["code"] == "unreachable"
        assert "no route" in finding["message"]
        assert data["checks"][0]["direct"]["outcome"] == "unreachable"
        assert "FAILED: no route to host" in text
        # Headquarters itself is healthy.
        assert hq_status == 0 and hq_data["findings"] == [], hq_text


@netlab
def test_bootstrap_list_mixing_listeners() -> None:
    with Lab() as lab:
        net = docker_network(lab)
        start_seed000_broker(lab, net)
        # A container lists both the internal port and the one meant for the host: BOB
        # advertises kafka0:29092, FRED localhost:9092 (the container's own loopback).
        status, text, data = doctor(net.client, "kafka0:29092,kafka0:9092", text=True)
        assert status == 1, text
        by_code = {f["code"]: f for f in data["findings"]}
        assert set(by_code) == {"mixed-listeners", "refused"}
        mixed = by_code["mixed-listeners"]
        assert "kafka0:29092 (listener LISTENER_BOB)" in mixed["message"]
        assert "kafka0:9092 (listener LISTENER_FRED)" in mixed["message"]
        assert mixed["fixes"][0]["action"] == "--bootstrap-server kafka0:29092"
        assert by_code["refused"]["subject"] == "broker 0 at localhost:9092"
        # The list the doctor recommends is healthy.
        status, text, data = doctor(net.client, "kafka0:29092")
        assert status == 0 and data["findings"] == [], text
