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
  dropped it from the ISR (after records both have, acks=all, and before records only the
  leader gets, acks=1), and whose only ISR member is then killed, stays offline (leader -1)
  while ``unclean.leader.election.enable`` is false: a producer's delivery fails, a
  consumer's offsets query fails and a consumer assigned to it reads nothing. Setting it to
  true on the topic (IncrementalAlterConfigs through a broker that is not the controller)
  elects the out-of-sync replica (``leader_recovery_state`` RECOVERING in its state znode)
  and the loss is logged: the controller names the partition, the new leader where its log
  ends (the first offset lost) and the last high watermark it had heard of. The partition
  serves again: produce, and a consumer reads the acks=all records and the new one, none of
  the lost. The old leader, restarted, truncates and logs the exact range it drops, then
  rejoins the ISR (RECOVERED). The same with the key set as the controller's dynamic broker
  config.

The first test sends a leader's AlterPartition itself; the leaders' ISR managers run too
(their own shrink and expand are tests/cluster/test_isr_lag.py's subject).
"""

from __future__ import annotations

import asyncio
import functools
import re
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


ACKED = 5  # records on both replicas (acks=all) before the follower is frozen
FETCH_WAIT_MS = 200  # replica.fetch.wait.max.ms
LOST = 3  # records on the leader alone (acks=1) when it is killed


def consumer(bootstrap: str) -> Any:
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4().hex[:6]}",
                     "enable.auto.commit": False, "auto.offset.reset": "earliest"})


def read_values(bootstrap: str, topic: str, count: int, timeout: float = 30) -> list[str]:
    """Partition 0's values from offset 0, by a confluent-kafka consumer, until ``count`` are
    read (then 1 s more, for any extra) or ``timeout`` passes."""
    from confluent_kafka import TopicPartition

    reader = consumer(bootstrap)
    reader.assign([TopicPartition(topic, 0, 0)])
    values: list[str] = []
    deadline, settle = time.monotonic() + timeout, None
    try:
        while time.monotonic() < (settle or deadline):
            for msg in reader.consume(100, 0.5):
                if msg.error() is None:
                    values.append(msg.value().decode())
            if len(values) >= count and settle is None:
                settle = time.monotonic() + 1
    finally:
        reader.close()
    return values


def assert_consumers_get_nothing(bootstrap: str, topic: str) -> str:
    """A confluent-kafka consumer of the offline partition: asking for its offsets fails
    (ListOffsets has no leader to go to), and a consumer assigned to it reads nothing.
    Returns the error's name."""
    from confluent_kafka import KafkaException, TopicPartition

    reader = consumer(bootstrap)
    try:
        with pytest.raises(KafkaException) as failed:
            reader.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)
        reader.assign([TopicPartition(topic, 0, 0)])
        got = [m for m in reader.consume(100, 5.0) if m.error() is None]
        assert got == [], [m.value() for m in got]
    finally:
        reader.close()
    return str(failed.value.args[0].name())


