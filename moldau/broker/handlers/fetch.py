"""Fetch (key 1), versions 4-16, for consumers and follower replicas.

Reads whole batches from each partition's log (bytes straight from the segment files, never
re-encoded), up to ``partition_max_bytes`` per partition and ``max_bytes`` in all, always at
least one batch for the first partition with data so progress is possible (KIP-74). With fewer
than ``min_bytes`` available the request waits in the purgatory, keyed by its partitions, until
an append wakes it or ``max_wait_ms`` passes (long polling; no timer polls).

read_uncommitted reads up to the high watermark; read_committed up to the last stable offset
(the first offset of a transaction still open or whose marker is not yet below the high
watermark), with the aborted transactions overlapping the batches returned, from the segments'
``.txnindex`` (``Partition.read``): the client drops their batches and every control batch.
v13+ names topics by id (UNKNOWN_TOPIC_ID for ids
we do not know). Leader epochs in the request are checked (FENCED_LEADER_EPOCH /
UNKNOWN_LEADER_EPOCH). A partition this broker does not lead (another broker does, none does,
or this broker is fenced) answers NOT_LEADER_OR_FOLLOWER; with it and with FENCED_LEADER_EPOCH,
v12+ carries the partition's current leader and epoch from the metadata image, and v16 that
leader's endpoint on the request's listener (KIP-951), so the consumer redirects at once.

Fetch sessions (KIP-227) are not kept: every answer has session id 0, which tells the client
to send full fetch requests; a request naming a session gets FETCH_SESSION_ID_NOT_FOUND.

Follower fetches (``replica_id >= 0``, in v15+ ``ReplicaState.ReplicaId``) from a broker that
is one of the partition's replicas, to the leader, read up to the log end offset (not the high
watermark), record the follower's progress and may advance the high watermark, which wakes
acks=all produces and consumers' long polls (:mod:`moldau.broker.replication.leader`). They
long-poll like consumers (``replica.fetch.wait.max.ms``), woken by appends.

A broker that is NOT among a partition's replicas gets Kafka's answer
(``Partition.followerReplicaOrThrow``): UNKNOWN_LEADER_EPOCH when the request carries
``current_leader_epoch`` (the pair (replica, epoch) is not, or not yet, valid: the follower
retries after refreshing metadata) and NOT_LEADER_OR_FOLLOWER when it does not. The checks
Kafka makes first keep their order and codes: UNKNOWN_TOPIC_ID / UNKNOWN_TOPIC_OR_PARTITION
for partitions the metadata does not know, FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH for a
stale or future epoch, and NOT_LEADER_OR_FOLLOWER where this broker does not lead the
partition. Error answers carry no data and no offsets; every code is retriable, so a
misconfigured follower backs off instead of failing hard.
Consumers' fetches v11+ may be served by a follower, up to its high watermark, and the
leader with ``replica.selector.class`` set may answer with a ``preferred_read_replica`` in the
consumer's ``rack_id`` instead of records (KIP-392; :mod:`moldau.broker.replication.read_replica`).
Left out: diverging-epoch answers (``last_fetched_epoch``,
for consumers and followers alike: followers truncate with OffsetsForLeaderEpoch before they
fetch under a new leader epoch instead, KIP-101/279).
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable
from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.encoders.fetch import encode_fetch_response
from ...protocol.entities import to_ms
from ...protocol.errors import ErrorCode
from ..dispatch import RawResponse, RequestContext, handler
from ..replica_manager import FetchRead, FetchTarget, ReplicaManager
from ..replication.leader import (
    has_new_high_watermark,
    note_sent_high_watermarks,
    read_for_follower,
    record_follower_fetches,
)
from ..replication.read_replica import (
    ConsumerFetch,
    read_for_consumer,
    redirects,
    selector_for,
)
from .metadata import leader_endpoints

# kio reads the all-zero topic id as None; Kafka looks it up like any other id (no topic has
# it) and answers UNKNOWN_TOPIC_ID, echoing the zero id.
_ZERO_UUID = uuid.UUID(int=0)


def _targets(ctx: RequestContext, request: Any) -> list[tuple[str | uuid.UUID, list[FetchTarget]]]:
    manager = ctx.broker.replica_manager
    by_id = ctx.version >= 13
    plan = []
    for topic in request.topics:
        key: str | uuid.UUID = (topic.topic_id or _ZERO_UUID) if by_id else topic.topic
        name = manager.topic_name(key) if by_id else key
        targets = [
            FetchTarget(name, p.partition, p.fetch_offset, p.partition_max_bytes,
                        getattr(p, "current_leader_epoch", -1), unknown_id=name is None,
                        log_start_offset=getattr(p, "log_start_offset", -1))
            for p in topic.partitions
        ]
        plan.append((key, targets))
    return plan


def _replica_id(request: Any) -> int:
    state = getattr(request, "replica_state", None)
    if state is not None:
        return state.replica_id
    return getattr(request, "replica_id", -1)


def _non_replica_error(manager: ReplicaManager, target: FetchTarget) -> ErrorCode:
    """The error of one partition of a fetch from a broker that is not its replica."""
    if target.unknown_id:
        return ErrorCode.unknown_topic_id
    topic = manager.image.topics_by_name.get(target.topic)
    if topic is None or target.partition not in topic.partitions:
        return ErrorCode.unknown_topic_or_partition
    partition = manager.get(target.topic, target.partition)
    if partition is None:
        return ErrorCode.not_leader_or_follower
    error = partition.check_leader_epoch(target.current_leader_epoch)
    if error != ErrorCode.none:
        return error
    if not partition.is_leader or target.current_leader_epoch < 0:
        return ErrorCode.not_leader_or_follower
    return ErrorCode.unknown_leader_epoch


def _follower_fetch(ctx: RequestContext, request: Any, replica_id: int) -> Any:
    manager = ctx.broker.replica_manager
    plan = _targets(ctx, request)
    record_follower_fetches(manager, replica_id, plan)
    max_bytes = getattr(request, "max_bytes", 0x7FFFFFFF)

    def refuse(target: FetchTarget) -> ErrorCode:
        return _non_replica_error(manager, target)

    def read() -> FetchRead:
        return read_for_follower(manager, replica_id, plan, max_bytes, refuse)

    prompt = ctx.broker.config["replica.selector.class"] is not None

    def done(answer: FetchRead) -> bool:
        if answer.total_bytes >= request.min_bytes or answer.has_error:
            return True
        return prompt and has_new_high_watermark(manager, replica_id, plan, answer)

    def sent(answer: FetchRead) -> None:
        if prompt:
            note_sent_high_watermarks(manager, replica_id, plan, answer)

    first = read()
    max_wait_ms = to_ms(request.max_wait)
    if max_wait_ms <= 0 or done(first):
        sent(first)
        return RawResponse(encode_fetch_response(ctx.version, first.topics))
    keys = [(t.topic, t.partition) for _, targets in plan for t in targets]
    waiter = manager.purgatory.watch(keys)
    return _long_poll(ctx, keys, waiter, read, done, max_wait_ms, sent)


def _respond(ctx: RequestContext, topics: list[Any]) -> RawResponse:
    """The answer; v16 adds the endpoints of the leaders the partitions' hints name."""
    nodes: list[Any] = []
    if ctx.version >= 16:
        leaders = [p.current_leader[0] for _, partitions in topics for p in partitions
                   if p.current_leader is not None]
        if leaders:
            nodes = leader_endpoints(ctx.broker.image, leaders, ctx.listener)
    return RawResponse(encode_fetch_response(ctx.version, topics, node_endpoints=nodes))


