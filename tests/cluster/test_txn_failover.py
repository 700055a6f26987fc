"""Issue 14, acceptance 4: a transaction whose commit was acknowledged survives a kill -9 of its
coordinator's broker before the markers are written.

Three brokers on real ZooKeeper, ``__transaction_state`` with 3 replicas and
``min.insync.replicas`` 2. The transaction's coordinator C (leader of its
``__transaction_state`` partition), the data partitions' leader B and the controller K are
three different brokers. A confluent-kafka transactional producer writes to both data
partitions (each first batch verified by B with C: AddPartitionsToTxn verify_only, KIP-890),
then B is paused (SIGSTOP) so that no marker can land, and the producer commits: EndTxn is
answered once PrepareCommit is in the ``__transaction_state`` ISR. C is killed with kill -9
right away and B resumed. Once C's ZooKeeper session expires K leads the partition, loads
the PrepareCommit and writes the markers at its own coordinator epoch: the transaction ends
CompleteCommit (DescribeTransactions at the new coordinator) and a read_committed consumer
reads every record. No test hooks: only processes, signals and real clients.

The variant without the pause kills C as soon as EndTxn returns, markers possibly under way.
"""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from typing import Any

import pytest

from moldau.broker.group.partitioning import partition_for
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.testing.cluster import BrokerCluster
from moldau.testing.waiting import wait_for
from moldau.wire.connection import BrokerConnection

from .conftest import ClusterFactory

# ~40 s of three-broker clusters killed mid-commit: the slow suite (`make test` runs it
# after the default one).
pytestmark = pytest.mark.slow

TXN_PARTITIONS = 6
PER_PARTITION = 10
SETTINGS = {
    "transaction.state.log.num.partitions": str(TXN_PARTITIONS),
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    # A paused follower leaves the ISR quickly, so the commit is acknowledged soon; sessions
    # last longer than the pause (the paused leader stays the leader), and a killed
    # coordinator's session still ends in seconds.
    "replica.lag.time.max.ms": "2000",
    "zookeeper.session.timeout.ms": "12000",
}
wait_until = functools.partial(wait_for, interval=0.2)


def _ask(address: str, api_key: int, version: int, body: dict[str, Any]) -> Any:
    async def go() -> Any:
        host, port = address.rsplit(":", 1)
        conn = BrokerConnection(host, int(port), request_timeout_ms=30_000)
        await conn.connect()
        try:
            return await conn.request(api_key, body, version=version)
        finally:
            conn.close()

    return asyncio.run(go())


def describe_transaction(cluster: BrokerCluster, broker_id: int, txn_id: str) -> Any:
    answer = _ask(cluster.broker(broker_id).address(), ApiKey.DESCRIBE_TRANSACTIONS, 0,
                  {"transactional_ids": [txn_id]})
    [state] = answer.transaction_states
    return state


