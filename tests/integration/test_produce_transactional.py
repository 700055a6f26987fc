"""Produce of transactional records against a real broker process (KIP-98 / KIP-890 part 1):
records without the request's transactional id are refused as Kafka refuses them, and a
transactional batch that opens a transaction on a partition is verified with the
transaction's coordinator before it is appended."""

from __future__ import annotations

import time
from collections.abc import Iterator

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
