"""The consumer-group methods of :class:`~moldau.client.admin.AdminClient` (mixed in); the
work is done in :mod:`moldau.client.group.admin_ops`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .admin_types import GroupDescription, GroupListing, PartitionLag
from .errors import BrokerError
from .group import admin_ops
from .group.types import OffsetAndMetadata
from .types import TopicPartition


class GroupAdmin:
    """List, describe and delete groups; read, set and delete their offsets; lag."""

    async def list_groups(self, *, states: Iterable[str] | None = None,
                          types: Iterable[str] | None = None) -> list[GroupListing]:
        """Groups of every broker, optionally only those in the given states (Stable, Empty,
        PreparingRebalance, CompletingRebalance, Dead, or KIP-848's Assigning/Reconciling)
        or of the given types (classic, consumer)."""
        return await admin_ops.list_groups(self, states, types)

    async def describe_groups(self, group_ids: Iterable[str], *, raise_errors: bool = True
                              ) -> dict[str, GroupDescription | BrokerError]:
        """State, assignor and members (client id, host, subscription, decoded assignment)
        of each group; a group that does not exist is described as Dead."""
        return await admin_ops.describe_groups(self, group_ids, raise_errors)

    async def delete_groups(self, group_ids: Iterable[str], *, raise_errors: bool = True
                            ) -> dict[str, BrokerError | None]:
        """Delete empty groups with their committed offsets (NON_EMPTY_GROUP otherwise)."""
        return await admin_ops.delete_groups(self, group_ids, raise_errors)

    async def list_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None, *,
        require_stable: bool = False,
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """Committed offsets of a group: every committed partition, or the given ones
        (None where nothing is committed). ``require_stable``: wait (retrying
        UNSTABLE_OFFSET_COMMIT) while a transaction holds uncommitted offsets of them."""
        return await admin_ops.list_group_offsets(self, group_id, partitions, require_stable)

    async def alter_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, int | OffsetAndMetadata],
        *, raise_errors: bool = True,
    ) -> dict[TopicPartition, BrokerError | None]:
        """Set committed offsets, as ``kafka-consumer-groups --reset-offsets`` does: only for
        a group without active members (its consumers stopped)."""
        return await admin_ops.alter_group_offsets(self, group_id, offsets, raise_errors)

    async def delete_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition], *,
        raise_errors: bool = True,
    ) -> dict[TopicPartition, BrokerError | None]:
        """Delete committed offsets of partitions whose topics no member subscribes to."""
        return await admin_ops.delete_group_offsets(self, group_id, partitions, raise_errors)

    async def describe_group_lag(self, group_id: str) -> list[PartitionLag]:
        """Per partition: committed offset, log end offset, lag and the member reading it
        (what ``moldau groups --describe`` prints)."""
        return await admin_ops.describe_group_lag(self, group_id)