@pytest.mark.parametrize("level", ["topic", "broker"])
def test_unclean_election_keeps_a_partition_offline_until_enabled(
        cluster_factory: ClusterFactory, level: str) -> None:
    """Issue 13: ISR empty and unclean=false give errors to producers and consumers;
    unclean=true elects, serves (produce and consume), and logs the loss: the controller
    names the partition, the new leader where its log ends and the last high watermark it
    had heard of, and the old leader, restarted, the exact range it drops."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    cluster = cluster_factory(3, settings={"replica.lag.time.max.ms": "3000",
                                           "replica.fetch.wait.max.ms": str(FETCH_WAIT_MS)})
    controller = cluster.wait_controller(60)
    leader, other = [b for b in sorted(cluster.brokers) if b != controller]
    topic = f"unclean-{uuid.uuid4().hex[:6]}"
    create_topic(cluster.bootstrap(), topic, [[leader, other]])
    both = sorted([leader, other])
    wait_until(lambda: sorted(partition_znode(cluster, topic)[0]["isr"]) == both, 60,
               "partition state with both replicas in sync")
    acked = [f"acked-{i}" for i in range(ACKED)]
    delivered: list[Any] = []
    producer = Producer({"bootstrap.servers": cluster.broker(leader).address(), "acks": "all"})
    for value in acked:
        producer.produce(topic, value.encode(), partition=0,
                         on_delivery=lambda err, msg: delivered.append((err, msg.offset())))
    producer.flush(30)
    assert delivered == [(None, i) for i in range(ACKED)], delivered
    time.sleep(1.5)  # the follower's next fetch tells it the high watermark, ACKED
    # The follower is frozen while the leader takes records (acks=1) it never gets: the
    # leader drops it from the ISR (or the controller does, once its session ends). Its fetch
    # parked on the leader when it froze must be answered (empty, after
    # replica.fetch.wait.max.ms) first: the records would wake it and wait in the frozen
    # follower's socket, to be appended when it resumes.
    cluster.sigstop(other)
    time.sleep(10 * FETCH_WAIT_MS / 1000)
    try:
        acks: list[Any] = []
        producer = Producer({"bootstrap.servers": cluster.broker(leader).address(),
                             "acks": "1"})
        for i in range(LOST):
            producer.produce(topic, f"only on the leader {i}".encode(), partition=0,
                             on_delivery=lambda err, _msg: acks.append(err))
        producer.flush(30)
        assert acks == [None] * LOST, acks
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
    assert errors and errors[0] is not None, errors  # the producer gets an error
    consumer_error = assert_consumers_get_nothing(via, topic)  # and so do consumers

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
    assert (state["leader"], state["isr"], state.get("leader_recovery_state")) == (
        other, [other], 1)  # KIP-704: RECOVERING until the ISR changes
    wait_until(lambda: leader_and_isr(via, topic)[:2] == (other, [other]), 60,
               "Metadata showing the new leader")
    log = cluster.broker(cluster.wait_controller(60)).log_text()
    assert f"Unclean leader election of {topic}-0" in log
    # The new leader: the offset its log ends at (where the loss starts) and the last high
    # watermark it heard of (the acks=all records, all of which it has).
    warning = wait_until(lambda: re.search(
        rf"WARN.*Unclean leader election of {topic}-0: broker {other} leads it .*"
        rf"Its log ends at offset (\d+); the last high watermark it had learned from the "
        rf"previous leader is (\d+)\. Records the previous leader had from offset (\d+) on "
        rf"are lost", cluster.broker(other).log_text()), 30, "the new leader's warning")
    log_end, heard, lost_from = map(int, warning.groups())
    assert log_end == lost_from == ACKED and heard <= ACKED, warning[0]

    # It serves: produce, and consumers read what it has (not what only the old leader had).
    delivered = []
    producer = Producer({"bootstrap.servers": via, "message.timeout.ms": 30000})
    producer.produce(topic, b"after", partition=0,
                     on_delivery=lambda err, msg: delivered.append((err, msg.offset())))
    producer.flush(60)
    assert delivered == [(None, ACKED)], delivered
    assert read_values(via, topic, ACKED + 1) == [*acked, "after"]

    # The old leader, back, truncates what the new one lacks and says which offsets those are.
    cluster.restart(leader)
    truncated = wait_until(lambda: re.search(
        rf"WARN.*truncated {topic}-0 from (\d+) to (\d+) \(.*\): offsets (\d+)\.\.(\d+) are "
        rf"not the leader's", cluster.broker(leader).log_text()), 60, "the old leader's truncation")
    assert tuple(map(int, truncated.groups())) == (
        ACKED + LOST, ACKED, ACKED, ACKED + LOST - 1), truncated[0]
    wait_until(lambda: sorted(partition_znode(cluster, topic)[0]["isr"]) == both, 60,
               "the old leader back in the ISR")
    assert partition_znode(cluster, topic)[0].get("leader_recovery_state") is None
    print(f"offline: the consumer's offsets query failed with {consumer_error}; "
          f"{warning[0]}; {truncated[0]}")
