"""An offset to commit, as OffsetCommit and TxnOffsetCommit carry it (shared by
:mod:`.offsets` and :mod:`.txn_offsets`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class OffsetToCommit:
    """One partition's offset in a commit request."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None


def metadata_too_large(metadata: str | None, limit: int) -> bool:
    """Whether a commit's metadata string exceeds ``offset.metadata.max.bytes``."""
    return metadata is not None and len(metadata) > limit
