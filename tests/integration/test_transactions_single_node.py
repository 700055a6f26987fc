"""Transactions on a single ``moldau serve`` through confluent-kafka (librdkafka): commit and
abort seen by read_committed and read_uncommitted consumers, fencing by a second producer with
the same ``transactional.id``, and a transaction whose producer went away aborted by the
coordinator after ``transaction.timeout.ms`` (design14 §11 tests 1 and 3, the single node).

One broker process for the module; the coordinator's timed-out-transaction check runs every
300 ms so the timeout test waits a few seconds only.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest
from broker_wire import Wire
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

import moldau.client.kio_fixes  # noqa: F401 - decodes DescribeTransactions' start time -1
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.testing.runner import BrokerProcess

RDKAFKA = logging.getLogger("rdkafka")
WAIT_S = 60.0


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    node = BrokerProcess(settings={
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": 300,
    })
    node.start()
    yield node
    node.stop()
    node.close()


def new_topic(broker: BrokerProcess, partitions: int = 2) -> str:
    name = f"txn-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "logger": RDKAFKA})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)
    return name


def producer(broker: BrokerProcess, txn_id: str, **extra: object) -> confluent_kafka.Producer:
    config = {"bootstrap.servers": broker.bootstrap, "logger": RDKAFKA,
              "transactional.id": txn_id, "linger.ms": 5, **extra}
    return confluent_kafka.Producer(config)


def consume_all(broker: BrokerProcess, topic: str, isolation: str, expected: int,
                partitions: int = 2) -> list[bytes]:
    """Every record value of ``topic`` a consumer with ``isolation`` reads, waiting until
    ``expected`` arrived (then a little longer, so extra records would show)."""
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": broker.bootstrap, "logger": RDKAFKA,
        "group.id": f"g-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "isolation.level": isolation})
    consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    deadline = time.monotonic() + WAIT_S
    settle_until = None
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None:
                assert msg.error() is None, msg.error()
                values.append(msg.value())
            if len(values) >= expected and settle_until is None:
                settle_until = time.monotonic() + 1.0
            if settle_until is not None and time.monotonic() > settle_until:
                break
    finally:
        consumer.close()
    return values


def send(p: confluent_kafka.Producer, topic: str, values: list[bytes]) -> None:
    for i, value in enumerate(values):
        p.produce(topic, value=value, partition=i % 2)


def test_commit_and_abort_read_committed_and_uncommitted(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    p = producer(broker, f"tx-{uuid.uuid4().hex[:6]}")
    p.init_transactions(30)
    committed = [b"c-%d" % i for i in range(10)]
    aborted = [b"a-%d" % i for i in range(6)]
    p.begin_transaction()
    send(p, topic, committed)
    p.commit_transaction(30)
    p.begin_transaction()
    send(p, topic, aborted)
    p.flush(30)
    p.abort_transaction(30)
    later = [b"l-%d" % i for i in range(4)]
    p.begin_transaction()
    send(p, topic, later)
    p.commit_transaction(30)

    seen = consume_all(broker, topic, "read_committed", len(committed) + len(later))
    assert sorted(seen) == sorted(committed + later)
    everything = consume_all(broker, topic, "read_uncommitted",
                             len(committed) + len(aborted) + len(later))
    assert sorted(everything) == sorted(committed + aborted + later)


def test_second_producer_fences_the_first(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    txn_id = f"fence-{uuid.uuid4().hex[:6]}"
    first = producer(broker, txn_id)
    first.init_transactions(30)
    first.begin_transaction()
    send(first, topic, [b"zombie-1"])
    first.flush(30)
    second = producer(broker, txn_id)
    second.init_transactions(30)          # aborts the first's open transaction
    second.begin_transaction()
    send(second, topic, [b"live-1", b"live-2"])
    second.commit_transaction(30)
    with pytest.raises(KafkaException) as info:
        first.produce(topic, value=b"zombie-2", partition=0)
        first.commit_transaction(30)
    error = info.value.args[0]
    assert error.fatal() or error.code() in (KafkaError._FENCED,
                                             KafkaError.PRODUCER_FENCED,
                                             KafkaError.INVALID_PRODUCER_EPOCH), error
    assert sorted(consume_all(broker, topic, "read_committed", 2)) == [b"live-1", b"live-2"]


def test_timed_out_transaction_is_aborted_by_the_coordinator(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    txn_id = f"slow-{uuid.uuid4().hex[:6]}"
    p = producer(broker, txn_id, **{"transaction.timeout.ms": 2000})
    p.init_transactions(30)
    p.begin_transaction()
    send(p, topic, [b"never-1", b"never-2"])
    p.flush(30)
    # The producer goes silent (as if killed): no EndTxn. The coordinator aborts it, and a
    # read_committed consumer, held at the open transaction, moves on to what follows.
    after = producer(broker, f"after-{uuid.uuid4().hex[:6]}")
    after.init_transactions(30)
    after.begin_transaction()
    send(after, topic, [b"after-1", b"after-2"])
    after.commit_transaction(30)
    seen = consume_all(broker, topic, "read_committed", 2)
    assert sorted(seen) == [b"after-1", b"after-2"]
    deadline = time.monotonic() + WAIT_S
    while (state := _txn_state(broker, txn_id)) != "CompleteAbort" \
            and time.monotonic() < deadline:
        time.sleep(0.1)
    assert state == "CompleteAbort"


def _txn_state(broker: BrokerProcess, txn_id: str) -> str:
    """The state DescribeTransactions reports (this broker is every id's coordinator)."""
    with Wire(broker.port()) as wire:
        answer = wire.call(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [txn_id]})
    [state] = answer["transaction_states"]
    assert state["error_code"] == 0, state
    return str(state["transaction_state"])


