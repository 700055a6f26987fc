"""A tiny Kafka-aware TCP proxy for tests: forwards frames, can swallow Produce responses.

``drop_produce_responses=n`` makes the proxy wait for the broker's answer to the next ``n``
Produce requests, throw the answer away and close the client's connection, so the broker
has appended the batch but the client must retry it: the idempotent-retry scenario.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct


class FaultyProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.drop_produce_responses = 0
        self.dropped = 0
        self.connections = 0
        self.api_keys_seen: list[int] = []
        self._server: asyncio.AbstractServer | None = None
        self.port = 0

    async def start(self) -> FaultyProxy:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    async def _handle(self, creader: asyncio.StreamReader, cwriter: asyncio.StreamWriter) -> None:
        self.connections += 1
        sreader, swriter = await asyncio.open_connection(*self.target)
        produce_ids: set[int] = set()

        async def upstream() -> None:
            while True:
                size_raw = await creader.readexactly(4)
                frame = await creader.readexactly(struct.unpack(">i", size_raw)[0])
                api_key, _version, corr = struct.unpack_from(">hhi", frame)
                self.api_keys_seen.append(api_key)
                if api_key == 0:
                    produce_ids.add(corr)
                swriter.write(size_raw + frame)
                await swriter.drain()

        async def downstream() -> None:
            while True:
                size_raw = await sreader.readexactly(4)
                frame = await sreader.readexactly(struct.unpack(">i", size_raw)[0])
                (corr,) = struct.unpack_from(">i", frame)
                if corr in produce_ids and self.drop_produce_responses > 0:
                    self.drop_produce_responses -= 1
                    self.dropped += 1
                    return  # the broker appended; the client never hears of it
                cwriter.write(size_raw + frame)
                await cwriter.drain()

        tasks = [asyncio.create_task(upstream()), asyncio.create_task(downstream())]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in tasks:
                t.cancel()
            for w in (cwriter, swriter):
                w.close()
