"""ListTransactions (key 66), versions 0-2: the transactions of the ``__transaction_state``
partitions this broker leads (``kafka-transactions.sh list``; admin clients ask every broker).

Filters: ``state_filters`` (state names; names Kafka does not know come back in
``unknown_state_filters`` and match nothing), ``producer_id_filters``, v1 ``duration_filter``
(KIP-994: running longer than this many ms; -1 none), v2 ``transactional_id_pattern``
(KIP-1152: a regular expression matching the whole id, Python's syntax; INVALID_REQUEST if
it does not compile). COORDINATOR_LOAD_IN_PROGRESS while a partition of this broker loads;
COORDINATOR_NOT_AVAILABLE before the coordinator runs.

Left out: transactional-id ACLs (Kafka lists only the ids the principal may describe).
"""

from __future__ import annotations

from typing import Any

from ...protocol.api_keys import ApiKey
from ..dispatch import RequestContext, handler
from ..txn.admin import list_transactions
from ..txn.errors import TxnError
from ..txn.service import txn_coordinator_of


@handler(ApiKey.LIST_TRANSACTIONS, 0, 2)
def handle_list_transactions(ctx: RequestContext, request: Any) -> Any:
    try:
        coordinator = txn_coordinator_of(ctx.broker)
    except TxnError as exc:
        return ctx.respond({"throttle_time": 0, "error_code": exc.code,
                            "unknown_state_filters": [], "transaction_states": []})
    listing = list_transactions(
        coordinator, states=list(request.state_filters),
        producer_ids=list(request.producer_id_filters),
        duration_ms=int(getattr(request, "duration_filter", -1)),
        pattern=getattr(request, "transactional_id_pattern", None))
    return ctx.respond({
        "throttle_time": 0, "error_code": listing.error,
        "unknown_state_filters": listing.unknown_state_filters,
        "transaction_states": [{"transactional_id": txn_id, "producer_id": pid,
                                "transaction_state": state}
                               for txn_id, pid, state in listing.transactions]})