def _init(wire: Wire, version: int, txn_id: str, pid: int = -1, epoch: int = -1) -> dict:
    """InitProducerId, retried while the coordinator aborts an open transaction."""
    deadline = time.monotonic() + WAIT_S
    while True:
        answer = wire.call(ApiKey.INIT_PRODUCER_ID, version, {
            "transactional_id": txn_id, "transaction_timeout": 60000,
            "producer_id": pid, "producer_epoch": epoch})
        if answer["error_code"] != ErrorCode.concurrent_transactions \
                or time.monotonic() > deadline:
            return answer
        time.sleep(0.05)


def _codes(results: list[dict]) -> dict[tuple[str, int], int]:
    return {(topic["name"], part["partition_index"]): part["partition_error_code"]
            for topic in results for part in topic["results_by_partition"]}


def test_wire_answers_versions_and_admin(broker: BrokerProcess) -> None:
    """The APIs as the wire shows them: FindCoordinator key type 1, unknown partitions in
    AddPartitionsToTxn, v4 verification, ListTransactions / DescribeTransactions, and
    PRODUCER_FENCED sent as INVALID_PRODUCER_EPOCH to old versions."""
    topic = new_topic(broker)
    txn_id = f"wire-{uuid.uuid4().hex[:6]}"
    with Wire(broker.port()) as wire:
        found = wire.call(ApiKey.FIND_COORDINATOR, 3, {"key": txn_id, "key_type": 1})
        assert (found["error_code"], found["port"]) == (0, broker.port()), found
        first = _init(wire, 4, txn_id)
        assert first["error_code"] == 0, first
        pid, epoch = first["producer_id"], first["producer_epoch"]
        # no transaction open yet: start time -1, as Kafka sends it
        [empty] = wire.call(ApiKey.DESCRIBE_TRANSACTIONS, 0,
                            {"transactional_ids": [txn_id]})["transaction_states"]
        assert (empty["error_code"], empty["transaction_state"],
                empty["transaction_start_time"]) == (0, "Empty", -1), empty
        body = {"v3_and_below_transactional_id": txn_id, "v3_and_below_producer_id": pid,
                "v3_and_below_producer_epoch": epoch,
                "v3_and_below_topics": [{"name": topic, "partitions": [0]},
                                        {"name": "no-such-topic", "partitions": [0]}]}
        added = wire.call(ApiKey.ADD_PARTITIONS_TO_TXN, 3, body)
        assert _codes(added["results_by_topic_v3_and_below"]) == {
            (topic, 0): ErrorCode.operation_not_attempted,
            ("no-such-topic", 0): ErrorCode.unknown_topic_or_partition}
        body["v3_and_below_topics"] = [{"name": topic, "partitions": [0]}]
        added = wire.call(ApiKey.ADD_PARTITIONS_TO_TXN, 3, body)
        assert _codes(added["results_by_topic_v3_and_below"]) == {(topic, 0): 0}
        verified = wire.call(ApiKey.ADD_PARTITIONS_TO_TXN, 4, {"transactions": [{
            "transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch,
            "verify_only": True, "topics": [{"name": topic, "partitions": [0, 1]}]}]})
        [result] = verified["results_by_transaction"]
        assert _codes(result["topic_results"]) == {(topic, 0): 0,
                                                   (topic, 1): ErrorCode.invalid_txn_state}
        listed = wire.call(ApiKey.LIST_TRANSACTIONS, 1, {
            "state_filters": ["Ongoing", "Bogus"], "producer_id_filters": [],
            "duration_filter": -1})
        assert listed["unknown_state_filters"] == ["Bogus"]
        assert {"transactional_id": txn_id, "producer_id": pid,
                "transaction_state": "Ongoing"} in listed["transaction_states"]
        described = wire.call(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [txn_id]})
        [state] = described["transaction_states"]
        assert (state["transaction_state"], state["producer_epoch"]) == ("Ongoing", epoch)
        assert state["topics"] == [{"topic": topic, "partitions": [0]}]
        # a second producer takes the id over: the open transaction is aborted first
        second = _init(wire, 4, txn_id)
        assert (second["error_code"], second["producer_id"]) == (0, pid)
        assert second["producer_epoch"] == epoch + 2
        end = {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch,
               "committed": True}
        assert wire.call(ApiKey.END_TXN, 1, end)["error_code"] == ErrorCode.invalid_producer_epoch
        assert wire.call(ApiKey.END_TXN, 3, end)["error_code"] == ErrorCode.producer_fenced
        assert _init(wire, 3, txn_id, pid, epoch)["error_code"] \
            == ErrorCode.invalid_producer_epoch
        assert _init(wire, 4, txn_id, pid, epoch)["error_code"] == ErrorCode.producer_fenced
        # KIP-360: the current producer recovers with its own id and epoch
        bumped = _init(wire, 4, txn_id, pid, second["producer_epoch"])
        assert (bumped["error_code"], bumped["producer_epoch"]) == (0, epoch + 3)


