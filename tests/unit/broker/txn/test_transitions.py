"""Every cell of design §6.3: the transaction coordinator's transitions (pure)."""

from __future__ import annotations

import pytest

from moldau.broker.txn.errors import TxnError
from moldau.broker.txn.state import VALID_PREVIOUS, TxnMetadata, TxnState
from moldau.broker.txn.transitions import (
    needs_new_producer_id,
    plan_add_partitions,
    plan_complete,
    plan_end,
    plan_expire,
    plan_init,
    plan_timeout,
    plan_verify,
)
from moldau.protocol.errors import ErrorCode as E

S = TxnState
MAX_T = 900_000
TP = ("out", 0)


def meta(state: TxnState = S.EMPTY, *, pid: int = 10, epoch: int = 3, **kw: object
         ) -> TxnMetadata:
    parts = kw.pop("partitions", frozenset({TP}) if state in (S.ONGOING, S.PREPARE_COMMIT,
                                                             S.PREPARE_ABORT) else frozenset())
    return TxnMetadata("tx", pid, epoch, 60_000, state, partitions=parts,  # type: ignore[arg-type]
                       start_ms=kw.pop("start_ms", 100), last_update_ms=100, **kw)  # type: ignore[arg-type]


def init(cur: TxnMetadata | None, expected: tuple[int, int] | None = None, *,
         timeout: int = 60_000, new_pid: int | None = 99, tid: str = "tx"):
    return plan_init(cur, tid, timeout, max_timeout_ms=MAX_T, expected=expected,
                     new_pid=new_pid, now=1000)


def code_of(call) -> E:
    with pytest.raises(TxnError) as info:
        call()
    return info.value.code


# --- InitProducerId -------------------------------------------------------------------------
def test_init_validation() -> None:
    assert code_of(lambda: init(None, tid="")) == E.invalid_request
    assert code_of(lambda: init(None, timeout=0)) == E.invalid_transaction_timeout
    assert code_of(lambda: init(None, timeout=MAX_T + 1)) == E.invalid_transaction_timeout
    assert init(None, timeout=MAX_T).write is not None


def test_init_new_id() -> None:
    assert needs_new_producer_id(None, None)
    plan = init(None)
    assert plan.error == E.none and not plan.markers
    assert (plan.write.producer_id, plan.write.producer_epoch, plan.write.state) == (99, 0, S.EMPTY)


@pytest.mark.parametrize("state", [S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT])
def test_init_idle_bumps_epoch(state: TxnState) -> None:
    cur = meta(state)
    assert not needs_new_producer_id(cur, None)
    plan = init(cur)
    w = plan.write
    assert (w.producer_id, w.producer_epoch, w.state, w.partitions) == (10, 4, S.EMPTY, frozenset())
    assert w.last_producer_epoch == -1 and w.timeout_ms == 60_000 and w.last_update_ms == 1000


def test_init_kip360_expected_current_epoch_then_retry() -> None:
    plan = init(meta(S.COMPLETE_ABORT), (10, 3))
    assert (plan.write.producer_epoch, plan.write.last_producer_epoch) == (4, 3)
    # the producer missed the answer and retries with its old epoch: the same epoch again
    again = init(plan.write, (10, 3))
    assert again.write.producer_epoch == 4


def test_init_kip360_fenced() -> None:
    assert code_of(lambda: init(meta(), (11, 3))) == E.producer_fenced       # other pid
    assert code_of(lambda: init(meta(), (10, 1))) == E.producer_fenced       # stale epoch


