"""Acceptance 3 of issue 12, second half: seed 001 as a cluster on two real networks.

Seed 001's lesson: a broker answers Metadata with the endpoints of the listener the request
arrived on, so a client sees every broker's endpoint on *its* listener and nothing else, and a
bootstrap list that mixes listeners makes the broker list change from one refresh to the
next. Here that runs on two networks built from lab namespaces (``topologies.two_networks``):

* a real ZooKeeper on the internal network (``zookeeper:2181``);
* three ``moldau serve`` brokers in cluster mode, each in its own namespace on both networks,
  with an ``INTERNAL`` listener (``kafkaN:9092``, also the inter-broker listener) and an
  ``EXTERNAL`` one (``kafkaN.example.net:9093``), each name resolvable only on its network;
* a client on each network: kcat and confluent-kafka see exactly the three endpoints of their
  listener, through whichever broker they bootstrap from, and produce and consume through
  them; records produced on one network are read on the other;
* an operator's machine on both networks: ``moldau doctor`` flags a bootstrap list mixing
  INTERNAL and EXTERNAL addresses (exit 1) and finds a list of one listener healthy (exit 0).

Everything runs in one lab (ZooKeeper and three brokers start once, in parallel).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from .brokers import LabBroker, start_broker
from .clients import (
    KcatMetadata,
    concurrently,
    confluent_roundtrip,
    doctor,
    kcat_consume,
    kcat_metadata,
    program,
)
from .lab import Lab, Netns, netlab
from .topologies import (
    EXTERNAL_PORT,
    INTERNAL_PORT,
    ZOOKEEPER_IP,
    TwoNetworks,
    external_ip,
    external_name,
    internal_ip,
    internal_name,
    two_networks,
)
from .zookeeper import LabZooKeeper

BROKER_IDS = (1, 2, 3)
CHROOT = "/seed001"
INTERNAL_VIEW = {i: f"{internal_name(i)}:{INTERNAL_PORT}" for i in BROKER_IDS}
EXTERNAL_VIEW = {i: f"{external_name(i)}:{EXTERNAL_PORT}" for i in BROKER_IDS}


def broker_properties(broker_id: int) -> dict[str, str]:
    """One broker's server.properties (docs/operations.md shows broker 1's)."""
    return {
        "broker.id": str(broker_id),
        "zookeeper.connect": f"zookeeper:2181{CHROOT}",
        "listeners": f"INTERNAL://{internal_ip(broker_id)}:{INTERNAL_PORT},"
                     f"EXTERNAL://{external_ip(broker_id)}:{EXTERNAL_PORT}",
        "advertised.listeners": f"INTERNAL://{internal_name(broker_id)}:{INTERNAL_PORT},"
                                f"EXTERNAL://{external_name(broker_id)}:{EXTERNAL_PORT}",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        # A killed broker of a failed run must not hold its id for Kafka's 18 s.
        "zookeeper.session.timeout.ms": "6000",
        # Three partitions, so a topic has a leader on every broker.
        "num.partitions": "3",
        "offsets.topic.num.partitions": "3",
    }


def start_cluster(lab: Lab, net: TwoNetworks) -> dict[int, LabBroker]:
    LabZooKeeper(lab, net.zookeeper, ZOOKEEPER_IP).start(timeout=90)
    started = concurrently(*(
        (lambda i=i: start_broker(lab, net.brokers[i], properties=broker_properties(i),
                                  name=f"broker{i}", timeout=120))
        for i in BROKER_IDS))
    brokers = dict(zip(BROKER_IDS, started, strict=True))
    assert len({b.cluster_id for b in brokers.values()}) == 1, "brokers in different clusters"
    for i, broker in brokers.items():
        assert broker.listeners == {"INTERNAL": (internal_ip(i), INTERNAL_PORT),
                                    "EXTERNAL": (external_ip(i), EXTERNAL_PORT)}
    return brokers


def wait_for(check: Callable[[], object], what: str, timeout: float = 60) -> None:
    """Until ``check`` returns without an AssertionError (each broker learns the others
    from ZooKeeper on its own schedule)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            check()
            return
        except AssertionError as exc:
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} within {timeout:.0f} s: {exc}") from exc
            time.sleep(0.5)


def kcat_view(ns: Netns, bootstrap: str) -> KcatMetadata:
    """``kcat -L`` via ``bootstrap``, asserting it was answered by the broker it names."""
    seen = kcat_metadata(ns, bootstrap)
    # kcat names the broker "host:port/id" once it knows the id, "host:port/bootstrap" before.
    assert seen.from_address.split("/")[0] == bootstrap, seen.output
    return seen


def confluent_view(ns: Netns, bootstrap: str) -> dict[int, str]:
    outcome = program(ns, "confluent-metadata", bootstrap, "-")
    assert outcome["ok"], outcome
    return {int(k): v for k, v in outcome["brokers"].items()}


def kcat_produce_to(ns: Netns, bootstrap: str, topic: str, partition: int,
                    value: str) -> None:
    result = ns.run(["kcat", "-b", bootstrap, "-P", "-t", topic, "-p", str(partition),
                     "-X", "message.timeout.ms=15000"], input=value + "\n", timeout=40)
    assert result.returncode == 0, (f"kcat -P -p {partition} via {bootstrap} in "
                                    f"{ns.role}:\n{result.stderr}")


_PARTITION = re.compile(r"partition (?P<p>\d+), leader (?P<leader>-?\d+)")


