"""The transactional producer's state machine and error table (no I/O)."""

from __future__ import annotations

import pytest

from moldau.client.errors import (
    ClientError,
    ConfigError,
    ProducerFenced,
    TransactionAbortableError,
    TransactionStateError,
)
from moldau.client.producer import Producer
from moldau.client.transactions import (
    VALID_PREVIOUS,
    TxnState,
    TxnStateMachine,
    error_kind,
)
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode

S = TxnState


def _at(state: TxnState) -> TxnStateMachine:
    m = TxnStateMachine()
    m.state = state
    return m


def test_happy_path_commit_and_abort() -> None:
    m = TxnStateMachine()
    for target in (S.INITIALIZING, S.READY, S.IN_TRANSACTION, S.COMMITTING_TRANSACTION,
                   S.READY, S.IN_TRANSACTION, S.ABORTING_TRANSACTION, S.READY):
        m.transition(target)
    assert m.state is S.READY


@pytest.mark.parametrize("source", list(TxnState))
@pytest.mark.parametrize("target", list(TxnState))
def test_every_transition_follows_javas_table(source: TxnState, target: TxnState) -> None:
    m = _at(source)
    allowed = source in VALID_PREVIOUS[target] and (
        source is not S.FATAL_ERROR or target is S.FATAL_ERROR)
    if allowed:
        m.transition(target)
        assert m.state is target
    else:
        with pytest.raises(ClientError):
            m.transition(target)
        assert m.state is source


def test_java_table_spot_checks() -> None:
    assert VALID_PREVIOUS[S.IN_TRANSACTION] == {S.READY}
    assert VALID_PREVIOUS[S.ABORTING_TRANSACTION] == {S.IN_TRANSACTION, S.ABORTABLE_ERROR}
    assert S.COMMITTING_TRANSACTION in VALID_PREVIOUS[S.ABORTABLE_ERROR]
    assert S.ABORTABLE_ERROR not in VALID_PREVIOUS[S.COMMITTING_TRANSACTION]
    assert S.ABORTING_TRANSACTION in VALID_PREVIOUS[S.INITIALIZING]  # KIP-360 epoch bump


def test_require_names_what_to_call() -> None:
    with pytest.raises(TransactionStateError, match="init_transactions"):
        TxnStateMachine().require("begin_transaction()", S.READY)
    with pytest.raises(TransactionStateError, match="begin_transaction"):
        _at(S.READY).require("send()", S.IN_TRANSACTION)


def test_abortable_error_only_allows_abort() -> None:
    m = _at(S.IN_TRANSACTION)
    cause = RuntimeError("produce failed")
    m.fail(cause, fatal=False)
    assert m.state is S.ABORTABLE_ERROR
    with pytest.raises(TransactionAbortableError, match="abort_transaction") as info:
        m.require("commit_transaction()", S.IN_TRANSACTION)
    assert info.value.cause is cause
    m.require("abort_transaction()", S.IN_TRANSACTION, S.ABORTABLE_ERROR)
    m.transition(S.ABORTING_TRANSACTION)
    m.transition(S.READY)
    assert m.last_error is None


def test_fatal_error_is_final_and_raised_again() -> None:
    m = _at(S.IN_TRANSACTION)
    fenced = ProducerFenced(ErrorCode.producer_fenced, "", "EndTxn")
    m.fail(fenced, fatal=True)
    assert m.state is S.FATAL_ERROR
    for call in ("send()", "commit_transaction()", "abort_transaction()"):
        with pytest.raises(ProducerFenced):
            m.require(call, S.IN_TRANSACTION, S.ABORTABLE_ERROR)
    with pytest.raises(ProducerFenced):
        m.transition(S.READY)


def test_failure_outside_a_transaction_is_not_abortable() -> None:
    m = _at(S.READY)
    m.fail(RuntimeError("late batch error"), fatal=False)
    assert m.state is S.READY


