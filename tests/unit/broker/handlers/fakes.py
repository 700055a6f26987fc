"""A :class:`~moldau.broker.context.BrokerContext` built in memory, and a way to call handlers.

:func:`fake_node` assembles a node's real components without a server or sockets: a metadata
image whose brokers, listeners and active controller the test chooses, the controller over a
store kept in a list, the replica manager over logs in a tmp dir, the group coordinator over
an in-memory ``__consumer_offsets`` on a manual clock, and producer ids from the controller.
:func:`call` sends one request through the same path a connection uses (encode the request,
``parse_frame``, the registered handler, ``encode_result``) and decodes the answer, so tests
assert what a client would read.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from moldau.broker.config import BrokerConfig, build_config
from moldau.broker.dispatch import RequestContext, encode_result, load_handlers, parse_frame
from moldau.broker.group.config import GroupConfig
from moldau.broker.group.coordinator import GroupCoordinator
from moldau.broker.group.offsets_log import MemoryOffsetsLog
from moldau.broker.group.service import follow_fence
from moldau.broker.group.timer import ManualTimer
from moldau.broker.metadata.controller import Controller
from moldau.broker.metadata.image import MetadataImage
from moldau.broker.metadata.records import (
    BrokerEndpoint,
    ControllerChangeRecord,
)
from moldau.broker.producer_ids import ProducerIdManager
from moldau.broker.replica_manager import ReplicaManager
from moldau.broker.services import auto_create_topics
from moldau.broker.startup import follow_metadata
from moldau.broker.txn.markers import MarkerWriter
from moldau.protocol.entities import build, to_dict
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages import decode_response, encode_request, request_schema
from moldau.storage.config import LogConfig
from moldau.storage.manager import LogManager
from moldau.testing.metadata_store import ListStore
from moldau.testing.runner import default_settings

CORRELATION_ID = 7




def endpoints(broker_id: int, listeners: Sequence[str]) -> list[BrokerEndpoint]:
    """One endpoint per listener: host ``b<id>-<listener>``, port 9000 + 10 * id + index."""
    return [BrokerEndpoint(name, f"b{broker_id}-{name.lower()}", 9000 + 10 * broker_id + i)
            for i, name in enumerate(listeners)]


@dataclass(eq=False)
class FakeNode:
    """A node's components without a server: satisfies BrokerContext."""

    config: BrokerConfig
    image: MetadataImage
    controller: Controller
    replica_manager: ReplicaManager
    group_coordinator: GroupCoordinator | None
    producer_ids: ProducerIdManager
    timer: ManualTimer
    log_manager: LogManager
    cluster_id: str = "fake-cluster-id"
    closed: list[str] = field(default_factory=list)
    #: The transaction verifier (None: no transaction coordinator; tests may set a fake).
    txn_verifier: Any = None

    @property
    def node_id(self) -> int:
        return self.config.node_id

    @property
    def controller_id(self) -> int:
        return self.image.controller_id

    @property
    def store(self) -> ListStore:
        store = self.controller.store
        assert isinstance(store, ListStore)
        return store

    def time_ms(self) -> int:
        return self.timer.now_ms()

    async def next_producer_id(self) -> int:
        return await self.producer_ids.next_id()

    @property
    def marker_writer(self) -> MarkerWriter:
        return MarkerWriter(self.replica_manager)

    async def auto_create_topics(self, names: list[str]) -> dict[str, ErrorCode]:
        return await auto_create_topics(self.controller, names)

    async def close(self) -> None:
        if self.group_coordinator is not None:
            await self.group_coordinator.close()
        self.log_manager.shutdown()


async def fake_node(tmp_path: Path, *, node_id: int = 1,
                    brokers: Mapping[int, Sequence[str]] | None = None,
                    controller_id: int | None = None, settings: Mapping[str, Any] | None = None,
                    groups: bool = True) -> FakeNode:
    """A node ``node_id`` in a cluster of ``brokers`` (id -> listener names; default: this
    node alone on PLAINTEXT) whose active controller is ``controller_id`` (default: this
    node). ``settings`` override the broker config (Kafka keys)."""
    raw = {k: str(v) for k, v in default_settings(tmp_path / "data", node_id).items()}
    raw.update({k: str(v) for k, v in (settings or {}).items()})
    config = build_config(raw)
    timer = ManualTimer()
    image = MetadataImage()
    image.replay(ControllerChangeRecord(node_id if controller_id is None else controller_id, 1))
    controller = Controller(image, ListStore(),
                            default_partitions=lambda: config["num.partitions"],
                            default_replication_factor=lambda: config["default.replication.factor"])
    manager = LogManager([str(d) for d in config.log_dirs],
                         LogConfig.from_dict(config.topic_defaults()), time_ms=timer.now_ms)
    manager.startup()
    replicas = ReplicaManager(node_id=node_id, image=image, config=config, log_manager=manager,
                              time_ms=timer.now_ms)
    follow_metadata(controller, replicas)
    for broker_id, listeners in sorted((brokers or {node_id: ["PLAINTEXT"]}).items()):
        await controller.register_broker(broker_id, endpoints(broker_id, listeners), None)
    coordinator = None
    if groups:
        coordinator = GroupCoordinator(GroupConfig.from_config(config), MemoryOffsetsLog(),
                                       timer, node_id=node_id, image=lambda: image)
        follow_metadata(controller, groups=coordinator)
        follow_fence(coordinator, replicas)
    return FakeNode(config, image, controller, replicas, coordinator,
                    ProducerIdManager(node_id, controller), timer, manager)


class FakeConnection:
    """What a handler may do to its connection: close it (acks=0 produce that failed)."""

    def __init__(self) -> None:
        self.closed: list[str] = []

    def close(self, reason: str = "") -> None:
        self.closed.append(reason)


@dataclass
class Started:
    """A request a handler has taken: ``result`` is what it returned (a coroutine when the
    answer waits for something)."""

    header: Any
    result: Any

    @property
    def waits(self) -> bool:
        return inspect.isawaitable(self.result)

    async def answer(self) -> Any:
        """The answer as the client decodes it (None when the handler sends none)."""
        result = await self.result if self.waits else self.result
        chunks = encode_result(self.header, result)
        if chunks is None:
            return None
        frame = b"".join(bytes(c) for c in chunks)[4:]
        correlation_id, response = decode_response(self.header.api_key,
                                                   self.header.api_version, frame)
        assert correlation_id == CORRELATION_ID
        return to_dict(response)


def start(node: Any, api_key: int, version: int, body: Mapping[str, Any], *,
          listener: str = "PLAINTEXT", connection: Any = None,
          client_id: str = "unit-test") -> Started:
    """Hand one request to the node's handler, through the path a connection uses."""
    load_handlers()
    schema = request_schema(api_key, version)
    assert schema is not None, (api_key, version)
    entity = build(schema, body, strict=True)  # a field left out (or misnamed) raises
    frame = encode_request(api_key, version, CORRELATION_ID, client_id, entity)
    header, spec, request = parse_frame(frame[4:])
    assert spec is not None
    ctx = RequestContext(header, listener, "127.0.0.1", 40000, node,
                         connection if connection is not None else FakeConnection())
    return Started(header, spec.fn(ctx, request))


async def call(node: Any, api_key: int, version: int, body: Mapping[str, Any], *,
               listener: str = "PLAINTEXT", connection: Any = None,
               client_id: str = "unit-test") -> Any:
    """Send one request to the node's handler and return the answer as plain data (None when
    the handler sends none)."""
    return await start(node, api_key, version, body, listener=listener,
                       connection=connection, client_id=client_id).answer()
