"""Fetch (key 1), versions 4-16, for consumers.

Reads whole batches from each partition's log (bytes straight from the segment files, never
re-encoded), up to ``partition_max_bytes`` per partition and ``max_bytes`` in all, always at
least one batch for the first partition with data so progress is possible (KIP-74). With fewer
than ``min_bytes`` available the request waits in the purgatory, keyed by its partitions, until
an append wakes it or ``max_wait_ms`` passes (long polling; no timer polls).

read_uncommitted reads up to the high watermark; read_committed up to the last stable offset,
with the aborted transactions of the range. v13+ names topics by id (UNKNOWN_TOPIC_ID for ids
we do not know). Leader epochs in the request are checked (FENCED_LEADER_EPOCH /
UNKNOWN_LEADER_EPOCH).

Fetch sessions (KIP-227) are not kept: every answer has session id 0, which tells the client
to send full fetch requests; a request naming a session gets FETCH_SESSION_ID_NOT_FOUND.
Follower fetches (replica id >= 0) are served by the replication layer.
Left out: preferred read replicas (KIP-392) and diverging-epoch hints for consumers.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.encoders.fetch import encode_fetch_response
from ...protocol.entities import to_ms
from ...protocol.errors import ErrorCode
from ..dispatch import RawResponse, RequestContext, handler
from ..replica_manager import FetchTarget


def _targets(ctx: RequestContext, request: Any) -> list[tuple[str | uuid.UUID, list[FetchTarget]]]:
    manager = ctx.broker.replica_manager
    by_id = ctx.version >= 13
    plan = []
    for topic in request.topics:
        key: str | uuid.UUID = topic.topic_id if by_id else topic.topic
        name = manager.topic_name(key) if by_id else key
        targets = [
            FetchTarget(name, p.partition, p.fetch_offset, p.partition_max_bytes,
                        getattr(p, "current_leader_epoch", -1), unknown_id=name is None)
            for p in topic.partitions
        ]
        plan.append((key, targets))
    return plan


def _replica_id(request: Any) -> int:
    state = getattr(request, "replica_state", None)
    if state is not None:
        return state.replica_id
    return getattr(request, "replica_id", -1)


@handler(ApiKey.FETCH, 4, 16)
def handle_fetch(ctx: RequestContext, request: Any) -> Any:
    manager = ctx.broker.replica_manager
    if _replica_id(request) >= 0:
        return manager.follower_fetch(ctx, request)
    version = ctx.version
    if getattr(request, "session_id", 0) != 0:
        return RawResponse(encode_fetch_response(
            version, [], error_code=ErrorCode.fetch_session_id_not_found))
    plan = _targets(ctx, request)
    committed = getattr(request, "isolation_level", 0) == 1
    max_bytes = getattr(request, "max_bytes", 0x7FFFFFFF)
    read = manager.read_for_fetch(plan, max_bytes, committed)
    max_wait_ms = to_ms(request.max_wait)
    if read.total_bytes >= request.min_bytes or max_wait_ms <= 0 or read.has_error:
        return RawResponse(encode_fetch_response(version, read.topics))
    # Registered now, not when the long poll's task first runs: an append in between
    # (another connection's produce in the same loop turn) must wake it.
    keys = [(t.topic, t.partition) for _, targets in plan for t in targets]
    waiter = manager.purgatory.watch(keys)
    return _long_poll(ctx, plan, keys, waiter, max_bytes, committed, request.min_bytes,
                      max_wait_ms)


async def _long_poll(ctx: RequestContext, plan: list[Any], keys: list[Any], waiter: Any,
                     max_bytes: int, committed: bool, min_bytes: int,
                     max_wait_ms: int) -> RawResponse:
    manager = ctx.broker.replica_manager
    purgatory = manager.purgatory
    deadline = time.monotonic() + max_wait_ms / 1000
    while True:
        woke = await purgatory.wait_on(keys, waiter, deadline - time.monotonic())
        read = manager.read_for_fetch(plan, max_bytes, committed)
        if not woke or read.total_bytes >= min_bytes or read.has_error:
            return RawResponse(encode_fetch_response(ctx.version, read.topics))
        waiter = purgatory.watch(keys)  # in the same step as the read, for the same reason
