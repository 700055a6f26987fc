"""ISR changes and unclean leader election on three real ``moldau serve`` brokers and a real
ZooKeeper, checked with a real client (confluent-kafka's Metadata: leader and ISR as every
broker answers them):

- an ISR change sent as a partition leader would (AlterPartition through the forwarding
  controller channel that a broker which is not the controller uses) is committed by the
  active controller; the leader's own ISR manager then re-adds the caught-up replica it
  removed, and every broker's Metadata shows that; a change with a stale partition epoch is
  refused (INVALID_UPDATE_VERSION) and the broker that is not the controller answers
  AlterPartition itself with NOT_CONTROLLER;
- a replication-factor-2 partition whose follower was frozen (SIGSTOP) until its leader
  dropped it from the ISR, and whose only ISR member is then killed, stays offline (leader -1,
  clients get errors) while ``unclean.leader.election.enable`` is false; setting it to true
  on the topic (IncrementalAlterConfigs through a broker that is not the controller) elects
  the out-of-sync replica, the controller logs a warning naming the partition, and produce
  works again. The same with the key set as the controller's dynamic broker config.

The first test sends a leader's AlterPartition itself; the leaders' ISR managers run too
(their own shrink and expand are tests/cluster/test_isr_lag.py's subject).
"""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from typing import Any

import pytest

from moldau.broker.metadata.forwarding import ForwardingControllerChannel
from moldau.broker.metadata.image import MetadataImage
from moldau.broker.metadata.isr_change import IsrChange, IsrChangeResult
from moldau.broker.metadata.records import (
    BrokerEndpoint,
    ControllerChangeRecord,
    RegisterBrokerRecord,
)
from moldau.broker.zk.layout import uuid_from_text
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.testing.cluster import BrokerCluster
from moldau.testing.waiting import wait_for
from moldau.wire.connection import BrokerConnection

from .conftest import ClusterFactory

UNCLEAN = "unclean.leader.election.enable"
wait_until = functools.partial(wait_for, interval=0.2)


def admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(bootstrap: str, topic: str, assignment: list[list[int]]) -> None:
    from confluent_kafka.admin import NewTopic

    client = admin(bootstrap)
    client.create_topics([NewTopic(topic, num_partitions=len(assignment),
                                   replica_assignment=assignment)],
                         operation_timeout=30)[topic].result(60)


def leader_and_isr(bootstrap: str, topic: str) -> tuple[int, list[int], int]:
    """(leader, ISR, error code) of partition 0 as one broker's Metadata answers it."""
    metadata = admin(bootstrap).list_topics(topic, timeout=30)
    p = metadata.topics[topic].partitions[0]
    return p.leader, list(p.isrs), p.error.code() if p.error is not None else 0


def partition_znode(cluster: BrokerCluster, topic: str) -> tuple[dict[str, Any], int]:
    """The state znode of partition 0 and its version (the partition epoch)."""
    import json

    data, stat = cluster.kazoo().get(f"/brokers/topics/{topic}/partitions/0/state")
    return json.loads(data), stat.version


def topic_id(cluster: BrokerCluster, topic: str) -> uuid.UUID:
    return uuid_from_text(cluster.read_json(f"/brokers/topics/{topic}")["topic_id"], topic)


def forward_isr_change(cluster: BrokerCluster, sender: int, change: IsrChange
                       ) -> IsrChangeResult:
    """Send ``change`` as broker ``sender`` does: through its forwarding channel to the
    controller ZooKeeper names."""
    controller = cluster.wait_controller(60)
    host, port = cluster.broker(controller).address().rsplit(":", 1)
    image = MetadataImage()
    image.replay(ControllerChangeRecord(controller, cluster.controller_epoch() or 0))
    image.replay(RegisterBrokerRecord(controller, uuid.uuid4(),
                                      [BrokerEndpoint("PLAINTEXT", host, int(port))]))

    async def send() -> IsrChangeResult:
        channel = ForwardingControllerChannel(node_id=sender, image=image,
                                              listener="PLAINTEXT")
        try:
            [result] = await channel.alter_partition(sender, [change])
            return result
        finally:
            channel.close()

    return asyncio.run(send())


def alter_partition_directly(address: str, sender: int, change: IsrChange) -> int:
    """The top-level error code a broker answers an AlterPartition with."""
    host, port = address.rsplit(":", 1)

    async def send() -> int:
        conn = BrokerConnection(host, int(port), client_id=f"broker-{sender}-to-controller")
        await conn.connect()
        try:
            answer = await conn.request(ApiKey.ALTER_PARTITION, {
                "broker_id": sender, "broker_epoch": -1, "topics": [
                    {"topic_id": change.topic_id, "partitions": [
                        {"partition_index": change.partition,
                         "leader_epoch": change.leader_epoch,
                         "partition_epoch": change.partition_epoch,
                         "leader_recovery_state": 0,
                         "new_isr_with_epochs": [{"broker_id": b, "broker_epoch": -1}
                                                 for b in change.new_isr]}]}]})
            return int(answer.error_code)
        finally:
            conn.close()

    return asyncio.run(send())


