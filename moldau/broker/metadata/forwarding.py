"""Metadata changes sent to the active controller from another broker:
:class:`ForwardingControllerChannel`.

A broker that is not the active controller implements :class:`~.channel.ControllerChannel` by
sending each change to the controller the image names (``MetadataImage.controller_id``), over
the listener named by ``inter.broker.listener.name``, with :mod:`moldau.wire`'s connection, and
mapping the answer back to the channel's results. Each change travels as the ordinary Kafka
admin request that asks for it: CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs,
IncrementalAlterConfigs, AllocateProducerIds (Kafka's broker-to-controller request for
producer-id blocks), AlterPartition (a leader's ISR changes, KIP-497), ElectLeaders and
AlterPartitionReassignments / ListPartitionReassignments (KIP-455).

Why ordinary admin requests and not Envelope (KIP-590, API 58), with which Kafka's brokers
forward a client's request as it came:

* Not every change has a client request to wrap. Topic auto-creation (Metadata),
  ``__consumer_offsets`` (FindCoordinator) and producer-id blocks are the broker's own
  changes; Kafka sends those as plain CreateTopics and AllocateProducerIds too
  (AutoTopicCreationManager, RPCProducerIdManager). One typed interface serves both.
* Envelope exists to carry the client's principal to the controller for authorization. Moldau
  has no principals or ACLs yet, so it would add an API to serve (and to keep away from
  clients) for nothing. When SASL and ACLs come, this class can wrap its requests in Envelope
  without changing a caller.
* The controller validates again with the same code, whichever broker the request reached:
  refusals come back with the controller's codes and messages, and the handler answers the
  client exactly as the controller's own handler would (``validate_only`` included).

The cost: the receiving broker re-encodes the request (admin requests are small and rare), and
the controller sees the broker, not the client, as the sender (client id
``broker-<id>-to-controller``).

A forwarded request is never to be forwarded again: a broker that gets one (recognised by its
client id, :func:`forwarded_by`) while it is not the active controller answers NOT_CONTROLLER
instead, so two brokers that briefly disagree about the controller cannot bounce a request
between them (the admin handlers ask :func:`misdirected`; a single node is always its own
controller, so the check never fires there).

This side takes NOT_CONTROLLER, like a lost or refused connection, as "the controller moved":
it drops the connection, waits ``retry_backoff_ms`` (or less, if the image names another
controller meanwhile) and sends the change again to whichever controller the image names, until
``request_timeout_ms`` (Kafka's ``controller.socket.timeout.ms``, 30 s) has passed. Then the
change is answered REQUEST_TIMED_OUT with the reason (no controller known, no endpoint on the
listener, the last connection error), which clients retry.

The image naming another controller also ends an attempt under way, as Kafka's
BrokerToControllerChannelManager disconnects from the old controller when the metadata names a
new one: a controller that was killed or frozen while the change waited for its answer is
left at once, not at the request timeout. And when the image names THIS broker (it was elected
while the change waited for a dead controller), the change is not this channel's to send:
:class:`ControllerIsLocal` tells the caller (:class:`~.selection.ActiveControllerChannel`) to
make it with the local controller.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ...protocol.api_keys import ApiKey, api_name
from ...protocol.errors import ErrorCode, KafkaError
from ...wire.connection import BrokerConnection
from ...wire.errors import ClientError, UnsupportedVersionError
from .channel import PRODUCER_ID_BLOCK, Outcome, TopicResult, TopicSpec
from .image import MetadataImage
from .isr_change import IsrChange, IsrChangeResult
from .reassignment import OngoingReassignment, ReassignmentRequest

log = logging.getLogger(__name__)

FORWARDED_CLIENT_ID_PREFIX = "broker-"
_FORWARDED_SUFFIX = "-to-controller"
_ZERO_UUID = uuid.UUID(int=0)
_T = TypeVar("_T")
# How often an attempt under way looks whether the image names another controller.
_WATCH_S = 0.05
# OP_SET and OP_DELETE of IncrementalAlterConfigs.
_SET, _DELETE = 0, 1


def forwarding_client_id(node_id: int) -> str:
    """The client id a broker's forwarded requests carry."""
    return f"{FORWARDED_CLIENT_ID_PREFIX}{node_id}{_FORWARDED_SUFFIX}"


