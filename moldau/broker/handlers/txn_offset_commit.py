"""TxnOffsetCommit (key 28), versions 0-4.

A transactional producer commits a consumer group's offsets inside its transaction (after
AddOffsetsToTxn added the group's ``__consumer_offsets`` partition to it). The group coordinator
verifies with the transaction coordinator that the partition is in the producer's ongoing
transaction (INVALID_TXN_STATE otherwise; PRODUCER_FENCED is answered INVALID_PRODUCER_EPOCH;
unreachable or busy transaction coordinators give COORDINATOR_NOT_AVAILABLE or
COORDINATOR_LOAD_IN_PROGRESS, which clients retry), validates the commit against the group
(v3+, KIP-447: generation, member id and group instance id → ILLEGAL_GENERATION,
UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID; v0-2 and generation -1 without a member commit for any
group, and create a simple group), writes the offsets as a transactional batch of the producer
(an older producer epoch gets INVALID_PRODUCER_EPOCH) and holds them pending: they become the
group's committed offsets when the transaction commits and are dropped when it aborts
(:mod:`moldau.broker.group.txn_offsets`). v4 may answer TRANSACTION_ABORTABLE.

As in OffsetCommit, partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION and are not
committed, metadata longer than ``offset.metadata.max.bytes`` gets OFFSET_METADATA_TOO_LARGE,
and an empty group id INVALID_GROUP_ID. Group-coordinator errors (NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE) go on every partition.

Left out: v5 (transactions V2, KIP-890 part 2: the epoch bump per transaction);
transactional-id authorization (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ..dispatch import RequestContext, handler
from ..group.errors import GroupError
from ..group.offsets import OffsetToCommit
from ..group.service import coordinator_of
from ..group.txn_offsets import TxnCommit
from .offset_commit import answer_offset_commit


@handler(ApiKey.TXN_OFFSET_COMMIT, 0, 4)
async def handle_txn_offset_commit(ctx: RequestContext, request: Any) -> Any:
    return await answer_offset_commit(ctx, request, lambda entries: _commit(ctx, request, entries))


async def _commit(ctx: RequestContext, request: Any, entries: list[OffsetToCommit]) -> list[int]:
    """The group coordinator's answer for ``entries`` (one error code each, in order)."""
    if not request.group_id:
        return [ErrorCode.invalid_group_id] * len(entries)
    commit = TxnCommit(
        transactional_id=request.transactional_id, group_id=request.group_id,
        producer_id=request.producer_id, producer_epoch=request.producer_epoch,
        generation_id=getattr(request, "generation_id", -1),
        member_id=getattr(request, "member_id", "") or "",
        group_instance_id=getattr(request, "group_instance_id", None),
        offsets=entries, version=ctx.version)
    try:
        coordinator = coordinator_of(ctx.broker)
        shard = coordinator.shard_of_group(request.group_id)
        return await coordinator.txn_offsets.commit(shard, commit, ctx.broker.txn_verifier)
    except GroupError as exc:
        return [exc.code] * len(entries)