def test_transaction_state_topic_as_kafka_creates_it(broker: BrokerProcess) -> None:
    """Created on the first lookup: compacted, uncompressed, 50 partitions, and min.isr
    capped at the single node's replication factor of 1 (Kafka's default 2 would refuse
    every write)."""
    producer(broker, f"topic-{uuid.uuid4().hex[:6]}").init_transactions(30)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "logger": RDKAFKA})
    metadata = admin.list_topics("__transaction_state", timeout=15)
    assert len(metadata.topics["__transaction_state"].partitions) == 50
    resource = ConfigResource(ConfigResource.Type.TOPIC, "__transaction_state")
    configs = admin.describe_configs([resource])[resource].result(15)
    assert {key: configs[key].value for key in ("cleanup.policy", "compression.type",
                                                "min.insync.replicas",
                                                "unclean.leader.election.enable")} == {
        "cleanup.policy": "compact", "compression.type": "uncompressed",
        "min.insync.replicas": "1", "unclean.leader.election.enable": "false"}


def _stable_offset(broker: BrokerProcess, group: str, topic: str) -> int:
    """The group's committed offset of ``topic``-0 by OffsetFetch v7 with require_stable,
    retried while a transaction holds it (UNSTABLE_OFFSET_COMMIT)."""
    deadline = time.monotonic() + WAIT_S
    with Wire(broker.port()) as wire:
        while True:
            answer = wire.call(ApiKey.OFFSET_FETCH, 7, {
                "group_id": group, "require_stable": True,
                "topics": [{"name": topic, "partition_indexes": [0]}]})
            [part] = answer["topics"][0]["partitions"]
            if part["error_code"] != ErrorCode.unstable_offset_commit:
                assert part["error_code"] == 0, part
                return int(part["committed_offset"])
            assert time.monotonic() < deadline, "offsets stayed pending"
            time.sleep(0.1)