def forwarded_by(client_id: str | None) -> int | None:
    """The id of the broker that forwarded a request with this client id, else None."""
    if not client_id or not client_id.startswith(FORWARDED_CLIENT_ID_PREFIX) \
            or not client_id.endswith(_FORWARDED_SUFFIX):
        return None
    middle = client_id[len(FORWARDED_CLIENT_ID_PREFIX):-len(_FORWARDED_SUFFIX)]
    return int(middle) if middle.isdigit() else None


def misdirected(client_id: str | None, controller_id: int, node_id: int) -> bool:
    """Whether a request is a forwarded one (by its client id) that reached a broker which
    is not the active controller: it must be answered NOT_CONTROLLER, never forwarded again
    (two brokers that briefly disagree about the controller would bounce it between them)."""
    return controller_id != node_id and forwarded_by(client_id) is not None


NOT_CONTROLLER_MESSAGE = ("This broker is not the active controller; the request was "
                          "forwarded to it by another broker, which will retry once its "
                          "metadata names the new one.")


@dataclass(frozen=True)
class ControllerPeer:
    """The active controller as this broker reaches it (a :class:`moldau.wire` peer)."""

    node_id: int
    host: str
    port: int
    listener: str

    def describe(self) -> str:
        return (f"the active controller (broker {self.node_id} at {self.host}:{self.port}, "
                f"listener {self.listener})")


class ControllerIsLocal(Exception):
    """The image names this broker the active controller: a change being forwarded is the
    local controller's to make (:class:`~.selection.ActiveControllerChannel` makes it there)."""


class _Retry(Exception):
    """This attempt failed in a way another attempt may not: the controller moved, or it
    could not be reached."""


