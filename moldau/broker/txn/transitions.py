"""What each transaction request does to a transactional id's metadata: pure functions.

Each ``plan_*`` takes the current metadata (None when the id is unknown) and the request, and
returns a :class:`Plan` (the metadata to write, or a tombstone, and what to answer) or raises
:class:`~.errors.TxnError`. Nothing here touches the log: the coordinator writes the plan, then
keeps it (Kafka's ``TransactionCoordinator`` + ``TransactionMetadata.prepare*``).

The coordinator runs one plan at a time per transactional id (its key lock), which is what
Kafka's "pending state" guards; a request that waited for the lock sees the new state.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from ...protocol.errors import ErrorCode
from .errors import TxnError
from .state import (
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TopicPartition,
    TxnMetadata,
    TxnState,
    is_epoch_exhausted,
)

_S = TxnState


@dataclass(frozen=True, slots=True)
class Plan:
    """The outcome of a request.

    ``write``: the metadata to append and then keep (None: nothing is written);
    ``tombstone``: delete the id instead; ``error``: the answer once the write succeeded (an
    InitProducerId that fences an open transaction answers CONCURRENT_TRANSACTIONS);
    ``markers``: ``write`` is Prepare*, so markers go out after it.
    """

    write: TxnMetadata | None = None
    error: ErrorCode = ErrorCode.none
    tombstone: bool = False

    @property
    def markers(self) -> bool:
        return self.write is not None and self.write.state.is_prepare


def _current(cur: TxnMetadata | None) -> TxnMetadata | None:
    return None if cur is None or cur.state is _S.DEAD else cur


# --- InitProducerId -----------------------------------------------------------------------
def needs_new_producer_id(cur: TxnMetadata | None, expected: tuple[int, int] | None) -> bool:
    """Whether :func:`plan_init` will want a fresh producer id (so the caller allocates one
    first): an unknown id, or an idle one whose epoch is exhausted."""
    cur = _current(cur)
    if cur is None:
        return True
    return (cur.state.is_idle and is_epoch_exhausted(cur.producer_epoch)
            and (expected is None or expected[1] == cur.producer_epoch))


def plan_init(cur: TxnMetadata | None, transactional_id: str, timeout_ms: int, *,
              max_timeout_ms: int, expected: tuple[int, int] | None, new_pid: int | None,
              now: int) -> Plan:
    """InitProducerId with a transactional id (Kafka's ``handleInitProducerId``).

    ``expected`` is the (producer id, epoch) a v3+ producer sends to recover (KIP-360), None
    otherwise (-1/-1 on the wire). The answer is ``plan.write``'s producer id and epoch."""
    if not transactional_id:
        raise TxnError(ErrorCode.invalid_request, "the transactional id is empty")
    if timeout_ms <= 0 or timeout_ms > max_timeout_ms:
        raise TxnError(ErrorCode.invalid_transaction_timeout,
                       f"transaction.timeout.ms={timeout_ms} is not in 1.."
                       f"{max_timeout_ms} (the broker's transaction.max.timeout.ms): lower the "
                       f"producer's transaction.timeout.ms or raise the broker's limit")
    cur = _current(cur)
    if cur is None:
        if new_pid is None:
            raise ValueError("a new transactional id needs a new producer id")
        fresh = TxnMetadata(transactional_id, new_pid, 0, timeout_ms, _S.EMPTY,
                            last_update_ms=now)
        return Plan(write=fresh)
    if expected is not None and not _valid_expected(cur, expected):
        raise TxnError(ErrorCode.producer_fenced,
                       f"producer id {expected[0]} epoch {expected[1]} is not the current "
                       f"producer of {transactional_id!r} (id {cur.producer_id} epoch "
                       f"{cur.producer_epoch}): a newer producer took it over")
    if cur.state.is_prepare:
        raise TxnError(ErrorCode.concurrent_transactions,
                       f"the last transaction of {transactional_id!r} is still being "
                       f"{'committed' if cur.state is _S.PREPARE_COMMIT else 'aborted'}")
    if cur.state is _S.ONGOING:
        # Fence the open transaction: abort it at a bumped epoch that is never handed out;
        # the client retries (CONCURRENT_TRANSACTIONS) and bumps again once it is aborted.
        fenced = _fence(cur, now)
        return Plan(write=fenced, error=ErrorCode.concurrent_transactions)
    if cur.state.is_idle:
        if is_epoch_exhausted(cur.producer_epoch) and (
                expected is None or expected[1] == cur.producer_epoch):
            if new_pid is None:
                raise ValueError("an exhausted epoch needs a new producer id")
            rotated = cur.to(_S.EMPTY, producer_id=new_pid, producer_epoch=0,
                             last_producer_id=cur.producer_id,
                             last_producer_epoch=(cur.producer_epoch if expected is not None
                                                  else NO_PRODUCER_EPOCH),
                             timeout_ms=timeout_ms, partitions=frozenset(), start_ms=-1,
                             last_update_ms=now)
            return Plan(write=rotated)
        return Plan(write=_increment_epoch(cur, timeout_ms, expected, now))
    raise TxnError(ErrorCode.unknown_server_error,
                   f"transactional id {transactional_id!r} is in state {cur.state.display}")


def _valid_expected(cur: TxnMetadata, expected: tuple[int, int]) -> bool:
    """Kafka's ``isValidProducerId``: the current id (any epoch), or the id before a rotation
    with an exhausted epoch (a retry that missed the rotation's answer)."""
    pid, epoch = expected
    return (cur.producer_epoch == NO_PRODUCER_EPOCH or pid == cur.producer_id
            or (pid == cur.last_producer_id and is_epoch_exhausted(epoch)))


def _increment_epoch(cur: TxnMetadata, timeout_ms: int, expected: tuple[int, int] | None,
                     now: int) -> TxnMetadata:
    """Kafka's ``prepareIncrementProducerEpoch``."""
    bumped = cur.producer_epoch + 1
    if expected is None:
        epoch, last = bumped, NO_PRODUCER_EPOCH
    elif expected[1] == cur.producer_epoch:
        epoch, last = bumped, cur.producer_epoch
    elif expected[1] == cur.last_producer_epoch:
        # A retry whose answer was lost: the same epoch again, no second bump.
        epoch, last = cur.producer_epoch, cur.last_producer_epoch
    else:
        raise TxnError(ErrorCode.producer_fenced,
                       f"producer epoch {expected[1]} of {cur.transactional_id!r} is neither "
                       f"the current epoch {cur.producer_epoch} nor the one before it")
    return cur.to(_S.EMPTY, producer_epoch=epoch, last_producer_epoch=last,
                  timeout_ms=timeout_ms, partitions=frozenset(), start_ms=-1,
                  last_update_ms=now)


def _fence(cur: TxnMetadata, now: int) -> TxnMetadata:
    """An open transaction aborted at a bumped epoch (Kafka's ``prepareFenceProducerEpoch``
    then ``endTransaction(ABORT)``); the epoch stays at the maximum if it is there already."""
    epoch = min(cur.producer_epoch + 1, MAX_EPOCH)
    fenced = replace(cur, state=_S.PREPARE_EPOCH_FENCE, producer_epoch=epoch,
                     last_producer_epoch=cur.producer_epoch)
    return fenced.to(_S.PREPARE_ABORT, last_update_ms=now)


# --- AddPartitionsToTxn / AddOffsetsToTxn ---------------------------------------------------
def _check_producer(cur: TxnMetadata | None, transactional_id: str, producer_id: int,
                    epoch: int) -> TxnMetadata:
    cur = _current(cur)
    if cur is None or cur.producer_id != producer_id:
        raise TxnError(ErrorCode.invalid_producer_id_mapping,
                       f"producer id {producer_id} is not the producer of transactional id "
                       f"{transactional_id!r}: call InitProducerId first")
    if cur.producer_epoch != epoch:
        raise TxnError(ErrorCode.producer_fenced,
                       f"producer epoch {epoch} of {transactional_id!r} is not the current "
                       f"epoch {cur.producer_epoch}: a newer producer took it over")
    return cur


def plan_add_partitions(cur: TxnMetadata | None, transactional_id: str, producer_id: int,
                        epoch: int, tps: Iterable[TopicPartition], *, now: int) -> Plan:
    """Add ``tps`` to the transaction, starting it if none is open."""
    cur = _check_producer(cur, transactional_id, producer_id, epoch)
    if cur.state.is_prepare or cur.state is _S.PREPARE_EPOCH_FENCE:
        raise TxnError(ErrorCode.concurrent_transactions,
                       f"the last transaction of {transactional_id!r} is still completing")
    if cur.state is _S.DEAD:  # pragma: no cover - _current dropped it
        raise TxnError(ErrorCode.invalid_producer_id_mapping)
    wanted = frozenset(tps)
    if cur.state is _S.ONGOING and wanted <= cur.partitions:
        return Plan()
    start = cur.start_ms if cur.state is _S.ONGOING else now
    return Plan(write=cur.to(_S.ONGOING, partitions=cur.partitions | wanted, start_ms=start,
                             last_update_ms=now))


def plan_verify(cur: TxnMetadata | None, transactional_id: str, producer_id: int, epoch: int,
                tps: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
    """AddPartitionsToTxn v4+ with ``verify_only`` (KIP-890): per partition NONE when the
    open transaction holds it, else INVALID_TXN_STATE."""
    cur = _check_producer(cur, transactional_id, producer_id, epoch)
    if cur.state.is_prepare or cur.state is _S.PREPARE_EPOCH_FENCE:
        raise TxnError(ErrorCode.concurrent_transactions,
                       f"the last transaction of {transactional_id!r} is still completing")
    held = cur.partitions if cur.state is _S.ONGOING else frozenset()
    return {tp: ErrorCode.none if tp in held else ErrorCode.invalid_txn_state for tp in tps}


# --- EndTxn and completion -------------------------------------------------------------------
_END_TABLE: dict[tuple[TxnState, bool], ErrorCode] = {
    (_S.COMPLETE_COMMIT, True): ErrorCode.none,
    (_S.COMPLETE_COMMIT, False): ErrorCode.invalid_txn_state,
    (_S.COMPLETE_ABORT, True): ErrorCode.invalid_txn_state,
    (_S.COMPLETE_ABORT, False): ErrorCode.none,
    (_S.PREPARE_COMMIT, True): ErrorCode.concurrent_transactions,
    (_S.PREPARE_COMMIT, False): ErrorCode.invalid_txn_state,
    (_S.PREPARE_ABORT, True): ErrorCode.invalid_txn_state,
    (_S.PREPARE_ABORT, False): ErrorCode.concurrent_transactions,
    (_S.EMPTY, True): ErrorCode.invalid_txn_state,
    (_S.EMPTY, False): ErrorCode.invalid_txn_state,
}


def plan_end(cur: TxnMetadata | None, transactional_id: str, producer_id: int, epoch: int,
             commit: bool, *, from_client: bool = True, now: int) -> Plan:
    """EndTxn (Kafka's ``endTransaction``); ``from_client`` is False for the coordinator's
    own aborts, which may act on an epoch newer than the request's."""
    cur = _current(cur)
    if cur is None or cur.producer_id != producer_id:
        raise TxnError(ErrorCode.invalid_producer_id_mapping,
                       f"producer id {producer_id} is not the producer of transactional id "
                       f"{transactional_id!r}")
    if (epoch != cur.producer_epoch) if from_client else (epoch < cur.producer_epoch):
        raise TxnError(ErrorCode.producer_fenced,
                       f"producer epoch {epoch} of {transactional_id!r} is not the current "
                       f"epoch {cur.producer_epoch}: a newer producer took it over")
    if cur.state is _S.ONGOING:
        target = _S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT
        return Plan(write=cur.to(target, last_update_ms=now))
    error = _END_TABLE.get((cur.state, commit))
    if error is None:
        raise TxnError(ErrorCode.unknown_server_error,
                       f"transactional id {transactional_id!r} is in state "
                       f"{cur.state.display}, which EndTxn never sees (a coordinator bug)")
    if error:
        word = "commit" if commit else "abort"
        raise TxnError(error, f"cannot {word} transactional id {transactional_id!r} in "
                              f"state {cur.state.display}")
    return Plan()


def plan_complete(cur: TxnMetadata | None, producer_id: int, epoch: int, commit: bool, *,
                  now: int) -> Plan:
    """All markers of a Prepare* transaction are written: move it to Complete*. Nothing when
    the transaction is no longer that one (superseded meanwhile)."""
    cur = _current(cur)
    target = _S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT
    if (cur is None or cur.state is not target or cur.producer_id != producer_id
            or cur.producer_epoch != epoch):
        return Plan()
    done = _S.COMPLETE_COMMIT if commit else _S.COMPLETE_ABORT
    return Plan(write=cur.to(done, partitions=frozenset(), last_update_ms=now))


# --- the coordinator's own housekeeping -------------------------------------------------------
def is_timed_out(cur: TxnMetadata, now: int) -> bool:
    """An open transaction older than its timeout."""
    return cur.state is _S.ONGOING and cur.start_ms + cur.timeout_ms < now


def plan_timeout(cur: TxnMetadata | None, *, now: int) -> Plan:
    """Abort a timed-out transaction at a bumped epoch, which fences its producer: data
    partitions refuse it with INVALID_PRODUCER_EPOCH (the markers carry the new epoch) and
    EndTxn/AddPartitionsToTxn with PRODUCER_FENCED."""
    cur = _current(cur)
    if cur is None or not is_timed_out(cur, now):
        return Plan()
    return Plan(write=_fence(cur, now))


def plan_expire(cur: TxnMetadata | None, *, expiration_ms: int, now: int) -> Plan:
    """Tombstone an idle transactional id unused for ``transactional.id.expiration.ms``."""
    cur = _current(cur)
    if cur is None or not cur.state.is_idle or cur.last_update_ms + expiration_ms > now:
        return Plan()
    return Plan(tombstone=True)


__all__ = ["NO_PRODUCER_ID", "Plan", "is_timed_out", "needs_new_producer_id", "plan_add_partitions",
           "plan_complete", "plan_end", "plan_expire", "plan_init", "plan_timeout", "plan_verify"]
