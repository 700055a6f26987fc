"""Plain data of consumer groups: committed offsets, member subscriptions, errors."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from moldau.protocol.errors import ErrorCode

from ..errors import BrokerError
from ..types import TopicPartition


class OffsetAndMetadata(NamedTuple):
    """A committed offset: the next offset to read, an optional metadata string and the
    leader epoch of the last consumed record (-1 when unknown)."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    """What one member told the group in JoinGroup, as an assignor needs it.

    ``owned`` and ``generation`` are the partitions the member holds and the generation
    it got them in (for sticky assignors); ``instance_id`` is its ``group.instance.id``.
    """

    member_id: str
    topics: tuple[str, ...]
    owned: tuple[TopicPartition, ...] = ()
    generation: int = -1
    instance_id: str | None = None
    rack: str | None = None
    user_data: bytes | None = None

    def sort_key(self) -> tuple[int, str]:
        """Java's member order: static members by instance id first, then member ids."""
        if self.instance_id is not None:
            return (0, self.instance_id)
        return (1, self.member_id)


class CommitFailedError(BrokerError):
    """A commit the group refused: the member is no longer part of the generation
    (a rebalance happened, it was expelled after ``max.poll.interval.ms``, or it was
    fenced). Its partitions may already belong to another member; poll() to rejoin."""

    def __init__(self, code: ErrorCode | int, message: str = "", context: str = "") -> None:
        super().__init__(code, message or (
            "the group rebalanced or expelled this member since the records were polled; "
            "poll() again to rejoin (consider a shorter processing time per poll, a larger "
            "max.poll.interval.ms or a smaller max.poll.records)"
        ), context)


class RebalanceInProgressError(CommitFailedError):
    """A commit during a rebalance; poll() to complete the rebalance, then commit again."""

    def __init__(self, context: str = "commit") -> None:
        super().__init__(
            ErrorCode.rebalance_in_progress,
            "the group is rebalancing; call poll() to complete the rebalance and commit again",
            context,
        )

    @property
    def retriable(self) -> bool:  # type: ignore[override]
        return True
