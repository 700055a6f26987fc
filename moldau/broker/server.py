"""The broker process: owns every component and the asyncio listeners.

Start-up order: open the log dirs (recovering logs after a crash), replay the metadata log into
the image, bind the listeners (port 0 picks a free port; the advertised port follows), register
this broker with its advertised endpoints, open the partitions it hosts, then start serving.
Shutdown reverses it and leaves a clean-shutdown marker so the next start skips recovery.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..protocol.errors import ErrorCode
from .config import BrokerConfig, Endpoint
from .dispatch import load_handlers
from .metadata.controller import Controller, TopicSpec
from .metadata.image import MetadataImage
from .metadata.records import BrokerEndpoint

if TYPE_CHECKING:
    from ..storage.manager import LogManager
    from .connection import KafkaConnection
    from .metadata.log import MetadataLog
    from .replica_manager import ReplicaManager

log = logging.getLogger(__name__)


@dataclass
class BoundListener:
    endpoint: Endpoint
    server: asyncio.base_events.Server
    port: int


class Broker:
    """A Moldau node (broker and controller in one process)."""

    def __init__(self, config: BrokerConfig, *, time_ms: Callable[[], int] | None = None) -> None:
        self.config = config
        self.node_id = config.node_id
        self.time_ms = time_ms or (lambda: int(time.time() * 1000))
        self.cluster_id: str = ""
        self.image = MetadataImage()
        self.connections: set[KafkaConnection] = set()
        self.bound: list[BoundListener] = []
        self.components: dict[str, Any] = {}
        self.controller: Controller
        self.replica_manager: ReplicaManager
        self.log_manager: LogManager
        self.metadata_log: MetadataLog
        self.load_stats: Any = None
        self._background: list[asyncio.Task[Any]] = []
        self._stopped = asyncio.Event()
        self._producer_ids: Iterator[int] | None = None
        load_handlers()

    @property
    def controller_id(self) -> int:
        return self.node_id

    # --- lifecycle ---------------------------------------------------------------------
    async def start(self) -> None:
        from .startup import open_node

        await open_node(self)
        await self._bind_listeners()
        self._register()
        for bound in self.bound:
            await bound.server.start_serving()
        log.info("[MoldauServer id=%s] started (cluster id %s); listening on %s",
                 self.node_id, self.cluster_id,
                 ", ".join(f"{b.endpoint.name}://{b.endpoint.host}:{b.port}"
                           for b in self.bound))

    async def _bind_listeners(self) -> None:
        from .connection import KafkaConnection

        loop = asyncio.get_running_loop()
        for endpoint in self.config.listeners.listeners:
            host = endpoint.host or None
            if host in ("0.0.0.0", "::"):
                host = None

            def factory(name: str = endpoint.name) -> KafkaConnection:
                return KafkaConnection(self, name)

            try:
                server = await loop.create_server(
                    factory, host=host, port=endpoint.port, reuse_address=True,
                    start_serving=False, backlog=1024,
                )
            except OSError as exc:
                raise OSError(
                    exc.errno,
                    f"Cannot bind listener {endpoint} (from listeners): {exc.strerror}. "
                    f"Is another broker using port {endpoint.port}, or is {endpoint.host!r} "
                    f"not an address of this machine?",
                ) from None
            port = server.sockets[0].getsockname()[1]
            self.bound.append(BoundListener(endpoint, server, port))

    def advertised_endpoints(self) -> list[BrokerEndpoint]:
        """Advertised listeners, with port 0 replaced by the port actually bound."""
        ports = {b.endpoint.name: b.port for b in self.bound}
        result = []
        for e in self.config.listeners.advertised:
            port = e.port or ports.get(e.name, e.port)
            result.append(BrokerEndpoint(e.name, e.host, port, e.protocol))
        return result

    def _register(self) -> None:
        self.controller.register_broker(self.node_id, self.advertised_endpoints(),
                                        self.config["broker.rack"])

    def bound_port(self, listener: str | None = None) -> int:
        for b in self.bound:
            if listener is None or b.endpoint.name == listener:
                return b.port
        raise KeyError(listener)

    def spawn(self, coro: Any) -> asyncio.Task[Any]:
        """Run a background task that lives as long as the broker."""
        task = asyncio.ensure_future(coro)
        self._background.append(task)
        return task

    async def stop(self) -> None:
        from .startup import close_node

        for bound in self.bound:
            bound.server.close()
        for conn in list(self.connections):
            conn.close()
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await close_node(self)
        self._stopped.set()
        log.info("[MoldauServer id=%s] shut down completed", self.node_id)

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    # --- used by handlers --------------------------------------------------------------
    def next_producer_id(self) -> int:
        """A producer id never issued before (from a block the controller allocated)."""
        if not self._producer_ids:
            self._producer_ids = iter(self.controller.allocate_producer_ids(self.node_id))
        try:
            return next(self._producer_ids)
        except StopIteration:
            self._producer_ids = iter(self.controller.allocate_producer_ids(self.node_id))
            return next(self._producer_ids)

    def auto_create_topics(self, names: list[str]) -> dict[str, ErrorCode]:
        """Create topics a client asked for (``auto.create.topics.enable``); the error of
        each topic that could not be created."""
        results = self.controller.create_topics([TopicSpec(name) for name in names])
        failed: dict[str, ErrorCode] = {}
        for result in results:
            if result.error:
                failed[result.name] = result.error
                log.info("auto-creation of topic %s failed: %s", result.name, result.message)
            else:
                log.info("auto-created topic %s with %d partitions", result.name,
                         result.num_partitions)
        return failed


