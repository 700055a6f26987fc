"""Seed 002: a broker at headquarters behind NAT, a client in the branch.

The broker advertises its internal address ip1 (10.10.0.11); the branch may reach it only
as n_ip1 (203.0.113.11) through the NAT box, which drops every other connection into
headquarters. The branch bootstraps through n_ip1, is handed ip1, and every request after
bootstrap hangs — the seed's Flink job: "connection to node ... could not be established".
Then each of the three fixes makes unmodified (or moldau) clients work.
"""

from __future__ import annotations

import sys

from .brokers import start_broker, start_proxy
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
from .topologies import HQ_BROKER_IP, NAT_BROKER_IP, nat_network

INTERNAL = f"{HQ_BROKER_IP}:9092"
VIA_NAT = f"{NAT_BROKER_IP}:9092"
PLAIN_BROKER = {"node.id": "1", "listeners": f"PLAINTEXT://{INTERNAL}"}
ADDRESS_MAP = f"{HQ_BROKER_IP}={NAT_BROKER_IP}"


@netlab
def test_branch_bootstraps_through_nat_then_fails() -> None:
    with Lab() as lab:
        net = nat_network(lab)
        start_broker(lab, net.hq, properties=PLAIN_BROKER)
        kcat_roundtrip(net.hq_client, INTERNAL, "hq")  # headquarters itself is fine

        meta = kcat_metadata(net.branch, VIA_NAT)
        assert meta.brokers == [(1, INTERNAL)]
        # kcat, confluent-kafka, the moldau client and the doctor, side by side.
        produced, confluent, moldau, (status, text, data) = concurrently(
            lambda: kcat_produce(net.branch, VIA_NAT, "orders", ["x"], timeout_ms=3000),
            lambda: program(net.branch, "confluent", VIA_NAT, "orders-c", timeout=3),
            lambda: program(net.branch, "moldau", VIA_NAT, "orders-m", timeout=2),
            lambda: doctor(net.branch, VIA_NAT, timeout=2.0, text=True),
        )
        assert produced.returncode != 0, produced.stderr
        assert "Message timed out" in produced.stderr, produced.stderr
        assert not confluent["ok"] and confluent["produced"] == 0, confluent
        assert not moldau["ok"] and moldau["produced"] == 0
        assert any(INTERNAL in e for e in moldau["errors"]), moldau

        assert status == 1, text
        [finding] = data["findings"]
        assert finding["code"] == "timeout"
        assert f"broker 1 as {INTERNAL}" in finding["message"]
        fixes = {f["kind"]: f["action"] for f in finding["fixes"]}
        assert fixes["advertised.listeners"] == f"advertised.listeners=PLAINTEXT://{VIA_NAT}"
        assert fixes["address-map"] == f"--address-map {INTERNAL}={VIA_NAT}"
        assert fixes["proxy"] == (f"moldau proxy --bootstrap-server {VIA_NAT} "
                                  f"--address-map {INTERNAL}={VIA_NAT} --port-base 19090")
        assert "FAILED: timed out" in text


@netlab
def test_fix_a_an_extra_listener_advertising_the_nat_address() -> None:
    with Lab() as lab:
        net = nat_network(lab)
        start_broker(lab, net.hq, properties={
            "node.id": "1",
            "listeners": f"INTERNAL://{INTERNAL},NAT://{HQ_BROKER_IP}:19092",
            "advertised.listeners": f"INTERNAL://{INTERNAL},NAT://{NAT_BROKER_IP}:19092",
            "listener.security.protocol.map": "INTERNAL:PLAINTEXT,NAT:PLAINTEXT",
            "inter.broker.listener.name": "INTERNAL",
        })
        branch = f"{NAT_BROKER_IP}:19092"
        assert kcat_metadata(net.branch, branch).brokers == [(1, branch)]
        kcat_roundtrip(net.branch, branch, "fix-a")
        confluent_roundtrip(net.branch, branch, "fix-a-confluent")
        # Headquarters keeps using the internal listener and sees the same data.
        assert kcat_metadata(net.hq_client, INTERNAL).brokers == [(1, INTERNAL)]
        kcat_roundtrip(net.hq_client, INTERNAL, "fix-a-hq")
        status, text, data = doctor(net.branch, branch, timeout=2.0)
        assert status == 0 and data["findings"] == [], text


@netlab
def test_fix_b_broker_address_map_in_the_moldau_client() -> None:
    with Lab() as lab:
        net = nat_network(lab)
        start_broker(lab, net.hq, properties=PLAIN_BROKER)
        # The moldau client API with broker.address.map.
        outcome = program(net.branch, "moldau", VIA_NAT, "fix-b", address_map=ADDRESS_MAP)
        assert outcome["ok"], outcome
        # The moldau command-line tools with --address-map.
        cli = [sys.executable, "-m", "moldau.cli.main"]
        common = ["--bootstrap-server", VIA_NAT, "--address-map", ADDRESS_MAP,
                  "--timeout", "10"]
        created = net.branch.run([*cli, "topics", "--create", "--topic", "fix-b-cli",
                                  "--partitions", "1", *common])
        assert created.returncode == 0, created.stderr
        produced = net.branch.run([*cli, "produce", "--topic", "fix-b-cli", *common],
                                  input="one\ntwo\nthree\n")
        assert produced.returncode == 0, produced.stderr
        read = program(net.branch, "moldau-read", VIA_NAT, "fix-b-cli",
                       address_map=ADDRESS_MAP)
        assert read["ok"] and read["consumed"] == ["one", "two", "three"], read
        consumed = net.branch.run([*cli, "consume", "--topic", "fix-b-cli",
                                   "--from-beginning", "--max-messages", "3", *common])
        assert consumed.returncode == 0, consumed.stderr
        assert consumed.stdout.split() == ["one", "two", "three"]
        # The doctor, told about the map, passes with a warning for unmodified clients.
        status, text, data = doctor(net.branch, VIA_NAT, "--address-map", ADDRESS_MAP,
                                    timeout=2.0)
        assert status == 0, text
        assert [f["code"] for f in data["findings"]] == ["only-via-map"]


@netlab
def test_fix_c_moldau_proxy_in_the_branch_for_unmodified_clients() -> None:
    with Lab() as lab:
        net = nat_network(lab)
        start_broker(lab, net.hq, properties=PLAIN_BROKER)
        proxy = start_proxy(lab, net.branch, ["--bootstrap-server", VIA_NAT,
                                              "--address-map", ADDRESS_MAP,
                                              "--port-base", "19090"])
        # The bootstrap server is broker 1 (through the map): its port, base + node id.
        assert proxy.bootstrap == "127.0.0.1:19091"
        meta = kcat_metadata(net.branch, proxy.bootstrap)
        assert meta.brokers == [(1, "127.0.0.1:19091")]
        kcat_roundtrip(net.branch, proxy.bootstrap, "fix-c")
        confluent_roundtrip(net.branch, proxy.bootstrap, "fix-c-confluent")
        status, text, data = doctor(net.branch, proxy.bootstrap, timeout=2.0)
        assert status == 0 and data["findings"] == [], text