class ForwardingControllerChannel:
    """A :class:`~.channel.ControllerChannel` for a broker that is not the active
    controller: every change is sent to the controller the image names."""

    def __init__(self, *, node_id: int, image: MetadataImage, listener: str,
                 request_timeout_ms: int = 30_000, retry_backoff_ms: int = 100,
                 connect: Callable[[ControllerPeer, str, int], Awaitable[BrokerConnection]]
                 | None = None) -> None:
        self.node_id = node_id
        self.image = image
        self.listener = listener
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.client_id = forwarding_client_id(node_id)
        self._connect = connect or self._open
        self._conn: BrokerConnection | None = None
        self._peer: ControllerPeer | None = None
        self._connecting = asyncio.Lock()

    # --- the channel ---------------------------------------------------------------------
    async def create_topics(self, specs: Sequence[TopicSpec], *,
                            validate_only: bool = False) -> list[TopicResult]:
        first: dict[str, TopicSpec] = {}
        for spec in specs:
            first.setdefault(spec.name, spec)
        body = {"topics": [_topic(spec) for spec in first.values()],
                "timeout": self.request_timeout_ms, "validate_only": validate_only}
        try:
            answer = await self._send(ApiKey.CREATE_TOPICS, body, lambda r: [
                t.error_code for t in r.topics])
        except KafkaError as exc:
            return [TopicResult(spec.name, exc.code, exc.message) for spec in specs]
        by_name = {t.name: t for t in answer.topics}
        results = []
        seen: set[str] = set()
        for spec in specs:
            topic = by_name.get(spec.name)
            if spec.name in seen:  # as the local controller answers a name given twice
                results.append(TopicResult(spec.name, ErrorCode.topic_already_exists,
                                           f"Topic '{spec.name}' already exists."))
            elif topic is None:
                results.append(TopicResult(spec.name, ErrorCode.unknown_server_error,
                                           "the controller's answer left this topic out"))
            elif topic.error_code != ErrorCode.none:
                results.append(TopicResult(spec.name, ErrorCode(topic.error_code),
                                           topic.error_message))
            else:
                topic_id = getattr(topic, "topic_id", None)
                results.append(TopicResult(
                    spec.name, ErrorCode.none, None,
                    topic_id if topic_id not in (None, _ZERO_UUID) else None,
                    topic.num_partitions, topic.replication_factor))
            seen.add(spec.name)
        return results

    async def delete_topics(self, names: Sequence[str]) -> dict[str, Outcome]:
        unique = list(dict.fromkeys(names))
        body = {"topics": [{"name": n, "topic_id": _ZERO_UUID} for n in unique],
                "timeout": self.request_timeout_ms}
        try:
            answer = await self._send(ApiKey.DELETE_TOPICS, body, lambda r: [
                t.error_code for t in r.responses])
        except KafkaError as exc:
            return {name: (exc.code, exc.message) for name in unique}
        results: dict[str, Outcome] = {
            t.name: (ErrorCode(t.error_code), t.error_message) for t in answer.responses}
        for name in unique:
            results.setdefault(name, (ErrorCode.unknown_server_error,
                                      "the controller's answer left this topic out"))
        return results

    async def create_partitions(self, name: str, total: int,
                                assignments: list[list[int]] | None, *,
                                validate_only: bool = False) -> Outcome:
        body = {"topics": [{"name": name, "count": total, "assignments": (
                    None if assignments is None
                    else [{"broker_ids": list(a)} for a in assignments])}],
                "timeout": self.request_timeout_ms, "validate_only": validate_only}
        try:
            answer = await self._send(ApiKey.CREATE_PARTITIONS, body, lambda r: [
                t.error_code for t in r.results])
        except KafkaError as exc:
            return exc.code, exc.message
        return _only(answer.results)

    async def alter_configs(self, resource_type: int, name: str,
                            changes: Mapping[str, str | None], *, replace: bool = False,
                            validate_only: bool = False) -> Outcome:
        if not replace:
            ops = [(key, _SET if value is not None else _DELETE, value)
                   for key, value in changes.items()]
            return await self.incremental_alter_configs(resource_type, name, ops,
                                                        validate_only=validate_only)
        body = {"resources": [{"resource_type": resource_type, "resource_name": name,
                               "configs": [{"name": k, "value": v}
                                           for k, v in changes.items()]}],
                "validate_only": validate_only}
        try:
            answer = await self._send(ApiKey.ALTER_CONFIGS, body, lambda r: [
                t.error_code for t in r.responses])
        except KafkaError as exc:
            return exc.code, exc.message
        return _only(answer.responses)

    async def incremental_alter_configs(self, resource_type: int, name: str,
                                        ops: Sequence[tuple[str, int, str | None]], *,
                                        validate_only: bool = False) -> Outcome:
        body = {"resources": [{"resource_type": resource_type, "resource_name": name,
                               "configs": [{"name": k, "config_operation": op, "value": v}
                                           for k, op, v in ops]}],
                "validate_only": validate_only}
        try:
            answer = await self._send(ApiKey.INCREMENTAL_ALTER_CONFIGS, body, lambda r: [
                t.error_code for t in r.responses])
        except KafkaError as exc:
            return exc.code, exc.message
        return _only(answer.responses)

    async def allocate_producer_ids(self, broker_id: int,
                                    count: int = PRODUCER_ID_BLOCK) -> range:
        # The controller decides the size of a block (Kafka's is 1000 too); ``count`` is what
        # the local controller would hand out, and a block of another size is taken as is.
        answer = await self._send(ApiKey.ALLOCATE_PRODUCER_IDS,
                                  {"broker_id": broker_id, "broker_epoch": -1},
                                  lambda r: [r.error_code])
        if answer.error_code != ErrorCode.none:
            raise KafkaError(ErrorCode(answer.error_code),
                             f"the active controller refused a block of producer ids: "
                             f"{ErrorCode(answer.error_code).name.upper()}")
        return range(answer.producer_id_start, answer.producer_id_start + answer.producer_id_len)

    async def alter_partition(self, broker_id: int, changes: Sequence[IsrChange]
                              ) -> list[IsrChangeResult]:
        by_topic: dict[uuid.UUID, list[IsrChange]] = {}
        for change in changes:
            by_topic.setdefault(change.topic_id, []).append(change)

        def body(version: int) -> dict[str, Any]:
            # v3 carries broker epochs with the ISR (KIP-903); -1: not checked.
            def isr(change: IsrChange) -> dict[str, Any]:
                if version >= 3:
                    return {"new_isr_with_epochs": [{"broker_id": b, "broker_epoch": -1}
                                                    for b in change.new_isr]}
                return {"new_isr": list(change.new_isr)}

            return {"broker_id": broker_id, "broker_epoch": -1, "topics": [
                {"topic_id": topic_id, "partitions": [
                    {"partition_index": c.partition, "leader_epoch": c.leader_epoch,
                     "leader_recovery_state": 0, "partition_epoch": c.partition_epoch,
                     **isr(c)} for c in topic_changes]}
                for topic_id, topic_changes in by_topic.items()]}

        try:
            answer = await self._send(ApiKey.ALTER_PARTITION, body, lambda r: [r.error_code])
        except KafkaError as exc:
            return [IsrChangeResult(c.topic_id, c.partition, exc.code, exc.message)
                    for c in changes]
        if answer.error_code != ErrorCode.none:
            code = ErrorCode(answer.error_code)
            return [IsrChangeResult(c.topic_id, c.partition, code,
                                    f"the active controller refused the ISR change: "
                                    f"{code.name.upper()}") for c in changes]
        answered = {(t.topic_id, p.partition_index): p
                    for t in answer.topics for p in t.partitions}
        results = []
        for c in changes:
            p = answered.get((c.topic_id, c.partition))
            if p is None:
                results.append(IsrChangeResult(c.topic_id, c.partition,
                                               ErrorCode.unknown_server_error,
                                               "the controller's answer left this "
                                               "partition out"))
            elif p.error_code != ErrorCode.none:
                results.append(IsrChangeResult(c.topic_id, c.partition,
                                               ErrorCode(p.error_code)))
            else:
                results.append(IsrChangeResult(c.topic_id, c.partition, ErrorCode.none, None,
                                               p.leader_id, p.leader_epoch, tuple(p.isr),
                                               p.partition_epoch))
        return results

    async def alter_partition_reassignments(self, requests: Sequence[ReassignmentRequest]
                                            ) -> list[Outcome]:
        by_topic: dict[str, list[ReassignmentRequest]] = {}
        for wanted in requests:
            by_topic.setdefault(wanted.topic, []).append(wanted)
        body = {"timeout": self.request_timeout_ms, "topics": [
            {"name": name, "partitions": [
                {"partition_index": w.partition,
                 "replicas": None if w.replicas is None else list(w.replicas)}
                for w in items]} for name, items in by_topic.items()]}
        try:
            answer = await self._send(ApiKey.ALTER_PARTITION_REASSIGNMENTS, body,
                                      lambda r: [r.error_code])
        except KafkaError as exc:
            return [(exc.code, exc.message)] * len(requests)
        if answer.error_code != ErrorCode.none:
            return [(ErrorCode(answer.error_code), answer.error_message)] * len(requests)
        answered = {(t.name, p.partition_index): (ErrorCode(p.error_code), p.error_message)
                    for t in answer.responses for p in t.partitions}
        # A partition named twice gets the controller's answer for the second mention.
        return [answered.get((w.topic, w.partition), (
                    ErrorCode.unknown_server_error,
                    "the controller's answer left this partition out")) for w in requests]

    async def list_partition_reassignments(
            self, wanted: Sequence[tuple[str, Sequence[int]]] | None = None
    ) -> list[OngoingReassignment]:
        body = {"timeout": self.request_timeout_ms, "topics": None if wanted is None else [
            {"name": name, "partition_indexes": list(parts)} for name, parts in wanted]}
        answer = await self._send(ApiKey.LIST_PARTITION_REASSIGNMENTS, body,
                                  lambda r: [r.error_code])
        if answer.error_code != ErrorCode.none:
            raise KafkaError(ErrorCode(answer.error_code),
                             answer.error_message or "the active controller refused to list "
                                                     "the reassignments")
        return [OngoingReassignment(t.name, p.partition_index, tuple(p.replicas),
                                    tuple(p.adding_replicas), tuple(p.removing_replicas))
                for t in answer.topics for p in t.partitions]

    async def elect_leaders(self, election_type: int,
                            partitions: Sequence[tuple[str, int]] | None
                            ) -> dict[tuple[str, int], Outcome]:
        topics: dict[str, list[int]] = {}
        for name, partition in partitions or ():
            topics.setdefault(name, []).append(partition)
        body = {"election_type": election_type, "timeout": self.request_timeout_ms,
                "topic_partitions": None if partitions is None else [
                    {"topic": name, "partitions": ps} for name, ps in topics.items()]}
        answer = await self._send(
            ApiKey.ELECT_LEADERS, body,
            lambda r: [r.error_code, *(p.error_code for t in r.replica_election_results
                                       for p in t.partition_result)])
        if answer.error_code != ErrorCode.none:
            code = ErrorCode(answer.error_code)
            raise KafkaError(code, f"the active controller refused ElectLeaders: "
                                   f"{code.name.upper()}")
        return {(t.topic, p.partition_id): (ErrorCode(p.error_code), p.error_message)
                for t in answer.replica_election_results for p in t.partition_result}

    def close(self) -> None:
        """Close the connection to the controller (the next change opens another)."""
        self._drop()

    # --- sending ---------------------------------------------------------------------------
    async def _send(self, api_key: ApiKey,
                    body: Mapping[str, Any] | Callable[[int], Mapping[str, Any]],
                    errors: Callable[[Any], list[int]]) -> Any:
        """Send ``body`` to the active controller and return its answer, retrying while the
        controller moves or cannot be reached; KafkaError(REQUEST_TIMED_OUT) when
        ``request_timeout_ms`` passes first. A callable ``body`` is given the version the
        connection negotiated (for requests whose fields changed between versions)."""
        what = api_name(api_key)
        deadline = time.monotonic() + self.request_timeout_ms / 1000
        while True:
            try:
                answer, conn = await self._unless_controller_moves(
                    self._attempt(api_key, body, deadline))
                if ErrorCode.not_controller not in errors(answer):
                    return answer
                raise _Retry(f"{conn.describe()} answered NOT_CONTROLLER: it is no longer "
                             f"the active controller")
            except _Retry as exc:
                reason = str(exc)
            except ClientError as exc:
                if not exc.retriable:  # the wrong peer, or one that cannot take the request
                    self._drop()
                    code = (exc.code if isinstance(exc, KafkaError)
                            else ErrorCode.unsupported_version
                            if isinstance(exc, UnsupportedVersionError)
                            else ErrorCode.unknown_server_error)
                    raise KafkaError(code, f"forwarding {what} to the active controller "
                                           f"failed: {exc}") from exc
                reason = str(exc)
            self._drop()
            if not await self._wait_for_retry(deadline):
                raise KafkaError(
                    ErrorCode.request_timed_out,
                    f"could not forward {what} to the active controller within "
                    f"{self.request_timeout_ms} ms: {reason}")
            log.debug("sending %s to the active controller again: %s", what, reason)

    async def _attempt(self, api_key: ApiKey,
                       body: Mapping[str, Any] | Callable[[int], Mapping[str, Any]],
                       deadline: float) -> tuple[Any, BrokerConnection]:
        conn = await self._connection(deadline)
        data = body(conn.versions.require(api_key)) if callable(body) else body
        return await conn.request(api_key, data, timeout_ms=_left_ms(deadline)), conn

    async def _unless_controller_moves(self, attempt: Awaitable[_T]) -> _T:
        """``attempt``'s result, or _Retry as soon as the image names another controller than
        the one it was sent to (a dead or frozen controller would otherwise hold the change
        until the request timeout, long after ZooKeeper elected another)."""
        sent_to = self.image.controller_id
        task = asyncio.ensure_future(attempt)
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=_WATCH_S)
                if done:
                    return task.result()
                if self.image.controller_id != sent_to:
                    raise _Retry(f"the metadata names broker {self.image.controller_id} the "
                                 f"active controller now, not broker {sent_to}")
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    async def _wait_for_retry(self, deadline: float) -> bool:
        """Back off before the next attempt, less if the image names another controller
        meanwhile; False when the deadline comes first."""
        before = self.image.controller_id
        until = min(deadline, time.monotonic() + self.retry_backoff_ms / 1000)
        while time.monotonic() < until:
            await asyncio.sleep(min(0.01, max(until - time.monotonic(), 0)))
            if self.image.controller_id != before:
                break
        return time.monotonic() < deadline

    async def _connection(self, deadline: float) -> BrokerConnection:
        peer = self._active_controller()
        async with self._connecting:
            if self._conn is not None and self._peer == peer and self._conn.connected:
                return self._conn
            self._drop()
            self._conn = await self._connect(peer, self.client_id, _left_ms(deadline))
            self._peer = peer
            return self._conn

    def _active_controller(self) -> ControllerPeer:
        controller_id = self.image.controller_id
        if controller_id < 0:
            raise _Retry("no active controller is known (the metadata names none)")
        if controller_id == self.node_id:
            # This broker's own controller takes its changes; sending them to itself would
            # come back here.
            raise ControllerIsLocal(f"the metadata names this broker ({controller_id}) the "
                                    f"active controller")
        registration = self.image.brokers.get(controller_id)
        if registration is None:
            raise _Retry(f"the active controller, broker {controller_id}, is not registered")
        endpoint = registration.endpoint(self.listener)
        if endpoint is None:
            raise _Retry(f"the active controller, broker {controller_id}, has no endpoint on "
                         f"listener {self.listener} (inter.broker.listener.name)")
        return ControllerPeer(controller_id, endpoint.host, endpoint.port, self.listener)

    @staticmethod
    async def _open(peer: ControllerPeer, client_id: str, timeout_ms: int) -> BrokerConnection:
        conn = BrokerConnection(peer.host, peer.port, client_id=client_id, broker=peer,
                                request_timeout_ms=timeout_ms, connect_timeout_ms=timeout_ms,
                                software_name="moldau-broker")
        await conn.connect()
        return conn

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = self._peer = None


def _left_ms(deadline: float) -> int:
    return max(int((deadline - time.monotonic()) * 1000), 1)


def _topic(spec: TopicSpec) -> dict[str, Any]:
    return {"name": spec.name, "num_partitions": spec.num_partitions,
            "replication_factor": spec.replication_factor,
            "assignments": [{"partition_index": p, "broker_ids": list(b)}
                            for p, b in sorted(spec.assignments.items())],
            "configs": [{"name": k, "value": v} for k, v in spec.configs.items()]}


def _only(entries: Sequence[Any]) -> Outcome:
    """The outcome of a request about one resource or topic."""
    if len(entries) != 1:
        return (ErrorCode.unknown_server_error,
                f"the controller answered {len(entries)} results for one change")
    entry = entries[0]
    return ErrorCode(entry.error_code), entry.error_message