@pytest.mark.parametrize(("code", "api", "kind"), [
    (ErrorCode.producer_fenced, ApiKey.END_TXN, "fatal"),
    (ErrorCode.invalid_producer_epoch, ApiKey.ADD_PARTITIONS_TO_TXN, "fatal"),
    (ErrorCode.transactional_id_authorization_failed, ApiKey.INIT_PRODUCER_ID, "fatal"),
    (ErrorCode.invalid_producer_id_mapping, ApiKey.INIT_PRODUCER_ID, "fatal"),
    (ErrorCode.invalid_producer_id_mapping, ApiKey.ADD_OFFSETS_TO_TXN, "abortable"),
    (ErrorCode.not_coordinator, ApiKey.END_TXN, "lookup"),
    (ErrorCode.coordinator_not_available, ApiKey.INIT_PRODUCER_ID, "lookup"),
    (ErrorCode.concurrent_transactions, ApiKey.INIT_PRODUCER_ID, "retry"),
    (ErrorCode.coordinator_load_in_progress, ApiKey.ADD_PARTITIONS_TO_TXN, "retry"),
    (ErrorCode.unknown_topic_or_partition, ApiKey.TXN_OFFSET_COMMIT, "retry"),
    (ErrorCode.invalid_txn_state, ApiKey.ADD_PARTITIONS_TO_TXN, "abortable"),
    (ErrorCode.invalid_txn_state, ApiKey.END_TXN, "fatal"),
    (ErrorCode.transaction_abortable, ApiKey.ADD_PARTITIONS_TO_TXN, "abortable"),
    (ErrorCode.illegal_generation, ApiKey.TXN_OFFSET_COMMIT, "abortable"),
])
def test_error_table(code: ErrorCode, api: ApiKey, kind: str) -> None:
    assert error_kind(code, api) == kind


def test_transactional_id_forces_idempotence() -> None:
    p = Producer({"bootstrap.servers": "127.0.0.1:1", "transactional.id": "t"})
    assert p.idempotent and p.config["acks"] == -1 and p.txn is not None
    assert p.txn.state is S.UNINITIALIZED


@pytest.mark.parametrize(("extra", "match"), [
    ({"enable.idempotence": False}, "enable.idempotence"),
    ({"acks": 1}, "acks must be all"),
    ({"max.in.flight.requests.per.connection": 6}, "at most 5"),
])
def test_transactional_id_conflicts_are_refused(extra: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        Producer({"bootstrap.servers": "127.0.0.1:1", "transactional.id": "t", **extra})


def test_calls_without_transactional_id_say_how_to_fix() -> None:
    p = Producer({"bootstrap.servers": "127.0.0.1:1"})
    with pytest.raises(ConfigError, match=r"transactional\.id"):
        p.begin_transaction()


def test_transactional_batches_carry_the_transactional_attribute() -> None:
    from moldau.client.accumulator import ProducerBatch
    from moldau.client.types import TopicPartition
    from moldau.protocol.records.batch import read_header

    p = Producer({"bootstrap.servers": "127.0.0.1:1", "transactional.id": "t"})
    p.set_producer_id(7, 3)
    batch = ProducerBatch(TopicPartition("t", 0), 0.0)
    batch.records.append((b"k", b"v", [], 1000))
    p._assign_sequence(batch)
    header = read_header(batch.encode(0), 0)
    assert header.is_transactional and not header.is_control
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 3, 0)


@pytest.mark.parametrize(("level", "end"), [("read_committed", 7), ("read_uncommitted", 10)])
def test_highwater_is_the_lso_for_read_committed(level: str, end: int) -> None:
    from moldau.client.consumer import Consumer
    from moldau.client.types import TopicPartition

    c = Consumer({"bootstrap.servers": "127.0.0.1:1", "isolation.level": level})
    tp = TopicPartition("t", 0)
    c.assign([tp])
    state = c.subscription.state(tp)
    state.high_watermark, state.last_stable_offset = 10, 7
    assert c.highwater(tp) == end


def test_a_reassigned_partition_never_reuses_a_fetch_generation() -> None:
    """A fetch answer in flight for a partition's old state (eager rebalance: revoked, then
    assigned again and positioned at the committed offset) must not be taken for the new
    state: its records at the old fetch offset skipped everything from the committed offset
    on (seen as lost records in the consume-transform-produce kill test)."""
    from moldau.client.subscription import SubscriptionState
    from moldau.client.types import TopicPartition

    tp = TopicPartition("in", 2)
    subs = SubscriptionState("earliest")
    subs.assign([tp])
    old = subs.state(tp)
    old.seek(23)
    in_flight = old.generation  # a fetch at offset 35 was sent with this generation
    subs.assign([])
    subs.assign([tp])
    new = subs.state(tp)
    new.seek(23)
    assert new.generation != in_flight
