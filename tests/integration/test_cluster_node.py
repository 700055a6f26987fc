"""A broker in cluster mode (``zookeeper.connect``) against a real ZooKeeper: the chroot and
``/cluster/id`` it creates, its registration in Kafka's JSON, and the start-up refusals
(unreachable ZooKeeper, duplicate broker id, another cluster's log dir), each naming the key,
the value and the fix; and fencing while its session is expired. Brokers are real
``moldau serve`` processes on free ports."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from broker_wire import Wire, make_batch, produce
from kazoo.client import KazooClient

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.testing.processes import closed_port
from moldau.testing.runner import BrokerProcess
from moldau.testing.waiting import wait_for
from moldau.testing.zookeeper import ZooKeeperEnsemble


@pytest.fixture
def root_zk(zookeeper: ZooKeeperEnsemble) -> Iterator[KazooClient]:
    client = KazooClient(hosts=zookeeper.connect_string, timeout=10.0)
    client.start(30)
    try:
        yield client
    finally:
        client.stop()
        client.close()


@pytest.fixture
def brokers(tmp_path: Path) -> Iterator[Callable[..., BrokerProcess]]:
    started: list[BrokerProcess] = []

    def make(node_id: int, connect: str, data: str | None = None, **settings: Any
             ) -> BrokerProcess:
        broker = BrokerProcess(tmp_path / (data or f"data-{node_id}-{len(started)}"),
                               settings={"zookeeper.connect": connect, **settings},
                               node_id=node_id)
        started.append(broker)
        return broker

    yield make
    for broker in started:
        if broker.proc is not None and broker.proc.poll() is None:
            os.kill(broker.proc.pid, signal.SIGCONT)
        broker.stop()
        broker.close()


def failed_start(broker: BrokerProcess, timeout: float = 60.0) -> str:
    """Start ``broker`` expecting it to refuse; its output."""
    with pytest.raises(RuntimeError, match="broker exited with 1") as err:
        broker.start(timeout)
    return str(err.value)


def test_broker_creates_chroot_cluster_id_and_registers_as_kafka_does(
        zookeeper_connect: str, zookeeper_chroot: str, root_zk: KazooClient,
        brokers: Callable[..., BrokerProcess]) -> None:
    assert root_zk.exists(zookeeper_chroot) is None
    broker = brokers(1, zookeeper_connect, **{"broker.rack": "rack-a"}).start(60)
    port = broker.port()

    data, _ = root_zk.get(f"{zookeeper_chroot}/cluster/id")
    cluster = json.loads(data)
    assert cluster["version"] == "1" and cluster["id"] == broker.cluster_id
    for path in ("/brokers/ids", "/brokers/topics", "/config/topics", "/config/brokers",
                 "/admin/delete_topics", "/isr_change_notification"):
        assert root_zk.exists(zookeeper_chroot + path) is not None, path

    data, stat = root_zk.get(f"{zookeeper_chroot}/brokers/ids/1")
    assert stat.ephemeralOwner != 0
    registration = json.loads(data)
    assert registration["version"] == 5
    assert registration["endpoints"] == [f"PLAINTEXT://127.0.0.1:{port}"]
    assert registration["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
    assert (registration["host"], registration["port"]) == ("127.0.0.1", port)
    assert registration["rack"] == "rack-a" and registration["jmx_port"] == -1
    assert registration["features"] == {} and int(registration["timestamp"]) > 0
    meta = (broker.data_dir / "meta.properties").read_text()
    assert f"cluster.id={broker.cluster_id}" in meta

    # A clean stop ends the session: the registration goes at once, the cluster id stays.
    assert broker.stop() == 0
    assert root_zk.exists(f"{zookeeper_chroot}/brokers/ids/1") is None
    assert root_zk.exists(f"{zookeeper_chroot}/cluster/id") is not None


def test_seed_environment_names_start_a_cluster_broker(
        zookeeper_connect: str, zookeeper_chroot: str, root_zk: KazooClient,
        tmp_path: Path) -> None:
    # seed 003: KAFKA_BROKER_ID and KAFKA_ZOOKEEPER_CONNECT, nothing else about the cluster
    broker = BrokerProcess(tmp_path / "data", env={"KAFKA_BROKER_ID": "7",
                                                   "KAFKA_ZOOKEEPER_CONNECT": zookeeper_connect})
    del broker.settings["node.id"]
    with broker:
        assert root_zk.exists(f"{zookeeper_chroot}/brokers/ids/7") is not None


def test_second_broker_reads_the_existing_cluster_id(
        zookeeper_connect: str, brokers: Callable[..., BrokerProcess]) -> None:
    first = brokers(1, zookeeper_connect).start(60)
    second = brokers(2, zookeeper_connect).start(60)
    assert first.cluster_id and second.cluster_id == first.cluster_id


def test_unreachable_zookeeper_stops_start_up_naming_the_key(
        brokers: Callable[..., BrokerProcess]) -> None:
    with closed_port() as port:
        connect = f"127.0.0.1:{port}/moldau"
        broker = brokers(1, connect, **{"zookeeper.connection.timeout.ms": 1500})
        began = time.monotonic()
        output = failed_start(broker)
        assert time.monotonic() - began < 50  # bounded by the timeout, not hanging
    assert "zookeeper.connect=" + connect in output
    assert "1500 ms (zookeeper.connection.timeout.ms)" in output
    assert "Check that ZooKeeper runs" in output
    assert "Traceback" not in output


def test_duplicate_broker_id_is_refused_while_the_other_lives(
        zookeeper_connect: str, brokers: Callable[..., BrokerProcess]) -> None:
    live = brokers(1, zookeeper_connect).start(60)
    output = failed_start(brokers(1, zookeeper_connect))
    assert (f"broker.id 1 is already registered by a live broker at "
            f"PLAINTEXT://127.0.0.1:{live.port()}") in output
    assert "choose another broker.id" in output and "or stop that broker" in output
    # the refused broker did not take the registration away
    with Wire(live.port()) as wire:
        answer = wire.call(ApiKey.METADATA, 12, {"topics": None,
                                                 "allow_auto_topic_creation": False,
                                                 "include_topic_authorized_operations": False})
        assert [b["node_id"] for b in answer["brokers"]] == [1]


def test_log_dir_of_another_cluster_is_refused_naming_both_ids(
        zookeeper_connect: str, zookeeper_chroot: str, root_zk: KazooClient,
        brokers: Callable[..., BrokerProcess], tmp_path: Path) -> None:
    first = brokers(1, zookeeper_connect, data="shared").start(60)
    first.stop()
    # The same log dir, pointed at another cluster (another chroot: a new cluster id).
    other = zookeeper_connect + "-other"
    output = failed_start(brokers(1, other, data="shared"))
    data, _ = root_zk.get(zookeeper_chroot + "-other/cluster/id")
    new_id = json.loads(data)["id"]
    assert f"The cluster id {new_id} in ZooKeeper (zookeeper.connect={other}" in output
    assert f"doesn't match the cluster id {first.cluster_id} stored in" in output
    assert str(tmp_path / "shared" / "meta.properties") in output
    assert "InconsistentClusterIdException" in output


def test_expired_session_fences_the_broker_until_it_registers_again(
        zookeeper_connect: str, zookeeper_chroot: str, root_zk: KazooClient,
        brokers: Callable[..., BrokerProcess]) -> None:
    broker = brokers(1, zookeeper_connect, **{"zookeeper.session.timeout.ms": 2000,
                                              "auto.create.topics.enable": True}).start(60)
    registration = f"{zookeeper_chroot}/brokers/ids/1"
    batch = make_batch([b"v"])

    def created_and_produced(wire: Wire) -> bool:
        # Auto-creation is refused until the broker's controller is active: ask again.
        wire.call(ApiKey.METADATA, 12, {"topics": [{"name": "fenced", "topic_id": None}],
                                        "allow_auto_topic_creation": True,
                                        "include_topic_authorized_operations": False})
        return produce(wire, "fenced", 0, batch)["error_code"] == ErrorCode.none

    with Wire(broker.port()) as wire:
        wait_for(lambda: created_and_produced(wire), 30, "the first produce")
    # Freeze the broker past its session timeout: ZooKeeper expires the session and deletes
    # the registration. Someone takes the id meanwhile, so the broker, once it runs again,
    # cannot register and must stay fenced.
    assert broker.proc is not None
    os.kill(broker.proc.pid, signal.SIGSTOP)
    try:
        wait_for(lambda: root_zk.exists(registration) is None, 30, "the session to expire")
        root_zk.create(registration, b"{}", ephemeral=True)
    finally:
        os.kill(broker.proc.pid, signal.SIGCONT)
    wait_for(lambda: "fenced: broker 1's ZooKeeper session expired" in broker.log_text(), 30,
             "the broker to say it is fenced")
    with Wire(broker.port()) as wire:
        answer = produce(wire, "fenced", 0, batch)
        assert answer["error_code"] == ErrorCode.not_leader_or_follower
        assert "Broker 1 is fenced" in (answer["error_message"] or "")
    wait_for(lambda: "broker.id 1 is already registered by a live broker" in broker.log_text(),
             30, "the broker to find its id taken")

    root_zk.delete(registration)
    wait_for(lambda: "registered broker 1 again" in broker.log_text(), 30,
             "the broker to register again")
    _, stat = root_zk.get(registration)
    assert stat.ephemeralOwner not in (0, root_zk.client_id[0])
    with Wire(broker.port()) as wire:
        assert produce(wire, "fenced", 0, batch)["error_code"] == ErrorCode.none


def test_a_broker_starts_and_serves_with_one_of_three_zookeeper_servers_down(
        zookeeper_ensemble: ZooKeeperEnsemble, zookeeper_chroot: str,
        brokers: Callable[..., BrokerProcess]) -> None:
    # zookeeper.connect names the whole ensemble; a majority is enough.
    zookeeper_ensemble.kill_node(zookeeper_ensemble.node(1))
    connect = zookeeper_ensemble.connect(zookeeper_chroot)
    broker = brokers(1, connect).start(90)
    client = KazooClient(hosts=connect, timeout=10.0)
    client.start(30)
    try:
        wait_for(lambda: client.exists("/brokers/ids/1") is not None, 30, "the registration")
        assert cluster_id_in(client) == broker.cluster_id
    finally:
        client.stop()
        client.close()


def cluster_id_in(client: KazooClient) -> str:
    return json.loads(client.get("/cluster/id")[0])["id"]
