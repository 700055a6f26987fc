"""Produce of transactional records against a real broker process (KIP-98 / KIP-890 part 1):
records without the request's transactional id are refused as Kafka refuses them, and a
transactional batch that opens a transaction on a partition is verified with the
transaction's coordinator before it is appended."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.records.codec import build_batch
from moldau.testing.runner import BrokerProcess
from tests.integration.broker_wire import PRODUCE_VERSION, Wire, create_topic, list_offset

TOPIC = "txn-produce"


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    with BrokerProcess() as node:
        with Wire(node.port()) as wire:
            create_topic(wire, TOPIC, partitions=2)
        yield node


def txn_batch(values: list[bytes], *, pid: int = 1000, epoch: int = 0, seq: int = 0,
              transactional: bool = True) -> bytes:
    ts = int(time.time() * 1000)
    return build_batch([(b"k", v, [], ts) for v in values], producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq, transactional=transactional)


def produce_all(wire: Wire, transactional_id: str | None,
                partitions: dict[int, bytes]) -> dict[int, dict]:
    response = wire.call(ApiKey.PRODUCE, PRODUCE_VERSION, {
        "transactional_id": transactional_id, "acks": -1, "timeout": 10000,
        "topic_data": [{"name": TOPIC, "partition_data": [
            {"index": p, "records": r} for p, r in partitions.items()]}]})
    [topic] = response["responses"]
    return {p["index"]: p for p in topic["partition_responses"]}


def test_transactional_records_without_a_transactional_id_fail_the_whole_request(
        broker: BrokerProcess) -> None:
    with Wire(broker.port()) as wire:
        before = [list_offset(wire, TOPIC, p, -1) for p in (0, 1)]
        # Partition 0 transactional, partition 1 plain: the whole request is refused.
        answers = produce_all(wire, None, {0: txn_batch([b"a"]),
                                           1: txn_batch([b"b"], transactional=False)})
        assert {p: a["error_code"] for p, a in answers.items()} == {
            0: ErrorCode.transactional_id_authorization_failed,
            1: ErrorCode.transactional_id_authorization_failed}
        assert "transactional.id" in answers[0]["error_message"]
        assert [list_offset(wire, TOPIC, p, -1) for p in (0, 1)] == before
        # The same connection serves on.
        plain = produce_all(wire, None, {1: txn_batch([b"c"], pid=-1, epoch=-1, seq=-1,
                                                      transactional=False)})
        assert plain[1]["error_code"] == ErrorCode.none


def _retry(call: Any, retriable: set[int], timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        answer = call()
        code = answer.get("error_code", 0)
        if code not in retriable or time.monotonic() > deadline:
            return answer
        time.sleep(0.2)


def begin(wire: Wire, txn_id: str, partitions: list[int]) -> tuple[int, int]:
    """FindCoordinator, InitProducerId and AddPartitionsToTxn for ``partitions`` of TOPIC, as
    a transactional client does; the producer's (id, epoch)."""
    busy = {ErrorCode.coordinator_not_available, ErrorCode.coordinator_load_in_progress,
            ErrorCode.concurrent_transactions, ErrorCode.not_coordinator}
    found = _retry(lambda: wire.call(ApiKey.FIND_COORDINATOR, 3,
                                     {"key": txn_id, "key_type": 1}), busy)
    assert found["error_code"] == ErrorCode.none, found
    init = _retry(lambda: wire.call(ApiKey.INIT_PRODUCER_ID, 4, {
        "transactional_id": txn_id, "transaction_timeout": 60000, "producer_id": -1,
        "producer_epoch": -1}), busy)
    assert init["error_code"] == ErrorCode.none, init
    pid, epoch = init["producer_id"], init["producer_epoch"]
    added = wire.call(ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
        "v3_and_below_transactional_id": txn_id, "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": TOPIC, "partitions": partitions}]})
    codes = [p["partition_error_code"] for t in added["results_by_topic_v3_and_below"]
             for p in t["results_by_partition"]]
    assert codes == [ErrorCode.none] * len(partitions), added
    return pid, epoch


