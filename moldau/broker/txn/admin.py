"""What DescribeTransactions and ListTransactions answer (Kafka's ``TransactionStateManager``
``listTransactionStates`` and ``TransactionCoordinator.handleDescribeTransactions``).

Both read the loaded shards only: a broker describes the transactional ids it coordinates and
lists those of the ``__transaction_state`` partitions it leads (admin clients ask every broker).

``transactional_id_pattern`` (ListTransactions v2, KIP-1152) is a Python regular expression
that must match the whole id (``re.fullmatch``), which is what Java's ``Pattern.matches`` does;
the syntax differs from Java's in corner cases (possessive quantifiers, some character
classes), and a pattern Python cannot compile is answered INVALID_REQUEST.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ...protocol.errors import ErrorCode
from .coordinator import TransactionCoordinator
from .errors import TxnError
from .state import TxnState


def describe(coordinator: TransactionCoordinator, transactional_id: str) -> dict[str, Any]:
    """One entry of a DescribeTransactions response."""
    # An error entry carries Kafka's defaults (zero start time and timeout).
    entry: dict[str, Any] = {"error_code": ErrorCode.none, "transactional_id": transactional_id,
                             "transaction_state": "", "transaction_timeout_ms": 0,
                             "transaction_start_time_ms": 0, "producer_id": -1,
                             "producer_epoch": -1, "topics": []}
    if not transactional_id:
        entry["error_code"] = ErrorCode.invalid_request
        return entry
    try:
        shard = coordinator.shard_of(transactional_id)
    except TxnError as exc:
        entry["error_code"] = exc.code
        return entry
    meta = shard.txns.get(transactional_id)
    if meta is None or meta.state is TxnState.DEAD:
        entry["error_code"] = ErrorCode.transactional_id_not_found
        return entry
    entry.update(
        transaction_state=meta.state.display, transaction_timeout_ms=meta.timeout_ms,
        # -1 when no transaction is open, as Kafka (kio's datetime type cannot read it: the
        # moldau client decodes with moldau.client.kio_fixes)
        transaction_start_time_ms=meta.start_ms, producer_id=meta.producer_id,
        producer_epoch=meta.producer_epoch,
        topics=[{"topic": topic, "partitions": partitions}
                for topic, partitions in meta.topics().items()])
    return entry


@dataclass(frozen=True, slots=True)
class Listing:
    """A ListTransactions answer."""

    error: ErrorCode
    unknown_state_filters: list[str]
    transactions: list[tuple[str, int, str]]  # (transactional id, producer id, state name)
    message: str | None = None


def list_transactions(coordinator: TransactionCoordinator, *, states: Iterable[str] = (),
                      producer_ids: Iterable[int] = (), duration_ms: int = -1,
                      pattern: str | None = None) -> Listing:
    """The transactions of the loaded shards that pass every filter given."""
    names = list(states)
    wanted_states: set[TxnState] = set()
    unknown: list[str] = []
    for name in names:
        state = TxnState.from_display(name)
        if state is None:
            unknown.append(name)
        else:
            wanted_states.add(state)
    if coordinator.runtime.loading:
        return Listing(ErrorCode.coordinator_load_in_progress, unknown, [],
                       "some __transaction_state partitions of this broker are still loading")
    compiled = None
    if pattern:
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            return Listing(ErrorCode.invalid_request, unknown, [],
                           f"transactional_id_pattern {pattern!r} is not a valid regular "
                           f"expression: {exc}")
    pids = set(producer_ids)
    now = coordinator.timer.now_ms()
    out: list[tuple[str, int, str]] = []
    for shard in coordinator.shards():
        for txn_id, meta in sorted(shard.txns.items()):
            if meta.state is TxnState.DEAD:
                continue
            if pids and meta.producer_id not in pids:
                continue
            # as Kafka: named states filter even when none of them is known (nothing passes)
            if names and meta.state not in wanted_states:
                continue
            if duration_ms >= 0 and now - meta.start_ms <= duration_ms:
                continue
            if compiled is not None and compiled.fullmatch(txn_id) is None:
                continue
            out.append((txn_id, meta.producer_id, meta.state.display))
    return Listing(ErrorCode.none, unknown, out)
