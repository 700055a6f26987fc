"""A scripted Kafka peer for tests of a broker's outbound requests: it answers ApiVersions with
the APIs it is given and every other request with what a test's ``answer`` function returns."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from typing import Any

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.entities import build
from moldau.protocol.messages import (
    decode_request,
    decode_request_header,
    encode_response,
    response_schema,
)

Answer = Callable[[int, int, Any], dict[str, Any]]


class FakePeer:
    """Listens on 127.0.0.1 (a free port); records each request as (api key, client id)."""

    def __init__(self, apis: dict[int, tuple[int, int]], answer: Answer) -> None:
        self.apis = {ApiKey.API_VERSIONS: (0, 3), **apis}
        self.answer = answer
        self.requests: list[tuple[int, str | None]] = []
        self.server: asyncio.base_events.Server | None = None
        self.port = 0

    async def __aenter__(self) -> FakePeer:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                frame = await reader.readexactly(size)
                header, offset = decode_request_header(frame)
                request = decode_request(header, frame, offset)
                if header.api_key == ApiKey.API_VERSIONS:
                    data: dict[str, Any] = {"error_code": 0, "throttle_time": 0, "api_keys": [
                        {"api_key": k, "min_version": lo, "max_version": hi}
                        for k, (lo, hi) in sorted(self.apis.items())]}
                else:
                    self.requests.append((header.api_key, header.client_id))
                    data = self.answer(header.api_key, header.api_version, request)
                schema = response_schema(header.api_key, header.api_version)
                writer.write(encode_response(header.api_key, header.api_version,
                                             header.correlation_id, build(schema, data)))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
