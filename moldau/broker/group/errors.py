"""The error the group coordinator raises to answer a request with a Kafka error code: the
coordinator runtime's (one type, so a failed write of the runtime answers group requests)."""

from __future__ import annotations

from ..coordinator.errors import CoordinatorError

GroupError = CoordinatorError

__all__ = ["GroupError"]
