"""Produce's mapping of a transaction verification answer to Produce v3-10 error codes
(KAFKA-15987): the client-facing codes it knows are kept, PRODUCER_FENCED becomes
INVALID_PRODUCER_EPOCH, and every coordinator-side trouble becomes the retriable
NOT_ENOUGH_REPLICAS."""

from __future__ import annotations

import pytest

from moldau.broker.handlers.produce import verification_error
from moldau.protocol.errors import ErrorCode as E


@pytest.mark.parametrize(("answer", "produce"), [
    (E.invalid_txn_state, E.invalid_txn_state),
    (E.invalid_producer_epoch, E.invalid_producer_epoch),
    (E.invalid_producer_id_mapping, E.invalid_producer_id_mapping),
    (E.producer_fenced, E.invalid_producer_epoch),
    (E.concurrent_transactions, E.not_enough_replicas),
    (E.coordinator_load_in_progress, E.not_enough_replicas),
    (E.coordinator_not_available, E.not_enough_replicas),
    (E.not_coordinator, E.not_enough_replicas),
    (E.network_exception, E.not_enough_replicas),
    (E.unknown_server_error, E.not_enough_replicas),
])
def test_verification_answers_become_produce_codes(answer: E, produce: E) -> None:
    assert verification_error(answer) == produce
    # what the client then does: retriable ones are retried, the others are not
    assert produce.retriable == (produce == E.not_enough_replicas)
