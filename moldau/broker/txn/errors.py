"""The transaction coordinator's errors, and how old request versions see them.

PRODUCER_FENCED (90) exists since InitProducerId v4 and AddPartitionsToTxn, AddOffsetsToTxn
and EndTxn v2; older versions get INVALID_PRODUCER_EPOCH (47) instead, as Kafka's KafkaApis
sends it. :func:`for_version` is the one place that applies the rule.
"""

from __future__ import annotations

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ..coordinator.errors import CoordinatorError

#: The first version of each API that knows PRODUCER_FENCED.
_FENCED_SINCE = {
    ApiKey.INIT_PRODUCER_ID: 4,
    ApiKey.ADD_PARTITIONS_TO_TXN: 2,
    ApiKey.ADD_OFFSETS_TO_TXN: 2,
    ApiKey.END_TXN: 2,
}


class TxnError(CoordinatorError):
    """A transaction request that fails with ``code``; ``message`` says why. A
    CoordinatorError, so the runtime treats a refused change in a background task as an
    answer, not as a crash."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(ErrorCode(code), message or "")

    def __repr__(self) -> str:
        return f"TxnError({self.code.name}, {self.message!r})"


def for_version(api: int, version: int, code: int) -> ErrorCode:
    """``code`` as version ``version`` of ``api`` may carry it."""
    error = ErrorCode(code)
    if error is ErrorCode.producer_fenced and version < _FENCED_SINCE.get(ApiKey(api), 0):
        return ErrorCode.invalid_producer_epoch
    return error
