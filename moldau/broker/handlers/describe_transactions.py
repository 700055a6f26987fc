"""DescribeTransactions (key 65), version 0: the state of transactional ids this broker
coordinates (``kafka-transactions.sh describe``).

Each id gets its state name (Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit,
CompleteAbort), timeout, start time of the open transaction (-1: none), producer id and epoch,
and its partitions by topic. TRANSACTIONAL_ID_NOT_FOUND for an id the coordinator does not
know (or that expired), INVALID_REQUEST for an empty id, NOT_COORDINATOR /
COORDINATOR_LOAD_IN_PROGRESS for an id coordinated elsewhere or still loading (the admin
client looks the coordinator up with FindCoordinator key type 1 first).

An id with no open transaction has start time -1, as in Kafka (kio's datetime type cannot
read it; the moldau client decodes with ``moldau.client.kio_fixes``); error entries carry
Kafka's defaults (zeros).

Left out: transactional-id ACLs (Kafka answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ..dispatch import RequestContext, handler
from ..txn.admin import describe
from ..txn.errors import TxnError
from ..txn.service import txn_coordinator_of


@handler(ApiKey.DESCRIBE_TRANSACTIONS, 0, 0)
def handle_describe_transactions(ctx: RequestContext, request: Any) -> Any:
    try:
        coordinator = txn_coordinator_of(ctx.broker)
    except TxnError as exc:
        states = [_unavailable(txn_id, exc.code) for txn_id in request.transactional_ids]
        return ctx.respond({"throttle_time": 0, "transaction_states": states})
    states = []
    for txn_id in request.transactional_ids:
        entry = describe(coordinator, txn_id)
        entry["transaction_timeout"] = entry.pop("transaction_timeout_ms")
        entry["transaction_start_time"] = entry.pop("transaction_start_time_ms")
        states.append(entry)
    return ctx.respond({"throttle_time": 0, "transaction_states": states})


def _unavailable(txn_id: str, code: ErrorCode) -> dict[str, Any]:
    return {"error_code": code, "transactional_id": txn_id, "transaction_state": "",
            "transaction_timeout": 0, "transaction_start_time": 0, "producer_id": -1,
            "producer_epoch": -1, "topics": []}