class Scenario:
    """The cluster, the transaction's coordinator C, the data leader B, the controller K."""

    def __init__(self, cluster_factory: ClusterFactory) -> None:
        from confluent_kafka import Producer

        self.cluster: BrokerCluster = cluster_factory(3, settings=SETTINGS)
        self.controller = self.cluster.wait_controller(60)
        bootstrap = self.cluster.bootstrap()
        # __transaction_state comes with the first transactional producer.
        warm = Producer({"bootstrap.servers": bootstrap, "transactional.id": "warm-up"})
        warm.init_transactions(90)
        wait_until(lambda: len(self.cluster.leaders("__transaction_state")) == TXN_PARTITIONS,
                   60, "__transaction_state led")
        leaders = self.cluster.leaders("__transaction_state")
        self.txn_id = next(
            name for name in (f"failover-{uuid.uuid4().hex[:6]}-{n}" for n in range(10_000))
            if leaders[partition_for(name, TXN_PARTITIONS)] != self.controller)
        self.txn_partition = partition_for(self.txn_id, TXN_PARTITIONS)
        self.coordinator = leaders[self.txn_partition]
        [self.leader] = [b for b in self.cluster.brokers
                         if b not in (self.controller, self.coordinator)]
        wait_until(lambda: len(self._txn_state().get("isr", [])) == 3, 60,
                   f"__transaction_state-{self.txn_partition} ISR of 3")
        self.topic = f"txn-failover-{uuid.uuid4().hex[:6]}"
        self._create_topic()

    def _txn_state(self) -> dict[str, Any]:
        return self.cluster.partition_state("__transaction_state", self.txn_partition) or {}

    def _create_topic(self) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        b, k, c = self.leader, self.controller, self.coordinator
        client = AdminClient({"bootstrap.servers": self.cluster.bootstrap()})
        new = NewTopic(self.topic, num_partitions=2, replica_assignment=[[b, k, c], [b, c, k]])
        client.create_topics([new], operation_timeout=30)[self.topic].result(60)
        wait_until(lambda: self.cluster.leaders(self.topic) == {0: b, 1: b}, 30,
                   f"{self.topic} led by broker {b}")

    def producer(self) -> Any:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.cluster.bootstrap(),
                             "transactional.id": self.txn_id,
                             "transaction.timeout.ms": 120_000})
        producer.init_transactions(90)
        return producer

    def send(self, producer: Any) -> set[str]:
        producer.begin_transaction()
        values = set()
        for p in (0, 1):
            for i in range(PER_PARTITION):
                value = f"{p}-{i}"
                producer.produce(self.topic, value.encode(), partition=p)
                values.add(value)
        assert producer.flush(60) == 0
        return values

    def new_coordinator(self) -> int:
        """Once the killed coordinator's session is gone: the partition's new leader."""
        self.cluster.wait_unregistered(self.coordinator, self.cluster.session_timeout_s + 30)
        state = wait_until(
            lambda: (lambda s: s if s.get("leader", -1) not in (-1, self.coordinator)
                     else None)(self._txn_state()), 60,
            f"a new leader of __transaction_state-{self.txn_partition}")
        return int(state["leader"])

    def read_committed(self, want: set[str], timeout: float) -> list[str]:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        survivors = [b for b in self.cluster.brokers if b != self.coordinator]
        consumer = Consumer({"bootstrap.servers": self.cluster.bootstrap(ids=survivors),
                             "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                             "isolation.level": "read_committed",
                             "enable.auto.commit": False})
        seen: list[str] = []
        try:
            consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in (0, 1)])
            deadline = time.monotonic() + timeout
            while not want <= set(seen) and time.monotonic() < deadline:
                for msg in consumer.consume(100, timeout=0.5):
                    if msg.error() is None:
                        seen.append(msg.value().decode())
        finally:
            consumer.close()
        return seen


@pytest.mark.parametrize("pause_leader", [True, False], ids=["leader-paused", "kill-at-once"])
def test_commit_survives_a_kill_of_the_coordinator(cluster_factory: ClusterFactory,
                                                   pause_leader: bool) -> None:
    s = Scenario(cluster_factory)
    producer = s.producer()
    values = s.send(producer)
    if pause_leader:
        s.cluster.sigstop(s.leader)
    try:
        producer.commit_transaction(60)  # EndTxn answered: PrepareCommit is in the ISR
        if pause_leader:
            # No marker could land on the paused leader: the commit is still being prepared.
            state = describe_transaction(s.cluster, s.coordinator, s.txn_id)
            assert (state.error_code, state.transaction_state) == (
                ErrorCode.none, "PrepareCommit"), state
        s.cluster.kill9(s.coordinator)
    finally:
        if pause_leader:
            s.cluster.sigcont(s.leader)
    new = s.new_coordinator()
    assert new != s.coordinator

    def completed() -> Any:
        try:
            state = describe_transaction(s.cluster, new, s.txn_id)
        except Exception:
            return None
        return state if state.transaction_state == "CompleteCommit" else None

    state = wait_until(completed, 120, f"CompleteCommit of {s.txn_id} at broker {new}")
    assert state.error_code == ErrorCode.none
    seen = s.read_committed(values, 90)
    assert sorted(seen) == sorted(values)  # every record, once
