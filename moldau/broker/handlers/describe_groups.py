"""DescribeGroups (key 15), versions 0-5.

State, protocol type, selected protocol and members (id, ``group.instance.id`` v4+, client id,
host, and in a Stable group each member's subscription metadata and assignment) of classic
groups; KIP-848 groups are described in the same shape (see
:mod:`moldau.broker.group.admin`). Unknown groups are reported as Dead with no error (Kafka's
behaviour before v6). v3+ reports authorized operations when asked (no ACLs: all of them).

Left out: v6 (GROUP_ID_NOT_FOUND for unknown groups).
"""

from __future__ import annotations

from typing import Any

from ...protocol.api_keys import ApiKey
from ..dispatch import RequestContext, answer_each, handler
from ..group.errors import GroupError
from ..group.service import coordinator_of

_NOT_REQUESTED = -(2**31)
# READ, DELETE, DESCRIBE: the operations Kafka defines on a group resource.
GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)


@handler(ApiKey.DESCRIBE_GROUPS, 0, 5)
def handle_describe_groups(ctx: RequestContext, request: Any) -> Any:
    with_ops = bool(getattr(request, "include_authorized_operations", False))

    def describe(group_id: str) -> dict[str, Any]:
        try:
            coordinator = coordinator_of(ctx.broker)
            shard = coordinator.shard_of_group(group_id)
            entry = coordinator.admin.describe(shard, group_id)
        except GroupError as exc:
            entry = {"error_code": exc.code, "group_id": group_id, "group_state": "",
                     "protocol_type": "", "protocol_data": "", "members": []}
        entry["authorized_operations"] = GROUP_OPERATIONS if with_ops else _NOT_REQUESTED
        return entry

    groups = answer_each(request.groups, describe)
    return ctx.respond({"throttle_time": 0, "groups": groups})
