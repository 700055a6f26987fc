"""DescribeCluster (key 60), versions 0-2.

Answers the cluster id, the controller id and the brokers with their endpoint for the
listener the request arrived on (brokers without that listener are left out, exactly as
Metadata does — the list comes from ``metadata.broker_entries``). The controller id is the
active controller's when it has an endpoint on this listener, else this broker's, which
forwards admin requests to it (``metadata.reported_controller``, as Metadata). Authorized
operations are "everything" when asked for (no ACLs yet), else Kafka's "not requested" value.

v1 ``endpoint_type``: 1 (brokers) lists the brokers; 2 (controllers) lists this node, which
is broker and controller in one process, with its endpoint on the request's listener. Other
values answer UNSUPPORTED_ENDPOINT_TYPE. v2 ``include_fenced_brokers`` adds fenced brokers
with ``is_fenced`` set.

Left out: ACL checks; a separate controller listener (controllers are reached on the
listener the request used).
"""

from __future__ import annotations

from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ..dispatch import RequestContext, handler
from .metadata import (
    _CLUSTER_OPERATIONS,
    _NOT_REQUESTED,
    broker_entries,
    reported_controller,
)

ENDPOINT_BROKERS = 1
ENDPOINT_CONTROLLERS = 2


def _fenced_entries(ctx: RequestContext) -> list[dict[str, Any]]:
    entries = []
    for registration in sorted(ctx.broker.image.brokers.values(), key=lambda b: b.broker_id):
        endpoint = registration.endpoint(ctx.listener) if registration.fenced else None
        if endpoint is not None:
            entries.append({"broker_id": registration.broker_id, "host": endpoint.host,
                            "port": endpoint.port, "rack": registration.rack,
                            "is_fenced": True})
    return entries


@handler(ApiKey.DESCRIBE_CLUSTER, 0, 2)
def handle_describe_cluster(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    controller_id = reported_controller(broker.image, broker.node_id, ctx.listener)
    endpoint_type = getattr(request, "endpoint_type", ENDPOINT_BROKERS)
    answer: dict[str, Any] = {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "endpoint_type": endpoint_type,
        "cluster_id": broker.cluster_id,
        "controller_id": controller_id,
        "brokers": [],
        "cluster_authorized_operations": (_CLUSTER_OPERATIONS
                                          if request.include_cluster_authorized_operations
                                          else _NOT_REQUESTED),
    }
    if endpoint_type not in (ENDPOINT_BROKERS, ENDPOINT_CONTROLLERS):
        answer["error_code"] = ErrorCode.unsupported_endpoint_type
        answer["error_message"] = (f"Endpoint type {endpoint_type} is not supported: use 1 "
                                   f"(brokers) or 2 (controllers)")
        return ctx.respond(answer)
    live = [{"broker_id": b["node_id"], "host": b["host"], "port": b["port"],
             "rack": b["rack"], "is_fenced": False}
            for b in broker_entries(broker.image, ctx.listener)]
    if endpoint_type == ENDPOINT_CONTROLLERS:
        answer["brokers"] = [b for b in live if b["broker_id"] == controller_id]
    else:
        answer["brokers"] = live
        if getattr(request, "include_fenced_brokers", False):
            answer["brokers"] = sorted(live + _fenced_entries(ctx),
                                       key=lambda b: b["broker_id"])
    return ctx.respond(answer)