@pytest.mark.parametrize("state", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_init_while_completing(state: TxnState) -> None:
    assert code_of(lambda: init(meta(state))) == E.concurrent_transactions


def test_init_fences_ongoing_then_retry_bumps_again() -> None:
    plan = init(meta(S.ONGOING))
    assert plan.error == E.concurrent_transactions and plan.markers
    w = plan.write
    assert (w.state, w.producer_epoch, w.partitions) == (S.PREPARE_ABORT, 4, frozenset({TP}))
    done = plan_complete(w, 10, 4, False, now=1001).write
    assert done.state is S.COMPLETE_ABORT and done.partitions == frozenset()
    retry = init(done)
    assert (retry.write.producer_id, retry.write.producer_epoch) == (10, 5)


def test_init_exhausted_epoch_rotates_producer_id() -> None:
    cur = meta(S.COMPLETE_COMMIT, epoch=32766)
    assert needs_new_producer_id(cur, None)
    w = init(cur, new_pid=77).write
    assert (w.producer_id, w.producer_epoch, w.last_producer_id) == (77, 0, 10)
    assert w.last_producer_epoch == -1
    # with KIP-360: the old pid at the exhausted epoch may retry and gets the new pid again
    w2 = init(cur, (10, 32766), new_pid=77).write
    assert (w2.producer_id, w2.producer_epoch, w2.last_producer_epoch) == (77, 0, 32766)
    again = init(w2, (10, 32766), new_pid=None).write
    assert (again.producer_id, again.producer_epoch) == (77, 0)


def test_fence_at_max_epoch_keeps_it_and_retry_rotates() -> None:
    w = init(meta(S.ONGOING, epoch=32767)).write
    assert w.producer_epoch == 32767 and w.state is S.PREPARE_ABORT
    done = plan_complete(w, 10, 32767, False, now=2).write
    rotated = init(done, new_pid=55).write
    assert (rotated.producer_id, rotated.producer_epoch) == (55, 0)


def test_dead_is_like_unknown() -> None:
    assert init(meta(S.DEAD)).write.producer_id == 99


# --- AddPartitionsToTxn ---------------------------------------------------------------------
def add(cur, pid=10, epoch=3, tps=(TP,)):
    return plan_add_partitions(cur, "tx", pid, epoch, tps, now=500)


def test_add_partitions_checks() -> None:
    assert code_of(lambda: add(None)) == E.invalid_producer_id_mapping
    assert code_of(lambda: add(meta(), pid=11)) == E.invalid_producer_id_mapping
    assert code_of(lambda: add(meta(), epoch=2)) == E.producer_fenced
    for state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        assert code_of(lambda s=state: add(meta(s))) == E.concurrent_transactions


@pytest.mark.parametrize("state", [S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT])
def test_add_partitions_starts_txn(state: TxnState) -> None:
    w = add(meta(state)).write
    assert (w.state, w.partitions, w.start_ms) == (S.ONGOING, frozenset({TP}), 500)


def test_add_partitions_ongoing() -> None:
    assert add(meta(S.ONGOING)).write is None                 # already held: no write
    w = add(meta(S.ONGOING), tps=[("other", 2)]).write
    assert w.partitions == frozenset({TP, ("other", 2)}) and w.start_ms == 100


# --- verify (AddPartitionsToTxn v4 verify_only) ---------------------------------------------
def test_verify() -> None:
    got = plan_verify(meta(S.ONGOING), "tx", 10, 3, [TP, ("x", 1)])
    assert got == {TP: E.none, ("x", 1): E.invalid_txn_state}
    assert plan_verify(meta(S.COMPLETE_COMMIT), "tx", 10, 3, [TP]) == {TP: E.invalid_txn_state}
    assert code_of(lambda: plan_verify(meta(S.ONGOING), "tx", 10, 2, [TP])) == E.producer_fenced
    assert code_of(lambda: plan_verify(None, "tx", 10, 3, [TP])) == E.invalid_producer_id_mapping
    assert code_of(lambda: plan_verify(meta(S.PREPARE_ABORT), "tx", 10, 3, [TP])) \
        == E.concurrent_transactions


# --- EndTxn: the table of §6.3 ---------------------------------------------------------------
END_TABLE = [
    (S.COMPLETE_COMMIT, True, E.none), (S.COMPLETE_COMMIT, False, E.invalid_txn_state),
    (S.COMPLETE_ABORT, True, E.invalid_txn_state), (S.COMPLETE_ABORT, False, E.none),
    (S.PREPARE_COMMIT, True, E.concurrent_transactions),
    (S.PREPARE_COMMIT, False, E.invalid_txn_state),
    (S.PREPARE_ABORT, True, E.invalid_txn_state),
    (S.PREPARE_ABORT, False, E.concurrent_transactions),
    (S.EMPTY, True, E.invalid_txn_state), (S.EMPTY, False, E.invalid_txn_state),
    (S.PREPARE_EPOCH_FENCE, True, E.unknown_server_error),
    (S.PREPARE_EPOCH_FENCE, False, E.unknown_server_error),
]


@pytest.mark.parametrize(("state", "commit", "expected"), END_TABLE)
def test_end_table(state: TxnState, commit: bool, expected: E) -> None:
    call = lambda: plan_end(meta(state), "tx", 10, 3, commit, now=7)  # noqa: E731
    if expected == E.none:
        assert call().write is None
    else:
        assert code_of(call) == expected


@pytest.mark.parametrize("commit", [True, False])
def test_end_ongoing_prepares(commit: bool) -> None:
    plan = plan_end(meta(S.ONGOING), "tx", 10, 3, commit, now=7)
    assert plan.markers and plan.error == E.none
    assert plan.write.state is (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT)
    assert plan.write.partitions == frozenset({TP})


def test_end_producer_checks() -> None:
    assert code_of(lambda: plan_end(None, "tx", 10, 3, True, now=1)) \
        == E.invalid_producer_id_mapping
    assert code_of(lambda: plan_end(meta(S.ONGOING), "tx", 11, 3, True, now=1)) \
        == E.invalid_producer_id_mapping
    assert code_of(lambda: plan_end(meta(S.ONGOING), "tx", 10, 2, True, now=1)) == E.producer_fenced
    assert code_of(lambda: plan_end(meta(S.ONGOING), "tx", 10, 4, True, now=1)) == E.producer_fenced
    # the coordinator's own abort may name an older epoch than a bumped current one, never newer
    assert code_of(lambda: plan_end(meta(S.ONGOING, epoch=5), "tx", 10, 4, False,
                                    from_client=False, now=1)) == E.producer_fenced
    assert plan_end(meta(S.ONGOING), "tx", 10, 3, False, from_client=False, now=1).markers


# --- completion, timeout, expiry -------------------------------------------------------------
def test_complete() -> None:
    w = plan_complete(meta(S.PREPARE_COMMIT), 10, 3, True, now=9).write
    assert (w.state, w.partitions, w.last_update_ms) == (S.COMPLETE_COMMIT, frozenset(), 9)
    assert plan_complete(meta(S.PREPARE_ABORT), 10, 3, False, now=9).write.state \
        is S.COMPLETE_ABORT
    # superseded or already complete: nothing
    assert plan_complete(meta(S.PREPARE_COMMIT), 10, 2, True, now=9).write is None
    assert plan_complete(meta(S.COMPLETE_COMMIT), 10, 3, True, now=9).write is None
    assert plan_complete(meta(S.PREPARE_ABORT), 10, 3, True, now=9).write is None
    assert plan_complete(None, 10, 3, True, now=9).write is None


def test_timeout() -> None:
    cur = meta(S.ONGOING, start_ms=100)            # timeout 60 000
    assert plan_timeout(cur, now=60_100).write is None
    w = plan_timeout(cur, now=60_101).write
    assert (w.state, w.producer_epoch, w.last_producer_epoch) == (S.PREPARE_ABORT, 4, 3)
    assert plan_timeout(meta(S.COMPLETE_COMMIT, start_ms=0), now=10**9).write is None
    # the zombie's EndTxn and AddPartitions are fenced
    assert code_of(lambda: plan_end(w, "tx", 10, 3, True, now=1)) == E.producer_fenced
    assert code_of(lambda: add(w)) == E.producer_fenced


@pytest.mark.parametrize("state", [S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT])
def test_expire_idle(state: TxnState) -> None:
    cur = meta(state)                                  # last update 100
    assert not plan_expire(cur, expiration_ms=1000, now=1099).tombstone
    assert plan_expire(cur, expiration_ms=1000, now=1100).tombstone


@pytest.mark.parametrize("state", [S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_expire_never_open(state: TxnState) -> None:
    assert not plan_expire(meta(state), expiration_ms=1, now=10**9).tombstone


def test_valid_previous_refuses_illegal_moves() -> None:
    assert S.ONGOING in VALID_PREVIOUS[S.PREPARE_COMMIT]
    with pytest.raises(ValueError):
        meta(S.EMPTY).to(S.PREPARE_COMMIT)
    with pytest.raises(ValueError):
        meta(S.PREPARE_COMMIT).to(S.COMPLETE_ABORT)
