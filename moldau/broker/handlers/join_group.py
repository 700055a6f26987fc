"""JoinGroup (key 11), versions 0-7.

The classic rebalance protocol's join (see :mod:`moldau.broker.group.classic_protocol`): v4+
first joins without a member id get MEMBER_ID_REQUIRED with the id to use (KIP-394); v5+
static members (``group.instance.id``, KIP-345) keep their partitions across restarts and fence
an older instance with FENCED_INSTANCE_ID. Session timeouts outside
``group.min/max.session.timeout.ms`` get INVALID_SESSION_TIMEOUT; a full group gets
GROUP_MAX_SIZE_REACHED. The answer waits (the connection parks) until the rebalance completes.
v0 has no rebalance timeout: the session timeout serves as both.

Left out: v8+ (join reasons, KIP-814 skip-assignment).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.entities import to_ms
from ..dispatch import RequestContext, handler
from ..group.classic import JoinResult
from ..group.classic_protocol import JoinRequest
from ..group.errors import GroupError
from ..group.service import coordinator_of

log = logging.getLogger(__name__)


def client_host(ctx: RequestContext) -> str:
    """The member's host as Kafka reports it (``InetAddress.toString``: "/1.2.3.4")."""
    return f"/{ctx.client_host}"


@handler(ApiKey.JOIN_GROUP, 0, 7)
async def handle_join_group(ctx: RequestContext, request: Any) -> Any:
    session = to_ms(request.session_timeout)
    rebalance = to_ms(request.rebalance_timeout) if ctx.version >= 1 else session
    req = JoinRequest(
        group_id=request.group_id,
        member_id=request.member_id or "",
        group_instance_id=getattr(request, "group_instance_id", None),
        session_timeout_ms=session,
        rebalance_timeout_ms=rebalance if rebalance >= 0 else session,
        protocol_type=request.protocol_type,
        protocols=[(p.name, p.metadata) for p in request.protocols],
        client_id=ctx.header.client_id or "",
        client_host=client_host(ctx),
        require_known_member_id=ctx.version >= 4,
    )
    try:
        coordinator = coordinator_of(ctx.broker)
        shard = coordinator.shard_of_group(req.group_id)
        answer = coordinator.classic.join(shard, req)
    except GroupError as exc:
        answer = JoinResult(error=exc.code, member_id=req.member_id)
    if isinstance(answer, asyncio.Future):
        answer = await asyncio.shield(answer)
    log.debug("JoinGroup v%d of group %s from member %r (client %s): error %d, generation %d, "
              "member %r, leader %r", ctx.version, req.group_id, req.member_id, req.client_id,
              answer.error, answer.generation_id, answer.member_id, answer.leader)
    nullable = ctx.version >= 7
    return ctx.respond({
        "throttle_time": 0,
        "error_code": answer.error,
        "generation_id": answer.generation_id,
        "protocol_type": answer.protocol_type,
        "protocol_name": answer.protocol_name if nullable else (answer.protocol_name or ""),
        "leader": answer.leader,
        "member_id": answer.member_id,
        "members": [{"member_id": m, "group_instance_id": i, "metadata": meta}
                    for m, i, meta in answer.members],
    })
