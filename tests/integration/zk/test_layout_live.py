"""Kafka's ZooKeeper layout written and read through kazoo on a real ZooKeeper — standalone and
a 3-node ensemble: an ephemeral broker registration, a conditional write refused on a stale
version, a controller fenced by /controller_epoch's version in one multi-op, a client that
outlives the ensemble leader, and zkCli.sh seeing what an operator expects."""

from __future__ import annotations

import asyncio
import time

import pytest
from kazoo.client import KazooClient, TransactionRequest
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.retry import KazooRetry

from moldau.broker.zk import layout
from moldau.broker.zk.aio import AsyncZooKeeper, TransactionFailed
from moldau.broker.zk.election import try_elect
from moldau.broker.zk.layout import (
    BrokerRegistration,
    ClusterId,
    ControllerRegistration,
    Endpoint,
    PartitionState,
    TopicAssignment,
)
from moldau.testing.zookeeper import ZooKeeperEnsemble, zkcli

REGISTRATION = BrokerRegistration(
    1, (Endpoint("PLAINTEXT", "127.0.0.1", 19092, "PLAINTEXT"),
        Endpoint("TEXT", "127.0.0.1", 19093, "PLAINTEXT")), rack="r1")


def _client(hosts: str, **kwargs: object) -> KazooClient:
    client = KazooClient(hosts=hosts, timeout=10.0, **kwargs)
    client.start(30)
    return client


def _close(*clients: KazooClient) -> None:
    for client in clients:
        client.stop()
        client.close()


def _bootstrap(client: KazooClient) -> None:
    """What a Kafka broker does first: the persistent paths, then the cluster id."""
    for path in layout.PERSISTENT_PATHS:
        client.ensure_path(path)
    try:
        client.create(layout.CLUSTER_ID, ClusterId("zIe91t8eRW-4e_je0Yarbw").to_json(),
                      makepath=True)
    except NodeExistsError:
        pass


def _exercise_layout(connect: str, chroot: str, server: str) -> None:
    root = _client(connect.split("/")[0])
    root.ensure_path(chroot)
    _close(root)
    admin, broker = _client(connect), _client(connect)
    try:
        _bootstrap(admin)
        assert ClusterId.from_json(admin.get(layout.CLUSTER_ID)[0]).id == "zIe91t8eRW-4e_je0Yarbw"

        # the broker's registration is ephemeral: it lives as long as the broker's session
        broker.create(layout.broker_path(1), REGISTRATION.to_json(), ephemeral=True)
        data, stat = admin.get(layout.broker_path(1))
        assert BrokerRegistration.from_json(data, 1) == REGISTRATION
        assert stat.ephemeralOwner == broker.client_id[0]
        # a second broker with the same id is refused (Kafka: "already registered")
        with pytest.raises(NodeExistsError):
            admin.create(layout.broker_path(1), REGISTRATION.to_json(), ephemeral=True)

        # an operator's habits: zkCli.sh sees the layout under the chroot
        listed = zkcli(f"{server}{chroot}", "ls", layout.BROKER_IDS)
        assert listed.returncode == 0, listed.stderr
        assert listed.stdout.strip().splitlines()[-1] == "[1]"
        shown = zkcli(f"{server}{chroot}", "get", layout.broker_path(1))
        assert '"endpoints":["PLAINTEXT://127.0.0.1:19092","TEXT://127.0.0.1:19093"]' \
            in shown.stdout

        # topic assignment and partition state, written as Kafka writes them
        assignment = TopicAssignment.of({0: [1], 1: [1]})
        admin.create(layout.topic_path("orders"), assignment.to_json())
        state = PartitionState(leader=1, leader_epoch=0, isr=(1,), controller_epoch=1)
        admin.create(layout.partition_state_path("orders", 0), state.to_json(), makepath=True)
        assert TopicAssignment.from_json(admin.get(layout.topic_path("orders"))[0],
                                         "orders") == assignment

        # a conditional write with a stale znode version is refused and changes nothing
        path = layout.partition_state_path("orders", 0)
        _, stat = admin.get(path)
        bumped = PartitionState(1, 1, (1,), 1)
        admin.set(path, bumped.to_json(), version=stat.version)
        with pytest.raises(BadVersionError):
            admin.set(path, PartitionState(1, 99, (1,), 1).to_json(), version=stat.version)
        assert PartitionState.from_json(admin.get(path)[0], "orders", 0) == bumped

        # the registration disappears with the broker's session
        _close(broker)
        assert admin.exists(layout.broker_path(1)) is None
        assert admin.get_children(layout.BROKER_IDS) == []
    finally:
        _close(admin)
        if broker.connected:
            _close(broker)


def test_layout_on_a_standalone_server(zookeeper: ZooKeeperEnsemble, zookeeper_connect: str,
                                       zookeeper_chroot: str) -> None:
    _exercise_layout(zookeeper_connect, zookeeper_chroot, zookeeper.nodes[0].address)


