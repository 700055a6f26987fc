"""Fake Kafka brokers whose Metadata answers the test controls (brokers that appear, move).

A real Moldau broker cannot be joined by a second one yet, so "a broker appears later" is
tested against these: each :class:`FakeCluster` server answers ApiVersions, Metadata,
FindCoordinator and DescribeCluster from the cluster's shared, mutable state, and names
itself in ``cluster_id`` so a test can tell which server a connection reached.
"""

from __future__ import annotations

import asyncio
import struct
import threading
from typing import Any

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.entities import build
from moldau.protocol.messages import (
    decode_request,
    decode_request_header,
    encode_response,
    response_schema,
)

VERSIONS = {ApiKey.API_VERSIONS: (0, 3), ApiKey.METADATA: (0, 12),
            ApiKey.FIND_COORDINATOR: (0, 4), ApiKey.DESCRIBE_CLUSTER: (0, 1)}

Address = tuple[int, str, int]  # node id, host, port as advertised


class FakeCluster:
    """Servers on 127.0.0.1 sharing ``brokers``, ``controllers`` and ``coordinator``."""

    def __init__(self) -> None:
        self.brokers: list[Address] = []
        self.controllers: list[Address] = []
        self.coordinator: Address = (1, "", 0)
        self.connections: dict[str, int] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="fake-cluster")
        self._thread.start()
        self._servers: list[asyncio.AbstractServer] = []

    def add_server(self, name: str) -> int:
        """Start a fake broker called ``name``; return its port."""
        async def start() -> asyncio.AbstractServer:
            return await asyncio.start_server(
                lambda r, w: self._serve(name, r, w), "127.0.0.1", 0)

        server = asyncio.run_coroutine_threadsafe(start(), self._loop).result(10)
        self._servers.append(server)
        self.connections[name] = 0
        return int(server.sockets[0].getsockname()[1])

    def close(self) -> None:
        async def stop() -> None:
            for server in self._servers:
                server.close()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _serve(self, name: str, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        self.connections[name] += 1
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                frame = await reader.readexactly(size)
                writer.write(self._answer(name, frame))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def _answer(self, name: str, frame: bytes) -> bytes:
        header, offset = decode_request_header(frame)
        key, version, cid = header.api_key, header.api_version, header.correlation_id
        request = decode_request(header, frame, offset)
        data: dict[str, Any]
        if key == ApiKey.API_VERSIONS:
            data = {"error_code": 0, "api_keys": [
                {"api_key": k, "min_version": lo, "max_version": hi}
                for k, (lo, hi) in VERSIONS.items()]}
        elif key == ApiKey.METADATA:
            data = {"brokers": [{"node_id": n, "host": h, "port": p} for n, h, p in self.brokers],
                    "cluster_id": name, "controller_id": 1, "topics": []}
        elif key == ApiKey.FIND_COORDINATOR:
            node, host, port = self.coordinator
            if version >= 4:
                data = {"coordinators": [
                    {"key": k, "node_id": node, "host": host, "port": port, "error_code": 0}
                    for k in request.coordinator_keys]}
            else:
                data = {"error_code": 0, "node_id": node, "host": host, "port": port}
        elif key == ApiKey.DESCRIBE_CLUSTER:
            kind = getattr(request, "endpoint_type", 1)
            nodes = self.controllers if kind == 2 else self.brokers
            data = {"error_code": 0, "cluster_id": name, "endpoint_type": kind,
                    "brokers": [{"broker_id": n, "host": h, "port": p} for n, h, p in nodes]}
        else:
            raise AssertionError(f"fake broker got api {key}")
        return encode_response(key, version, cid, build(response_schema(key, version), data))