def test_send_offsets_to_transaction_commits_with_the_transaction(broker: BrokerProcess) -> None:
    """The group's offsets become visible when the transaction commits (the COMMIT marker on
    __consumer_offsets reaches the group coordinator) and are dropped when it aborts."""
    source, out = new_topic(broker, 1), new_topic(broker, 1)
    group = f"eos-{uuid.uuid4().hex[:6]}"
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap,
                                         "logger": RDKAFKA, "group.id": group})
    p = producer(broker, f"eos-{uuid.uuid4().hex[:6]}")
    p.init_transactions(30)
    for offset, commit in ((5, True), (9, False)):
        p.begin_transaction()
        p.produce(out, value=b"v%d" % offset, partition=0)
        p.send_offsets_to_transaction([confluent_kafka.TopicPartition(source, 0, offset)],
                                      consumer.consumer_group_metadata(), 30)
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
        assert _stable_offset(broker, group, source) == 5
    consumer.close()


def test_coordinator_state_survives_kill9(tmp_path: Path) -> None:
    """After kill -9 the coordinator loads __transaction_state again: a committed id keeps
    its producer id (the next init bumps its epoch), and a transaction left open is found
    Ongoing, times out and is aborted, so read_committed readers move on."""
    node = BrokerProcess(data_dir=tmp_path, settings={
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": 300})
    node.start()
    try:
        topic = new_topic(node, 1)
        done_id, open_id = f"done-{uuid.uuid4().hex[:6]}", f"open-{uuid.uuid4().hex[:6]}"
        done = producer(node, done_id)
        done.init_transactions(30)
        done.begin_transaction()
        done.produce(topic, value=b"committed", partition=0)
        done.commit_transaction(30)
        stale = producer(node, open_id, **{"transaction.timeout.ms": 3000})
        stale.init_transactions(30)
        stale.begin_transaction()
        stale.produce(topic, value=b"open", partition=0)
        stale.flush(30)
        before = _describe(node, done_id)
        node.kill()
        node.start()
        after = _describe(node, done_id)
        assert (after["transaction_state"], after["producer_id"], after["producer_epoch"]) \
            == ("CompleteCommit", before["producer_id"], before["producer_epoch"])
        again = producer(node, done_id)
        again.init_transactions(30)
        bumped = _describe(node, done_id)
        assert (bumped["producer_id"], bumped["producer_epoch"]) \
            == (before["producer_id"], before["producer_epoch"] + 1)
        again.begin_transaction()
        again.produce(topic, value=b"after-restart", partition=0)
        again.commit_transaction(30)
        seen = consume_all(node, topic, "read_committed", 2, partitions=1)
        assert sorted(seen) == [b"after-restart", b"committed"]
        deadline = time.monotonic() + WAIT_S
        while (state := _txn_state(node, open_id)) != "CompleteAbort" \
                and time.monotonic() < deadline:
            time.sleep(0.1)
        assert state == "CompleteAbort"
    finally:
        node.stop()
        node.close()


def _describe(broker: BrokerProcess, txn_id: str) -> dict:
    with Wire(broker.port()) as wire:
        [state] = wire.call(ApiKey.DESCRIBE_TRANSACTIONS, 0,
                            {"transactional_ids": [txn_id]})["transaction_states"]
    assert state["error_code"] == 0, state
    return state


def test_idle_producer_ids_expire_every_check_interval(tmp_path: Path) -> None:
    """``producer.id.expiration.check.interval.ms`` drives the expiry of idle producer ids
    (DescribeProducers no longer lists them once ``producer.id.expiration.ms`` passed)."""
    node = BrokerProcess(data_dir=tmp_path, settings={
        "producer.id.expiration.ms": 1000, "producer.id.expiration.check.interval.ms": 200})
    node.start()
    try:
        topic = new_topic(node, 1)
        p = confluent_kafka.Producer({"bootstrap.servers": node.bootstrap, "logger": RDKAFKA,
                                      "enable.idempotence": True})
        p.produce(topic, value=b"x", partition=0)
        assert p.flush(30) == 0

        def producers() -> list[dict]:
            with Wire(node.port()) as wire:
                answer = wire.call(ApiKey.DESCRIBE_PRODUCERS, 0, {
                    "topics": [{"name": topic, "partition_indexes": [0]}]})
            return answer["topics"][0]["partitions"][0]["active_producers"]

        assert len(producers()) == 1
        deadline = time.monotonic() + WAIT_S
        while producers() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert producers() == []
    finally:
        node.stop()
        node.close()