@handler(ApiKey.FETCH, 4, 16)
def handle_fetch(ctx: RequestContext, request: Any) -> Any:
    manager = ctx.broker.replica_manager
    version = ctx.version
    if getattr(request, "session_id", 0) != 0:
        return RawResponse(encode_fetch_response(
            version, [], error_code=ErrorCode.fetch_session_id_not_found))
    replica_id = _replica_id(request)
    if replica_id >= 0:
        return _follower_fetch(ctx, request, replica_id)
    plan = _targets(ctx, request)
    consumer = ConsumerFetch(
        version, getattr(request, "rack_id", "") or "", ctx.listener,
        getattr(request, "isolation_level", 0) == 1,
        selector_for(ctx.broker.config["replica.selector.class"]))
    max_bytes = getattr(request, "max_bytes", 0x7FFFFFFF)

    read = read_for_consumer(manager, plan, max_bytes, consumer, manager.time_ms())
    max_wait_ms = to_ms(request.max_wait)
    if read.total_bytes >= request.min_bytes or max_wait_ms <= 0 or read.has_error \
            or redirects(read):
        return _respond(ctx, read.topics)
    parked = dataclasses.replace(consumer, leader_only=frozenset(
        (t.topic, t.partition) for _, targets in plan for t in targets
        if t.topic is not None and manager.leads(t.topic, t.partition)))

    def read_again() -> FetchRead:
        return read_for_consumer(manager, plan, max_bytes, parked, manager.time_ms())

    # Registered now, not when the long poll's task first runs: an append in between
    # (another connection's produce in the same loop turn) must wake it.
    keys = [(t.topic, t.partition) for _, targets in plan for t in targets]
    waiter = manager.purgatory.watch(keys)
    return _long_poll(ctx, keys, waiter, read_again,
                      lambda r: r.total_bytes >= request.min_bytes or r.has_error
                      or redirects(r), max_wait_ms)


async def _long_poll(ctx: RequestContext, keys: list[Any], waiter: Any,
                     read_again: Callable[[], FetchRead], done: Callable[[FetchRead], bool],
                     max_wait_ms: int,
                     sent: Callable[[FetchRead], None] | None = None) -> RawResponse:
    """Wait for an event on ``keys`` (appends, high watermark moves, leadership changes),
    read again, and answer once ``done`` says so or ``max_wait_ms`` passed."""
    purgatory = ctx.broker.replica_manager.purgatory
    deadline = time.monotonic() + max_wait_ms / 1000
    while True:
        woke = await purgatory.wait_on(keys, waiter, deadline - time.monotonic())
        read = read_again()
        if not woke or done(read):
            if sent is not None:
                sent(read)
            return _respond(ctx, read.topics)
        waiter = purgatory.watch(keys)  # in the same step as the read, for the same reason