def test_layout_on_an_ensemble(zookeeper_ensemble: ZooKeeperEnsemble,
                               zookeeper_chroot: str) -> None:
    follower = next(n for n in zookeeper_ensemble.nodes if n.mode() == "follower")
    _exercise_layout(zookeeper_ensemble.connect(zookeeper_chroot), zookeeper_chroot,
                     follower.address)


def test_a_deposed_controller_cannot_write(kazoo_client: KazooClient,
                                           zookeeper_connect: str) -> None:
    """The fencing primitive of issue 12: every controller write is one multi-op that first
    checks /controller_epoch's version; a controller replaced meanwhile has all of it refused."""
    _bootstrap(kazoo_client)
    state_0 = layout.partition_state_path("orders", 0)
    state_1 = layout.partition_state_path("orders", 1)
    kazoo_client.create(state_0, PartitionState(1, 0, (1, 2), 1).to_json(), makepath=True)
    kazoo_client.ensure_path(layout.partition_path("orders", 1))

    async def scenario() -> None:
        old, new = AsyncZooKeeper(zookeeper_connect), AsyncZooKeeper(zookeeper_connect)
        await old.start(30)
        await new.start(30)
        try:
            # Kafka's election (moldau.broker.zk.election): /controller (ephemeral) and
            # /controller_epoch + 1 in one multi-op conditional on the epoch's version
            won = await try_elect(old, 1)
            assert won == (1, 1)
            epoch, epoch_version = won
            _, stat = await old.get(state_0)

            def move_leader(txn: TransactionRequest) -> None:
                txn.set_data(state_0, PartitionState(2, 1, (2,), epoch).to_json(), stat.version)

            await old.fenced_commit(layout.CONTROLLER_EPOCH, epoch_version, move_leader)

            # broker 1's session is gone (or it paused): broker 2 is elected with epoch 2
            await old.delete(layout.CONTROLLER)
            assert await try_elect(new, 2) == (2, 2)

            _, stat = await old.get(state_0)

            def stale(txn: TransactionRequest) -> None:
                txn.set_data(state_0, PartitionState(1, 2, (1,), epoch).to_json(), stat.version)
                txn.create(state_1, PartitionState(1, 0, (1,), epoch).to_json())

            with pytest.raises(TransactionFailed) as info:
                await old.fenced_commit(layout.CONTROLLER_EPOCH, epoch_version, stale)
            assert isinstance(info.value.cause, BadVersionError)
            # nothing of it was applied: not the state change, not the new znode
            data, _ = await new.get(state_0)
            assert PartitionState.from_json(data, "orders", 0) == PartitionState(2, 1, (2,), 1)
            with pytest.raises(NoNodeError):
                await new.get(state_1)
            controller = ControllerRegistration.from_json((await new.get(layout.CONTROLLER))[0])
            assert controller.broker_id == 2
        finally:
            await old.stop()
            await new.stop()

    asyncio.run(scenario())


def test_the_client_carries_on_when_the_ensemble_leader_dies(
        zookeeper_ensemble: ZooKeeperEnsemble, zookeeper_chroot: str) -> None:
    ensemble = zookeeper_ensemble
    leader = ensemble.leader()
    others = [n for n in ensemble.nodes if n is not leader]
    # connected to the leader first, so its death takes this client's connection with it
    hosts = ",".join(n.address for n in [leader, *others]) + zookeeper_chroot
    setup = _client(ensemble.connect_string)
    setup.ensure_path(zookeeper_chroot)
    _close(setup)
    client = _client(hosts, randomize_hosts=False)
    try:
        _bootstrap(client)
        client.create(layout.broker_path(1), REGISTRATION.to_json(), ephemeral=True)
        session = client.client_id[0]
        # kazoo has no public "connected to" (its socket is private; a test may look)
        assert client._connection._socket.getpeername()[1] == leader.client_port

        ensemble.kill_node(leader)
        retry = KazooRetry(max_tries=-1, delay=0.1, max_delay=1, deadline=60)
        started = time.monotonic()
        stat = retry(client.set, layout.CLUSTER_ID, ClusterId("after-failover").to_json())
        failover_s = time.monotonic() - started
        print(f"write after leader kill -9 succeeded in {failover_s:.2f} s")
        assert stat.version == 1
        # the same session: the registration was never lost
        assert client.client_id[0] == session
        _, stat = client.get(layout.broker_path(1))
        assert stat.ephemeralOwner == session
        assert client._connection._socket.getpeername()[1] != leader.client_port
        # inside the 10 s session timeout, or the session (and registration) would be gone;
        # measured 0.4-0.9 s
        assert failover_s < 10, failover_s
        listed = zkcli(f"{others[0].address}{zookeeper_chroot}", "ls", layout.BROKER_IDS)
        assert listed.stdout.strip().splitlines()[-1] == "[1]"
    finally:
        _close(client)
