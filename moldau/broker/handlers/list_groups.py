"""ListGroups (key 16), versions 0-5.

Every group this broker coordinates, with its protocol type, state (v4+) and type (v5+:
``classic`` or ``consumer``). v4 filters by state and v5 by type (both case-insensitive, empty =
all). COORDINATOR_LOAD_IN_PROGRESS while a ``__consumer_offsets`` partition is loading.
"""

from __future__ import annotations

from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ..dispatch import RequestContext, handler
from ..group.errors import GroupError
from ..group.service import coordinator_of


@handler(ApiKey.LIST_GROUPS, 0, 5)
def handle_list_groups(ctx: RequestContext, request: Any) -> Any:
    try:
        groups = coordinator_of(ctx.broker).admin.list(
            list(getattr(request, "states_filter", ())),
            list(getattr(request, "types_filter", ())))
        error = ErrorCode.none
    except GroupError as exc:
        groups, error = [], exc.code
    return ctx.respond({"throttle_time": 0, "error_code": error, "groups": groups})
