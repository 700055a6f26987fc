"""``moldau metadata`` and ``moldau doctor`` on a real cluster (issue 12): the controller,
every broker on every listener (ZooKeeper registrations), offline partitions.

Real ``moldau serve`` brokers against the session's real ZooKeeper; the tools run as the
``moldau`` command in a child process, as a user runs them. A broker killed with kill -9
keeps its ZooKeeper session until ``zookeeper.session.timeout.ms`` (6 s in tests), then the
controller takes leadership away from it: with replication factor 1 its partitions have no
leader (offline) until it is started again.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from moldau.testing.cluster import BrokerCluster, BrokerSpec, seed003_specs

from .conftest import ClusterFactory

TIMEOUT = 90


def tool(*args: str) -> subprocess.CompletedProcess[str]:
    """Run ``moldau ARGS`` to completion."""
    return subprocess.run([sys.executable, "-m", "moldau", *args], capture_output=True,
                          text=True, timeout=TIMEOUT, check=False)


def metadata_json(bootstrap: str, *more: str) -> dict[str, Any]:
    result = tool("metadata", "-b", bootstrap, "--json", "--cluster", *more)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def doctor(bootstrap: str, *more: str) -> tuple[int, dict[str, Any]]:
    result = tool("doctor", "-b", bootstrap, "--json", "--timeout", "5", *more)
    assert result.returncode in (0, 1), result.stdout + result.stderr
    return result.returncode, json.loads(result.stdout)


def wait_until(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what} after {timeout} s"
        time.sleep(0.5)


def create_topic(bootstrap: str, topic: str, assignment: list[list[int]]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    client = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, num_partitions=len(assignment), replica_assignment=assignment)
    client.create_topics([new], operation_timeout=30)[topic].result(60)


def partitions_of(meta: dict[str, Any], topic: str) -> dict[int, dict[str, Any]]:
    entry = next((t for t in meta["topics"] if t["topic"] == topic), None)
    return {p["partition"]: p for p in entry["partitions"]} if entry else {}


def test_a_healthy_cluster_then_a_killed_broker_then_restarted(
        cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(seed003_specs(3), style="env")
    controller = cluster.wait_controller(60)
    victim = next(i for i in sorted(cluster.brokers) if i != controller)
    survivor = controller
    bootstrap = cluster.broker(survivor).address("PLAINTEXT")
    zk = cluster.zookeeper_connect
    topic = f"tools-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, [[1], [2], [3], [1], [2], [3]])
    victims = sorted(p for p, r in enumerate([1, 2, 3, 1, 2, 3]) if r == victim)
    wait_until(lambda: len(partitions_of(metadata_json(bootstrap), topic)) == 6, 30,
               f"{topic} in metadata")

    # -- healthy: 3 brokers, the controller, every listener of every broker -------------------
    meta = metadata_json(bootstrap, "--zookeeper", zk)
    assert sorted(b["id"] for b in meta["brokers"]) == [1, 2, 3]
    assert meta["controller"] == controller == meta["controllerid"]
    assert meta["clusterid"] and meta["clusterid"] == meta["zookeeper"]["clusterid"]
    assert meta["offline_partition_count"] == 0 and meta["offline_partitions"] == []
    for broker in meta["brokers"]:
        node = cluster.broker(broker["id"])
        assert broker["name"] == node.address("PLAINTEXT")
        assert sorted(broker["listeners"]) == sorted([
            f"CONNECTIONS_FROM_HOST://{node.address('CONNECTIONS_FROM_HOST')}",
            f"PLAINTEXT://{node.address('PLAINTEXT')}"])
    text = tool("metadata", "-b", bootstrap, "--zookeeper", zk, "-t", topic)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[1] == f" cluster id: {meta['clusterid']}, controller: broker {controller}"
    assert f"  broker {controller} at {bootstrap} (controller)" in lines
    assert lines[-1] == " 0 offline partitions (no leader)"
    assert "OFFLINE" not in text.stdout

    status, report = doctor(bootstrap, "--zookeeper", zk)
    assert status == 0, report["findings"]
    assert report["findings"] == []
    assert report["cluster"]["active_controller"] == controller
    assert report["cluster"]["registered"] == [1, 2, 3]
    assert report["cluster"]["reachable"] == [1, 2, 3]
    assert report["cluster"]["offline_partitions"] == []

    # -- kill -9 one broker: once its session expires its partitions have no leader ----------
    cluster.kill9(victim)
    cluster.wait_unregistered(victim, cluster.session_timeout_s + 30)

    def offline_now() -> dict[str, Any] | None:
        meta = metadata_json(bootstrap, "-t", topic)
        return meta if meta["offline_partition_count"] == len(victims) else None

    meta = wait_until(offline_now, 60, f"partitions of broker {victim} offline")
    assert sorted(b["id"] for b in meta["brokers"]) == sorted(set(cluster.brokers) - {victim})
    assert meta["offline_partitions"] == [{"topic": topic, "partition": p} for p in victims]
    for index, part in partitions_of(meta, topic).items():
        if index in victims:
            assert part["leader"] == -1 and part["offline"] is True
            assert part["error"] == "Broker: Leader not available"
            assert part["offline_replicas"] == [{"id": victim}]
        else:
            assert part["leader"] != -1 and part["offline"] is False
            assert part["offline_replicas"] == []
    # every offline partition of the cluster (__consumer_offsets too) is one of the victim's
    everything = metadata_json(bootstrap)
    assert {(o["topic"], o["partition"]) for o in everything["offline_partitions"]} >= {
        (topic, p) for p in victims}
    text = tool("metadata", "-b", bootstrap, "--cluster", "-t", topic)
    assert text.returncode == 0, text.stderr
    for p in victims:
        [line] = [ln for ln in text.stdout.splitlines()
                  if ln.startswith(f"    partition {p}, ")]
        assert line.startswith(f"    partition {p}, leader -1, replicas: {victim}, isrs: ")
        assert line.endswith(f", offline replicas: {victim}, Broker: Leader not available "
                             "(OFFLINE)"), line
    assert text.stdout.splitlines()[-1] == f" {len(victims)} offline partitions (no leader)"

    status, report = doctor(bootstrap, "--zookeeper", zk)
    assert status == 1
    [offline] = [f for f in report["findings"] if f["code"] == "offline-partitions"]
    assert offline["severity"] == "error"
    assert [fix["action"] for fix in offline["fixes"]] == [f"start broker {victim}"]
    assert f"{topic}/{victims[0]}" in offline["message"]
    assert report["cluster"]["registered"] == sorted(set(cluster.brokers) - {victim})
    assert set(report["cluster"]["offline_partitions"]) >= {f"{topic}/{p}" for p in victims}
    human = tool("doctor", "-b", bootstrap, "--timeout", "5")
    assert human.returncode == 1
    assert f"start broker {victim}" in human.stdout
    assert "offline (no leader): " in human.stdout and f"{topic}/{victims[0]}" in human.stdout

    # -- restart: healthy again ------------------------------------------------------------
    cluster.restart(victim)
    wait_until(lambda: metadata_json(bootstrap)["offline_partition_count"] == 0, 60,
               f"partitions of broker {victim} back")
    status, report = doctor(bootstrap, "--zookeeper", zk)
    assert status == 0, report["findings"]
    assert report["cluster"]["registered"] == [1, 2, 3]


def test_a_killed_broker_still_registered_is_named_to_start(
        cluster_factory: ClusterFactory) -> None:
    """Before its session expires a killed broker is still registered and listed, and its
    partitions still name it as leader: doctor finds its address refusing connections while
    the others answer, and says to start it first (not to change advertised.listeners)."""
    cluster = cluster_factory(3, settings={"zookeeper.session.timeout.ms": "120000"})
    controller = cluster.wait_controller(60)
    victim = next(i for i in sorted(cluster.brokers) if i != controller)
    bootstrap = cluster.broker(controller).address()
    cluster.kill9(victim)
    status, report = doctor(bootstrap, "--zookeeper", cluster.zookeeper_connect)
    assert victim in cluster.registered_ids()  # the session lives on: still registered
    assert status == 1
    [refused] = [f for f in report["findings"] if f["code"] == "refused"]
    assert refused["subject"] == f"broker {victim} at {cluster.broker(victim).address()}"
    assert refused["fixes"][0]["action"] == f"start broker {victim} if it is not running"
    assert report["cluster"]["registered"] == [1, 2, 3]
    assert report["cluster"]["reachable"] == sorted(set(cluster.brokers) - {victim})


def test_brokers_registered_without_the_bootstrap_listener(
        cluster_factory: ClusterFactory) -> None:
    """Seed 001: only broker 1 has the TEXT listener. Through TEXT a client sees broker 1
    alone; the registrations in ZooKeeper show the others, and doctor says why."""
    cluster: BrokerCluster = cluster_factory([
        BrokerSpec(broker_id=1, listeners={"PLAINTEXT": "PLAINTEXT", "TEXT": "PLAINTEXT"}),
        BrokerSpec(broker_id=2), BrokerSpec(broker_id=3)])
    text = cluster.broker(1).address("TEXT")
    zk = cluster.zookeeper_connect
    meta = metadata_json(text, "--zookeeper", zk)
    assert [b["id"] for b in meta["brokers"]] == [1]
    assert meta["controller"] == cluster.controller_id()  # /controller, whatever TEXT says
    assert sorted(b["id"] for b in meta["zookeeper"]["brokers"]) == [1, 2, 3]
    listing = tool("metadata", "-b", text, "--zookeeper", zk).stdout.splitlines()
    for broker_id in (2, 3):
        assert any(line.startswith(f"  broker {broker_id}") and "not on this listener" in line
                   for line in listing), listing
        assert (f"      listeners: PLAINTEXT://{cluster.broker(broker_id).address()}"
                in listing)
    status, report = doctor(text, "--zookeeper", zk)
    [hidden] = [f for f in report["findings"] if f["code"] == "missing-on-listener"]
    assert hidden["subject"] == "broker(s) 2, 3"
    assert "listener TEXT" in hidden["message"]
    assert status == 0  # a warning: broker 1 works for TEXT's clients
    # without --zookeeper the tool cannot know: nothing is claimed
    status, report = doctor(text)
    assert status == 0 and report["findings"] == []
    # a wrong chroot: the listing still comes, the error names the option and what to check
    wrong = zk.rpartition("/")[0] + "/no-such-chroot"
    result = tool("metadata", "-b", text, "--zookeeper", wrong)
    assert result.returncode == 1
    assert result.stdout.splitlines()[1:3] == [
        # ZooKeeper not read: the controller as Metadata reports it on TEXT, where the
        # active controller may have no endpoint (then the answering broker stands in)
        f" cluster id: {meta['clusterid']}, controller: broker {meta['controllerid']}",
        f" ZooKeeper not read: no /brokers/ids under {wrong}: no Kafka cluster registers "
        "there; check the chroot (the part after the last port, e.g. /moldau) against the "
        "brokers' zookeeper.connect"]
    assert result.stderr.strip().splitlines()[-1].startswith(
        f"moldau metadata: --zookeeper: no /brokers/ids under {wrong}"), result.stderr


def test_zookeeper_registrations_are_read_as_written(kazoo_client: Any,
                                                     zookeeper_connect: str) -> None:
    """The doctor's reader on znodes written by the broker's own encoder (real ZooKeeper)."""
    from moldau.broker.zk.layout import BrokerRegistration, ClusterId, ControllerRegistration
    from moldau.broker.zk.layout import Endpoint as ZkEndpoint
    from moldau.doctor import ListenerEntry, Registration
    from moldau.doctor.zookeeper import read_zookeeper

    kazoo_client.create("/cluster/id", ClusterId("abcdefghijklmnopqrstuv").to_json(),
                        makepath=True)
    kazoo_client.ensure_path("/brokers/ids")
    for broker_id, rack in ((2, None), (10, "r1")):
        registration = BrokerRegistration(broker_id, (
            ZkEndpoint("INTERNAL", f"kafka{broker_id}", 9092, "PLAINTEXT"),
            ZkEndpoint("EXTERNAL", "203.0.113.7", 19000 + broker_id, "PLAINTEXT")), rack=rack)
        kazoo_client.create(registration.path, registration.to_json(), ephemeral=True)
    zk = read_zookeeper(zookeeper_connect, 10)
    assert (zk.error, zk.cluster_id, zk.controller_id) == ("", "abcdefghijklmnopqrstuv", None)
    assert zk.registrations == (
        Registration(2, (ListenerEntry("INTERNAL", "kafka2", 9092),
                         ListenerEntry("EXTERNAL", "203.0.113.7", 19002))),
        Registration(10, (ListenerEntry("INTERNAL", "kafka10", 9092),
                          ListenerEntry("EXTERNAL", "203.0.113.7", 19010)), "r1"))
    kazoo_client.create("/controller", ControllerRegistration(10).to_json(), ephemeral=True)
    assert read_zookeeper(zookeeper_connect, 10).controller_id == 10


def test_zookeeper_errors_say_what_to_check(zookeeper: Any, zookeeper_chroot: str) -> None:
    from moldau.doctor.zookeeper import read_zookeeper
    from moldau.testing.processes import closed_port

    missing = read_zookeeper(zookeeper.connect(zookeeper_chroot), 10)
    assert missing.error.startswith(f"no /brokers/ids under {zookeeper.connect(zookeeper_chroot)}")
    assert "check the chroot" in missing.error
    with closed_port() as port:
        dead = f"127.0.0.1:{port}"
        started = time.monotonic()
        down = read_zookeeper(dead, 2)
        assert time.monotonic() - started < 30
    assert down.error == (f"cannot connect to ZooKeeper at {dead} within 2 s (--timeout): is "
                          "it running, and is the host:port list right?")
