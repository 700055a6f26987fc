"""Consumer groups on the client side: membership, assignors, commits, group admin.

``Consumer.subscribe()`` makes a consumer a member of ``group.id``:

- ``group.protocol=classic`` (default): JoinGroup/SyncGroup rebalances with client-side
  assignors (:mod:`.assignors`: range, roundrobin, sticky, cooperative-sticky), heartbeats,
  static membership (:mod:`.classic`).
- ``group.protocol=consumer``: KIP-848's ConsumerGroupHeartbeat with assignment on the broker
  (``group.remote.assignor``) (:mod:`.kip848`).

Offsets are committed through the group coordinator (:mod:`.membership`, :mod:`.offsets`);
:mod:`.admin_ops` holds the admin client's group operations.

Classic membership of any protocol type runs on :mod:`.engine` (JoinGroup/SyncGroup/
Heartbeat/LeaveGroup, as the Java client's AbstractCoordinator): the consumer drives it from
``poll()``, :mod:`.background` from a task of its own (the schema registry's election).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .assignors import ASSIGNORS, Assignor
from .listener import RebalanceListener
from .membership import GroupMember
from .subscription import TopicSubscription
from .types import (
    CommitFailedError,
    MemberSubscription,
    OffsetAndMetadata,
    RebalanceInProgressError,
)

if TYPE_CHECKING:
    from ..consumer import Consumer


def make_membership(consumer: Consumer) -> GroupMember:
    """The membership ``group.protocol`` asks for."""
    if consumer.config["group.protocol"] == "consumer":
        from .kip848 import ConsumerProtocolMember

        return ConsumerProtocolMember(consumer)
    from .classic import ClassicMember

    return ClassicMember(consumer)


__all__ = [
    "ASSIGNORS", "Assignor", "CommitFailedError", "GroupMember", "MemberSubscription",
    "OffsetAndMetadata", "RebalanceInProgressError", "RebalanceListener", "TopicSubscription",
    "make_membership",
]