def test_a_partition_not_added_to_the_transaction_is_refused(broker: BrokerProcess) -> None:
    """KIP-890 part 1: the coordinator is asked before a transaction's first batch on a
    partition; one the producer never added gets INVALID_TXN_STATE and nothing is written
    (a stray batch would open a transaction no coordinator knows, and hold the LSO)."""
    txn_id = f"verify-{uuid.uuid4().hex[:6]}"
    with Wire(broker.port()) as wire:
        pid, epoch = begin(wire, txn_id, [0])
        before = list_offset(wire, TOPIC, 1, -1)
        answers = produce_all(wire, txn_id, {0: txn_batch([b"in"], pid=pid, epoch=epoch),
                                             1: txn_batch([b"out"], pid=pid, epoch=epoch)})
        assert answers[0]["error_code"] == ErrorCode.none, answers
        assert answers[1]["error_code"] == ErrorCode.invalid_txn_state, answers
        assert "not added to the transaction" in answers[1]["error_message"]
        assert list_offset(wire, TOPIC, 1, -1) == before
        # The next batch on partition 0 is inside an ongoing transaction: no question asked.
        more = produce_all(wire, txn_id, {0: txn_batch([b"more"], pid=pid, epoch=epoch,
                                                       seq=1)})
        assert more[0]["error_code"] == ErrorCode.none, more
        # An epoch the coordinator does not hold: PRODUCER_FENCED there, which Produce
        # v3-10 reports as INVALID_PRODUCER_EPOCH (KAFKA-15987).
        stale = produce_all(wire, txn_id, {1: txn_batch([b"odd"], pid=pid, epoch=epoch + 5)})
        assert stale[1]["error_code"] == ErrorCode.invalid_producer_epoch, stale
        assert list_offset(wire, TOPIC, 1, -1) == before

def test_appends_keep_the_connections_order_behind_a_verification(
        broker: BrokerProcess) -> None:
    """A produce whose append waits for the coordinator's answer holds back the produce
    requests pipelined behind it on its connection: they are appended after it."""
    txn_id = f"order-{uuid.uuid4().hex[:6]}"
    with Wire(broker.port()) as wire:
        pid, epoch = begin(wire, txn_id, [0])
        first_cid, first = wire.frame(ApiKey.PRODUCE, PRODUCE_VERSION, {
            "transactional_id": txn_id, "acks": -1, "timeout": 10000,
            "topic_data": [{"name": TOPIC, "partition_data": [
                {"index": 0, "records": txn_batch([b"txn"], pid=pid, epoch=epoch)}]}]})
        second_cid, second = wire.frame(ApiKey.PRODUCE, PRODUCE_VERSION, {
            "transactional_id": None, "acks": -1, "timeout": 10000,
            "topic_data": [{"name": TOPIC, "partition_data": [
                {"index": 0, "records": txn_batch([b"plain"], pid=-1, epoch=-1, seq=-1,
                                                  transactional=False)}]}]})
        wire.send(first + second)  # one write: the second arrives while the first verifies
        answers = [wire.response(ApiKey.PRODUCE, PRODUCE_VERSION, cid)
                   for cid in (first_cid, second_cid)]
        [a], [b] = ([p for t in r["responses"] for p in t["partition_responses"]]
                    for r in answers)
        assert (a["error_code"], b["error_code"]) == (ErrorCode.none, ErrorCode.none)
        assert a["base_offset"] < b["base_offset"], (a, b)


def test_verification_can_be_turned_off() -> None:
    """``transaction.partition.verification.enable=false``: the leader appends without asking
    (Kafka before KIP-890), so even a partition never added is written."""
    settings = {"transaction.partition.verification.enable": "false"}
    with BrokerProcess(settings=settings) as node, Wire(node.port()) as wire:
        create_topic(wire, TOPIC, partitions=2)
        txn_id = f"unverified-{uuid.uuid4().hex[:6]}"
        pid, epoch = begin(wire, txn_id, [0])
        answers = produce_all(wire, txn_id, {1: txn_batch([b"x"], pid=pid, epoch=epoch)})
        assert answers[1]["error_code"] == ErrorCode.none, answers
        assert list_offset(wire, TOPIC, 1, -1) == 1
