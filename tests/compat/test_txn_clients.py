"""Transactions written by every client, each in turn: design14 §11.1 and §11.3.

Writers (the ``client`` parameter): confluent-kafka 2.16 (librdkafka), kafka-python 3.0, aiokafka
0.14 (InitProducerId v0, AddPartitionsToTxn v0, TxnOffsetCommit v0), kafkajs 2.2.4 through
tests/compat/js/txn.js (transactional APIs v0-1) and the moldau client's own transactional
producer (moldau.client.transactions).

The writer runs the shared scenario (tests/compat/txn_support.py); then read_committed readers
of every client see exactly the committed records and read_uncommitted readers see all of them;
offsets sent in a transaction reach the group only when it commits; a second producer with the
same transactional id fences the first, whose next call fails with the client's fatal fenced
error: confluent-kafka's KafkaError _FENCED / PRODUCER_FENCED, kafka-python's ProducerFencedError
(or InvalidProducerEpochError), aiokafka's ProducerFenced or InvalidProducerEpoch and kafkajs's
PRODUCER_FENCED or INVALID_PRODUCER_EPOCH (their old API versions get error 47, as from Kafka),
moldau.client.errors.ProducerFenced; a producer killed inside a transaction has it aborted
after transaction.timeout.ms.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .conftest import require_tool
from .endpoint import KafkaEndpoint
from .txn_support import (
    WriterProc,
    check_fencing,
    check_matrix,
    check_send_offsets,
    check_timeout_abort,
    make_topics,
    run_scenario,
    txn_endpoint,
    unique,
)

CLIENTS = ["confluent_kafka", "kafka_python", "aiokafka", "kafkajs", "moldau"]


@pytest.fixture(scope="module")
def endpoint() -> Iterator[KafkaEndpoint]:
    yield from txn_endpoint()


@pytest.fixture(params=CLIENTS)
def client(request: pytest.FixtureRequest) -> str:
    """The writing client; kafkajs needs node (installed by `make test`)."""
    if request.param == "kafkajs":
        require_tool("node")
    return str(request.param)


def test_read_committed_sees_only_committed_transactions(endpoint: KafkaEndpoint,
                                                         client: str) -> None:
    topics = [unique("txn-a"), unique("txn-b")]
    make_topics(endpoint.bootstrap, topics)
    with WriterProc(client, endpoint.bootstrap) as w:
        expected = run_scenario(w, topics)
    check_matrix(endpoint.bootstrap, expected)


def test_send_offsets_to_transaction(endpoint: KafkaEndpoint, client: str) -> None:
    with WriterProc(client, endpoint.bootstrap) as w:
        check_send_offsets(w, endpoint.bootstrap)


def test_second_producer_fences_the_first(endpoint: KafkaEndpoint, client: str) -> None:
    with WriterProc(client, endpoint.bootstrap) as w:
        check_fencing(w, endpoint.bootstrap)


def test_killed_producer_is_aborted_after_the_timeout(endpoint: KafkaEndpoint,
                                                      client: str) -> None:
    check_timeout_abort(client, endpoint.bootstrap)
