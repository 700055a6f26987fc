"""Issue 14, §8 on the cluster: offsets sent to a transaction survive the kill -9 of their group
coordinator and become visible when the transaction commits afterwards.

Three brokers on real ZooKeeper. A confluent-kafka transactional producer (its transaction
coordinator on a surviving broker) sends a record and the group's offsets, so the offsets are
pending in ``__consumer_offsets`` (written with acks=all: every replica has them). The broker
leading the group's ``__consumer_offsets`` partition is kill -9'd; the new leader loads the
offsets back as pending (a ``require_stable`` fetch still answers UNSTABLE_OFFSET_COMMIT,
retried by the client). The producer then commits: the transaction coordinator's COMMIT marker
reaches the new group coordinator through WriteTxnMarkers, which replays it, and the offsets
are the group's.
"""

from __future__ import annotations

import uuid

from moldau.broker.group.partitioning import partition_for

from .conftest import ClusterFactory
from .group_scenario import Scenario, wait_until

TXN_PARTITIONS = 50  # transaction.state.log.num.partitions (Kafka's default)
TIMEOUT_S = 60


def _committed(scenario: Scenario, *, stable: bool, timeout_s: float) -> int | None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    level = "read_committed" if stable else "read_uncommitted"
    reader = Consumer({"bootstrap.servers": scenario.bootstrap, "group.id": scenario.group,
                       "enable.auto.commit": False, "isolation.level": level})
    try:
        found = reader.committed([TopicPartition(scenario.topic, 0)], timeout=timeout_s)
    except KafkaException:
        return None
    finally:
        reader.close()
    return None if found[0].error is not None else found[0].offset


def test_txn_offsets_survive_their_group_coordinator_and_commit_on_the_next(
        cluster_factory: ClusterFactory) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as CTP

    scenario = Scenario(cluster_factory, "txo")
    cluster = scenario.cluster
    # __transaction_state comes with the first transactional lookup.
    warm = Producer({"bootstrap.servers": scenario.bootstrap, "transactional.id": "warm"})
    warm.init_transactions(TIMEOUT_S)
    wait_until(lambda: len(cluster.leaders("__transaction_state")) == TXN_PARTITIONS, 60,
               "__transaction_state led")
    leaders = cluster.leaders("__transaction_state")
    tid = next(t for t in (f"txo-{uuid.uuid4().hex[:6]}-{n}" for n in range(10_000))
               if leaders[partition_for(t, TXN_PARTITIONS)] in scenario.survivors)

    producer = Producer({"bootstrap.servers": scenario.bootstrap, "transactional.id": tid,
                         "transaction.timeout.ms": 120_000, "linger.ms": 0})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(scenario.topic, b"v", key=b"k", partition=0)
    metadata = Consumer({"bootstrap.servers": scenario.bootstrap, "group.id": scenario.group})
    producer.send_offsets_to_transaction([CTP(scenario.topic, 0, 7)],
                                         metadata.consumer_group_metadata(), TIMEOUT_S)
    metadata.close()
    assert producer.flush(TIMEOUT_S) == 0

    new_leader = scenario.kill_coordinator()
    assert new_leader in scenario.survivors
    # Loaded back pending on the new coordinator: not visible, and not stable.
    assert wait_until(lambda: _committed(scenario, stable=False, timeout_s=10) == -1001
                      or None, 90, "a plain OffsetFetch from the new coordinator")
    assert _committed(scenario, stable=True, timeout_s=3) is None
    producer.commit_transaction(TIMEOUT_S)
    assert wait_until(lambda: _committed(scenario, stable=True, timeout_s=10) == 7 or None,
                      90, "the committed transaction's offset")

