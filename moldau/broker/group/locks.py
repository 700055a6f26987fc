"""One writer at a time per group: the coordinator runtime's :class:`KeyLocks` keyed by group
id (kept under its old name until every caller moves)."""

from __future__ import annotations

from ..coordinator.locks import KeyLocks

GroupLocks = KeyLocks

__all__ = ["GroupLocks"]
