"""An offset to commit, as OffsetCommit and TxnOffsetCommit carry it (shared by
:mod:`.offsets` and :mod:`.txn_offsets`)."""

from __future__ import annotations

from dataclasses import dataclass

from ...protocol.errors import ErrorCode
from .classic import ClassicGroup
from .errors import GroupError


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


def check_classic_member(group: ClassicGroup, generation: int, member_id: str,
                         instance_id: str | None) -> None:
    """An identified commit (OffsetCommit or TxnOffsetCommit) to a classic group: the static
    instance maps to ``member_id`` (FENCED_INSTANCE_ID), the member exists
    (UNKNOWN_MEMBER_ID) and the generation is the group's (ILLEGAL_GENERATION)."""
    if instance_id is not None:
        mapped = group.static_member_id(instance_id)
        if mapped is not None and mapped != member_id:
            raise GroupError(ErrorCode.fenced_instance_id)
    if member_id not in group.members:
        raise GroupError(ErrorCode.unknown_member_id)
    if generation != group.generation_id:
        raise GroupError(ErrorCode.illegal_generation,
                         f"generation {generation} is not the group's {group.generation_id}")
