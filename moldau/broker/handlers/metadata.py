"""Metadata (key 3), versions 0-13.

Brokers are reported with their endpoint for the listener the request arrived on; brokers that
lack that listener are left out (Kafka's behaviour, seed 001). A partition whose leader has no
endpoint on this listener answers LISTENER_NOT_FOUND (v6+) or LEADER_NOT_AVAILABLE, one
without a live leader (none elected, or its broker is gone) LEADER_NOT_AVAILABLE, with leader
-1; replicas whose broker is not alive are listed as offline replicas. v0 lists only the
replicas and ISR members reachable on this listener and answers REPLICA_NOT_AVAILABLE when
some are left out, as Kafka does. The controller id is the image's active controller when it
has an endpoint on this listener; when it has none, this broker's id (``reported_controller``).
Kafka's ZooKeeper-mode brokers report the unreachable id, and the Java admin client then
waits for a controller it can never reach; Moldau's brokers forward admin requests to the
controller, so, as KRaft-mode Kafka reports a live broker as the controller for the same
reason, a client on any listener can create topics.

A null topic list (or an empty one at v0) means all topics. Unknown topics are created when
``auto.create.topics.enable`` is on and the request allows it (always below v4), with
``num.partitions`` and ``default.replication.factor``; the answer waits for the creation, so
it already carries the new topic's partitions (only such a request waits: the others are
answered at once), but at most ``AUTO_CREATE_WAIT_S`` (5 s, ``services.py``): a creation
still under way then (a busy or failing-over controller) goes on in the background and the
topic is answered LEADER_NOT_AVAILABLE, which clients retry; asking again joins the same
creation. A topic whose creation failed on this broker's
storage (no disk space or file descriptor left) is answered LEADER_NOT_AVAILABLE, what Kafka
answers while an auto-created topic is not ready: clients retry, and the broker's log says
why. So is a topic created through the controller of another broker whose records have not
reached this broker's image yet (a cluster). Topics can be asked for by id (v12+; v10-11
carry the field but cannot use it: a request naming a topic by id or without a name gets
INVALID_REQUEST for every topic, as from Kafka); ids are stable, stored in the metadata log.

Authorized operations are reported as "everything" when asked for (no ACLs yet).
Left out: ACL checks, and the topic-level ``error_code`` 13 of v13's top level stays NONE.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ..dispatch import RequestContext, handler
from ..metadata.image import MetadataImage
from ..metadata.validation import INTERNAL_TOPICS, validate_topic_name

_NOT_REQUESTED = -(2**31)
# READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS
_TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
_CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12, 13))
_ZERO_UUID = uuid.UUID(int=0)


def broker_entries(image: MetadataImage, listener: str) -> list[dict[str, Any]]:
    """Live brokers with their endpoint on ``listener`` (brokers without it are omitted)."""
    entries = []
    for registration in image.live_brokers():
        endpoint = registration.endpoint(listener)
        if endpoint is not None:
            entries.append({"node_id": registration.broker_id, "host": endpoint.host,
                            "port": endpoint.port, "rack": registration.rack})
    return entries


def reported_controller(image: MetadataImage, node_id: int, listener: str) -> int:
    """The controller id Metadata and DescribeCluster report on ``listener``: the active
    controller when a client can reach it there, else this broker (which got the request on
    that listener and forwards admin requests to the controller); -1 while none is known."""
    controller = image.controller_id
    if controller < 0:
        return -1
    registration = image.brokers.get(controller)
    if registration is not None and registration.endpoint(listener) is not None:
        return controller
    return node_id


def leader_endpoints(image: MetadataImage, leaders: Iterable[int],
                     listener: str) -> list[tuple[int, str, int, str | None]]:
    """KIP-951 ``NodeEndpoints`` of Produce / Fetch answers: (node id, host, port, rack) of
    each live broker among ``leaders`` with its endpoint on ``listener`` (others are left out,
    as from Metadata)."""
    nodes = []
    for broker_id in sorted(set(leaders)):
        registration = image.brokers.get(broker_id)
        if registration is None or registration.fenced:
            continue
        endpoint = registration.endpoint(listener)
        if endpoint is not None:
            nodes.append((broker_id, endpoint.host, endpoint.port, registration.rack))
    return nodes


def topic_entry(image: MetadataImage, name: str, listener: str, version: int,
                with_operations: bool) -> dict[str, Any]:
    topic = image.topics_by_name[name]
    reachable = {b["node_id"] for b in broker_entries(image, listener)}
    live = {b.broker_id for b in image.live_brokers()}
    partitions = []
    for p in sorted(topic.partitions):
        state = topic.partitions[p]
        error = ErrorCode.none
        replicas, isr = state.replicas, state.isr
        if state.leader not in live:
            error = ErrorCode.leader_not_available
        elif state.leader not in reachable:
            error = (ErrorCode.listener_not_found if version >= 6
                     else ErrorCode.leader_not_available)
        elif version == 0:
            # v0 lists only replicas a client can reach on this listener and says when some
            # are missing (Kafka's errorUnavailableEndpoints); later versions list them all.
            replicas = [r for r in state.replicas if r in reachable]
            isr = [r for r in state.isr if r in reachable]
            if len(replicas) < len(state.replicas) or len(isr) < len(state.isr):
                error = ErrorCode.replica_not_available
        partitions.append({
            "error_code": error,
            "partition_index": p,
            "leader_id": state.leader if error in (ErrorCode.none,
                                                   ErrorCode.replica_not_available) else -1,
            "leader_epoch": state.leader_epoch,
            "replica_nodes": replicas,
            "isr_nodes": isr,
            "offline_replicas": [r for r in state.replicas if r not in live],
        })
    return {
        "error_code": ErrorCode.none,
        "name": name,
        "topic_id": topic.topic_id,
        "is_internal": name in INTERNAL_TOPICS,
        "partitions": partitions,
        "topic_authorized_operations": _TOPIC_OPERATIONS if with_operations else _NOT_REQUESTED,
    }


def _error_entry(error: ErrorCode, name: str | None, topic_id: uuid.UUID | None) -> dict[str, Any]:
    return {"error_code": error, "name": name, "topic_id": topic_id or _ZERO_UUID,
            "is_internal": False, "partitions": [],
            "topic_authorized_operations": _NOT_REQUESTED}


def _refused(names: list[tuple[str | None, uuid.UUID | None]]) -> dict[str, Any]:
    """Kafka's answer to a v10-11 request naming a topic by id (or by no name): those
    versions cannot carry ids, so KafkaApis throws InvalidRequestException and
    MetadataRequest.getErrorResponse answers INVALID_REQUEST for every topic asked for, a
    null name as "" (the response's name is not nullable before v12), and no brokers."""
    return {"throttle_time": 0, "brokers": [], "cluster_id": None, "controller_id": -1,
            "topics": [_error_entry(ErrorCode.invalid_request, name or "", topic_id)
                       for name, topic_id in names],
            "cluster_authorized_operations": _NOT_REQUESTED, "error_code": ErrorCode.none}


@handler(ApiKey.METADATA, 0, 13)
def handle_metadata(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    image = broker.image
    version = ctx.version
    requested = request.topics
    if requested is None or (version == 0 and not requested):
        names: list[tuple[str | None, uuid.UUID | None]] = [
            (name, None) for name in sorted(image.topics_by_name)
        ]
    else:
        names = [(t.name, getattr(t, "topic_id", None)) for t in requested]
        if version < 12 and any(name is None or topic_id not in (None, _ZERO_UUID)
                                for name, topic_id in names):
            return ctx.respond(_refused(names))
    allow_create = broker.config["auto.create.topics.enable"] and (
        version < 4 or request.allow_auto_topic_creation
    )
    to_create = [
        name for name, _ in names
        if name is not None and name not in image.topics_by_name
        and validate_topic_name(name) is None and allow_create
        and name not in INTERNAL_TOPICS
    ]
    if to_create:
        return _create_then_answer(ctx, request, names, to_create)
    return _answer(ctx, request, names, {})


async def _create_then_answer(ctx: RequestContext, request: Any,
                              names: list[tuple[str | None, uuid.UUID | None]],
                              to_create: list[str]) -> Any:
    failed = await ctx.broker.auto_create_topics(to_create)
    # Created through another broker's controller, a topic reaches this broker's image a
    # moment later: until then it is "being created", as Kafka answers.
    pending = {name: ErrorCode.leader_not_available for name in to_create
               if name not in failed and name not in ctx.broker.image.topics_by_name}
    return _answer(ctx, request, names, {**failed, **pending})


def _answer(ctx: RequestContext, request: Any, names: list[tuple[str | None, uuid.UUID | None]],
            failed: dict[str, ErrorCode]) -> Any:
    broker = ctx.broker
    image = broker.image
    version = ctx.version
    with_ops = bool(getattr(request, "include_topic_authorized_operations", False))
    topics = []
    for name, topic_id in names:
        if name is None:
            if topic_id is None or topic_id == _ZERO_UUID:
                topics.append(_error_entry(ErrorCode.invalid_request, None, topic_id))
                continue
            topic = image.topics_by_id.get(topic_id)
            if topic is None:
                topics.append(_error_entry(ErrorCode.unknown_topic_id, None, topic_id))
                continue
            name = topic.name
        if name in image.topics_by_name:
            topics.append(topic_entry(image, name, ctx.listener, version, with_ops))
        elif validate_topic_name(name) is not None:
            topics.append(_error_entry(ErrorCode.invalid_topic_exception, name, None))
        elif failed.get(name) in (ErrorCode.kafka_storage_error,
                                  ErrorCode.leader_not_available):
            topics.append(_error_entry(ErrorCode.leader_not_available, name, None))
        else:
            topics.append(_error_entry(ErrorCode.unknown_topic_or_partition, name, None))
    cluster_ops = (_CLUSTER_OPERATIONS
                   if getattr(request, "include_cluster_authorized_operations", False)
                   else _NOT_REQUESTED)
    return ctx.respond({
        "throttle_time": 0,
        "brokers": broker_entries(image, ctx.listener),
        "cluster_id": broker.cluster_id,
        "controller_id": reported_controller(image, broker.node_id, ctx.listener),
        "topics": topics,
        "cluster_authorized_operations": cluster_ops,
        "error_code": ErrorCode.none,
    })
