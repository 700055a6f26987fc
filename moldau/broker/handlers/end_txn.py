"""EndTxn (key 26), versions 0-4: commit or abort the producer's open transaction.

The transaction coordinator writes PrepareCommit / PrepareAbort and answers; the markers go
to every partition of the transaction afterwards (``moldau.broker.txn.channel``) and the
transaction becomes CompleteCommit / CompleteAbort when all are written. A retry while the
markers are out gets CONCURRENT_TRANSACTIONS, after that NONE. Errors: INVALID_PRODUCER_ID_MAPPING
(not the id's producer), PRODUCER_FENCED (v2+; INVALID_PRODUCER_EPOCH before) for an older
epoch, INVALID_TXN_STATE (commit after abort, or nothing open), and the coordinator errors.

Left out: v5 (transactions V2: an epoch bump per transaction); transactional-id ACLs.
"""

from __future__ import annotations

from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ..dispatch import RequestContext, handler
from ..txn.errors import TxnError, for_version
from ..txn.service import txn_coordinator_of


@handler(ApiKey.END_TXN, 0, 4)
async def handle_end_txn(ctx: RequestContext, request: Any) -> Any:
    error = ErrorCode.none
    try:
        coordinator = txn_coordinator_of(ctx.broker)
        await coordinator.end_txn(request.transactional_id, request.producer_id,
                                  request.producer_epoch, bool(request.committed))
    except TxnError as exc:
        error = exc.code
    return ctx.respond({"throttle_time": 0,
                        "error_code": for_version(ApiKey.END_TXN, ctx.version, error)})