def test_alter_partition_is_committed_and_seen_by_every_broker(
        cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(3)
    controller = cluster.wait_controller(60)
    leader, follower = [b for b in sorted(cluster.brokers) if b != controller]
    topic = f"isr-{uuid.uuid4().hex[:6]}"
    create_topic(cluster.bootstrap(), topic, [[leader, follower, controller]])
    wait_until(lambda: cluster.partition_state(topic, 0) is not None, 60, "partition state")
    state, version = partition_znode(cluster, topic)
    assert (state["leader"], state["isr"], version) == (leader, [leader, follower, controller], 0)
    tid = topic_id(cluster, topic)

    shrink = IsrChange(tid, 0, state["leader_epoch"], version, (leader, follower))
    # A broker that is not the controller does not take it itself.
    assert alter_partition_directly(cluster.broker(follower).address(), leader, shrink) == \
        ErrorCode.not_controller
    result = forward_isr_change(cluster, leader, shrink)
    assert (result.error, result.leader, result.isr, result.partition_epoch) == (
        ErrorCode.none, leader, (leader, follower), 1)
    # The removed replica is caught up (nothing was written): the leader's ISR manager asks
    # for it back, on top of the committed change (partition epoch 2).
    full = [leader, follower, controller]
    wait_until(lambda: partition_znode(cluster, topic)[1] == 2, 60, "the ISR expanded again")
    state, version = partition_znode(cluster, topic)
    assert (state["isr"], version) == (full, 2)
    for broker in sorted(cluster.brokers):
        address = cluster.broker(broker).address()
        wait_until(lambda a=address: leader_and_isr(a, topic)[1] == full, 60,
                   f"broker {broker}'s Metadata showing ISR {full}")

    # A change from a partition epoch that is no longer current: refused, nothing written.
    stale = forward_isr_change(cluster, leader, IsrChange(tid, 0, state["leader_epoch"], 1,
                                                          (leader,)))
    assert stale.error == ErrorCode.invalid_update_version
    assert partition_znode(cluster, topic) == (state, 2)


@pytest.mark.parametrize("level", ["topic", "broker"])
def test_unclean_election_keeps_a_partition_offline_until_enabled(
        cluster_factory: ClusterFactory, level: str) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    cluster = cluster_factory(3, settings={"replica.lag.time.max.ms": "3000"})
    controller = cluster.wait_controller(60)
    leader, other = [b for b in sorted(cluster.brokers) if b != controller]
    topic = f"unclean-{uuid.uuid4().hex[:6]}"
    create_topic(cluster.bootstrap(), topic, [[leader, other]])
    wait_until(lambda: cluster.partition_state(topic, 0) is not None, 60, "partition state")
    # The follower is frozen while the leader takes records (acks=1) it never gets: the
    # leader drops it from the ISR (or the controller does, once its session ends).
    cluster.sigstop(other)
    try:
        acked: list[Any] = []
        producer = Producer({"bootstrap.servers": cluster.broker(leader).address(),
                             "acks": "1"})
        producer.produce(topic, b"only on the leader", partition=0,
                         on_delivery=lambda err, _msg: acked.append(err))
        producer.flush(30)
        assert acked == [None], acked
        wait_until(lambda: partition_znode(cluster, topic)[0]["isr"] == [leader], 60,
                   "ISR shrunk to the leader")
        # Killed before the follower resumes (it would catch up and rejoin).
        cluster.kill9(leader)
    finally:
        cluster.sigcont(other)
    via = cluster.broker(other).address()
    cluster.wait_unregistered(leader, cluster.session_timeout_s + 30)
    wait_until(lambda: cluster.leaders(topic).get(0) == -1, 60, "the partition offline")
    time.sleep(2)  # room for a wrong election to show up
    assert cluster.leaders(topic).get(0) == -1
    assert partition_znode(cluster, topic)[0]["isr"] == [leader]
    wait_until(lambda: leader_and_isr(via, topic)[0] == -1, 60, "Metadata showing no leader")
    assert leader_and_isr(via, topic)[2] == 5  # LEADER_NOT_AVAILABLE
    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": via, "message.timeout.ms": 3000})
    producer.produce(topic, b"while offline", partition=0,
                     on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(30)
    assert errors and errors[0] is not None, errors  # the client gets an error

    # unclean.leader.election.enable=true on the topic (or the controller), through a
    # broker that is not the controller: the controller elects the out-of-sync replica.
    entry = ConfigEntry(UNCLEAN, "true", incremental_operation=AlterConfigOpType.SET)
    # (confluent-kafka cannot name the cluster-wide default, "": the controller's own entry)
    resource = ConfigResource(level, topic if level == "topic" else str(controller),
                              incremental_configs=[entry])
    client = admin(via)  # kept: a dropped client ends its pending futures
    client.incremental_alter_configs([resource])[resource].result(60)
    wait_until(lambda: cluster.leaders(topic).get(0) == other, 60, "unclean election")
    state, _version = partition_znode(cluster, topic)
    assert (state["leader"], state["isr"]) == (other, [other])
    wait_until(lambda: leader_and_isr(via, topic)[:2] == (other, [other]), 60,
               "Metadata showing the new leader")
    log = cluster.broker(cluster.wait_controller(60)).log_text()
    assert f"Unclean leader election of {topic}-0" in log
    delivered: list[Any] = []
    producer = Producer({"bootstrap.servers": via, "message.timeout.ms": 30000})
    producer.produce(topic, b"after", partition=0,
                     on_delivery=lambda err, msg: delivered.append((err, msg.offset())))
    producer.flush(60)
    assert delivered and delivered[0][0] is None, delivered
