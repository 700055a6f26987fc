"""Transactions written by confluent-kafka 2.16 (librdkafka): design14 §11.1 and §11.3.

The writer runs the shared scenario (tests/compat/txn_support.py); then read_committed readers
of every client see exactly the committed records and read_uncommitted readers see all of them;
offsets sent in a transaction reach the group only when it commits; a second producer with the
same transactional id fences the first (fatal KafkaError _FENCED/PRODUCER_FENCED); a producer
killed inside a transaction has it aborted after transaction.timeout.ms.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

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

CLIENT = "confluent_kafka"


@pytest.fixture(scope="module")
def endpoint() -> Iterator[KafkaEndpoint]:
    yield from txn_endpoint()


def test_read_committed_sees_only_committed_transactions(endpoint: KafkaEndpoint) -> None:
    topics = [unique("txn-a"), unique("txn-b")]
    make_topics(endpoint.bootstrap, topics)
    with WriterProc(CLIENT, endpoint.bootstrap) as w:
        expected = run_scenario(w, topics)
    check_matrix(endpoint.bootstrap, expected)


def test_send_offsets_to_transaction(endpoint: KafkaEndpoint) -> None:
    with WriterProc(CLIENT, endpoint.bootstrap) as w:
        check_send_offsets(w, endpoint.bootstrap)


def test_second_producer_fences_the_first(endpoint: KafkaEndpoint) -> None:
    with WriterProc(CLIENT, endpoint.bootstrap) as w:
        check_fencing(w, endpoint.bootstrap)


def test_killed_producer_is_aborted_after_the_timeout(endpoint: KafkaEndpoint) -> None:
    check_timeout_abort(CLIENT, endpoint.bootstrap)
