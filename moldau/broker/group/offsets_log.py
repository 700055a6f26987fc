"""The persistence seam of the group coordinator: the coordinator runtime's
(:mod:`moldau.broker.coordinator.log`), under the names the group code and its tests use."""

from __future__ import annotations

from ..coordinator.log import (
    CoordinatorLog,
    CoordinatorLogError,
    MemoryCoordinatorLog,
    records_batch,
)

OffsetsLog = CoordinatorLog
OffsetsLogError = CoordinatorLogError
MemoryOffsetsLog = MemoryCoordinatorLog

__all__ = ["MemoryOffsetsLog", "OffsetsLog", "OffsetsLogError", "records_batch"]