def leaders(ns: Netns, bootstrap: str, topic: str) -> dict[int, int]:
    result = ns.run(["kcat", "-b", bootstrap, "-L", "-t", topic, "-m", "5"], timeout=20)
    assert result.returncode == 0, result.stderr
    return {int(m["p"]): int(m["leader"]) for m in _PARTITION.finditer(result.stdout)}


@netlab
def test_seed001_two_networks_three_brokers() -> None:
    with Lab() as lab:
        net = two_networks(lab, BROKER_IDS)
        start_cluster(lab, net)
        inside, outside = net.internal_client, net.external_client
        int_boot, ext_boot = INTERNAL_VIEW[1], EXTERNAL_VIEW[2]

        def everyone_registered() -> None:
            for i in BROKER_IDS:
                assert dict(kcat_view(inside, INTERNAL_VIEW[i]).brokers) == INTERNAL_VIEW

        wait_for(everyone_registered, "every broker to tell of all three")

        # Each client sees exactly its listener's endpoints of all three brokers, through
        # whichever broker it asks.
        views = concurrently(
            *(lambda i=i: kcat_view(inside, INTERNAL_VIEW[i]) for i in BROKER_IDS),
            *(lambda i=i: kcat_view(outside, EXTERNAL_VIEW[i]) for i in BROKER_IDS),
            lambda: confluent_view(inside, int_boot),
            lambda: confluent_view(outside, ext_boot))
        for i, seen in zip(BROKER_IDS, views[:3], strict=True):
            assert (seen.from_broker, dict(seen.brokers)) == (i, INTERNAL_VIEW), seen.output
        for i, seen in zip(BROKER_IDS, views[3:6], strict=True):
            assert (seen.from_broker, dict(seen.brokers)) == (i, EXTERNAL_VIEW), seen.output
        assert views[6] == INTERNAL_VIEW
        assert views[7] == EXTERNAL_VIEW

        # The networks really are apart: the external client has no route to an INTERNAL
        # address and no name for it.
        direct = outside.run(["kcat", "-b", f"{internal_ip(1)}:{INTERNAL_PORT}", "-L",
                              "-m", "3"], timeout=20)
        assert direct.returncode != 0 and "Network is unreachable" in direct.stderr, (
            direct.stderr)
        named = outside.run(["kcat", "-b", INTERNAL_VIEW[1], "-L", "-m", "3"], timeout=20)
        assert named.returncode != 0 and "Failed to resolve" in named.stderr, named.stderr

        # A topic with a leader on every broker: one record per partition produced on the
        # internal network, all read back on the external one.
        produced = [f"internal-p{p}" for p in range(3)]
        for p, value in enumerate(produced):
            kcat_produce_to(inside, int_boot, "across", p, value)
        assert sorted(leaders(outside, ext_boot, "across").values()) == list(BROKER_IDS)
        assert sorted(kcat_consume(outside, ext_boot, "across", 3)) == produced

        # Admin requests work through any broker: a topic auto-created through each broker's
        # EXTERNAL listener. The brokers that are not the controller forward the creation to
        # it over INTERNAL (inter.broker.listener.name); they could not over EXTERNAL, whose
        # names their hosts files leave out.
        for i in BROKER_IDS:
            def created(i: int = i) -> None:
                seen = leaders(outside, EXTERNAL_VIEW[i], f"created-via-{i}")
                assert sorted(seen.values()) == list(BROKER_IDS), seen

            wait_for(created, f"a topic auto-created through broker {i}", timeout=30)

        # confluent-kafka produces and consumes in a group on each network (FindCoordinator
        # answers on the listener asked, too); then each network reads the other's records.
        concurrently(lambda: confluent_roundtrip(inside, int_boot, "from-internal",
                                                 any_order=True),
                     lambda: confluent_roundtrip(outside, ext_boot, "from-external",
                                                 any_order=True))
        crossed = concurrently(
            lambda: kcat_consume(outside, ext_boot, "from-internal", 3),
            lambda: kcat_consume(inside, int_boot, "from-external", 3))
        assert sorted(crossed[0]) == [f"from-internal-{i}" for i in range(3)]
        assert sorted(crossed[1]) == [f"from-external-{i}" for i in range(3)]

        # The operator's machine reaches both networks: doctor flags a mixed list.
        ops = net.ops
        mixed = f"{INTERNAL_VIEW[1]},{EXTERNAL_VIEW[2]}"
        status, text, data = doctor(ops, mixed, text=True)
        assert status == 1, text
        by_code = {f["code"]: f for f in data["findings"]}
        assert set(by_code) == {"mixed-listeners"}, text
        message = by_code["mixed-listeners"]["message"]
        assert f"{INTERNAL_VIEW[1]} (listener INTERNAL)" in message, message
        assert f"{EXTERNAL_VIEW[2]} (listener EXTERNAL)" in message, message
        # Each group names the broker list its listener advertises.
        for endpoint in (*INTERNAL_VIEW.values(), *EXTERNAL_VIEW.values()):
            assert endpoint in message, message
        fix = by_code["mixed-listeners"]["fixes"][0]["action"]
        assert fix in (f"--bootstrap-server {INTERNAL_VIEW[1]}",
                       f"--bootstrap-server {EXTERNAL_VIEW[2]}"), fix
        assert "different listeners" in text, text

        # Lists of one listener are healthy, from the operator's machine and from each
        # network's own client.
        healthy = concurrently(
            lambda: doctor(ops, ",".join(INTERNAL_VIEW.values())),
            lambda: doctor(ops, ",".join(EXTERNAL_VIEW.values())),
            lambda: doctor(inside, int_boot),
            lambda: doctor(outside, ext_boot))
        for status, text, data in healthy:
            assert status == 0 and data["findings"] == [], text
