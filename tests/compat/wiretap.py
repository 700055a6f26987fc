"""A recording TCP relay between clients and a broker: which API versions did a client use?

The broker advertises the tap's address, so every connection a client opens after bootstrap
also goes through the tap. Bytes pass unchanged; the tap only reads the api key and version of
each request frame going to the broker.

``MOLDAU_COMPAT_ENDPOINT=tests.compat.wiretap:tapped_endpoint`` runs the whole compatibility
suite through the tap (an endpoint whose bootstrap address is not the broker's listener,
like a proxy's).
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import threading
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

from moldau.testing.processes import free_port
from moldau.testing.runner import BrokerProcess

from .endpoint import KafkaEndpoint, restart_in_place

_REQUEST_HEAD = struct.Struct(">ihh")  # size, api_key, api_version


class WireTap:
    """Relay 127.0.0.1:<port> to an upstream broker and count (api_key, version) requests."""

    def __init__(self) -> None:
        self.by_client: Counter[tuple[str, int, int]] = Counter()
        self.upstream_port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="wiretap")
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0

    def start(self) -> WireTap:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self._loop).result(10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        async def close() -> None:
            assert self._server is not None
            self._server.close()
            for writer in list(self._writers):
                writer.close()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def versions(self, client_id: str | None = None) -> dict[int, set[int]]:
        """{api_key: versions used} since the last :meth:`reset` (by ``client_id`` only,
        when given)."""
        out: dict[int, set[int]] = {}
        for cid, api_key, version in list(self.by_client):
            if client_id is None or cid == client_id:
                out.setdefault(api_key, set()).add(version)
        return out

    def reset(self) -> None:
        self.by_client.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_writer))
        await asyncio.gather(self._requests(reader, up_writer),
                             self._pipe(up_reader, writer), return_exceptions=True)
        for w in (writer, up_writer):
            self._writers.discard(w)
            w.close()

    async def _requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readexactly(14)  # size .. client id length
                size, api_key, version = _REQUEST_HEAD.unpack_from(head)
                (id_len,) = struct.unpack_from(">h", head, 12)
                client_id = await reader.readexactly(max(id_len, 0))
                self.by_client[(client_id.decode(errors="replace"), api_key, version)] += 1
                writer.write(head + client_id)
                remaining = size - 10 - max(id_len, 0)
                while remaining > 0:
                    chunk = await reader.read(min(remaining, 1 << 20))
                    if not chunk:
                        raise ConnectionError("client went away mid-frame")
                    writer.write(chunk)
                    remaining -= len(chunk)
                await writer.drain()
        finally:
            writer.close()

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while chunk := await reader.read(1 << 20):
                writer.write(chunk)
                await writer.drain()
        finally:
            writer.close()


@contextlib.contextmanager
def tapped_endpoint(settings: Mapping[str, Any]) -> Iterator[KafkaEndpoint]:
    """A ``moldau serve`` subprocess behind a :class:`WireTap`; the broker advertises the
    tap's address."""
    tap = WireTap().start()
    try:
        broker_port = free_port()
        with BrokerProcess(settings={
            **settings,
            "listeners": f"PLAINTEXT://127.0.0.1:{broker_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{tap.port}",
        }) as broker:
            tap.upstream_port = broker.port()
            yield KafkaEndpoint(
                bootstrap=f"127.0.0.1:{tap.port}",
                brokers={1: ("127.0.0.1", tap.port)},
                cluster_id=broker.cluster_id,
                broker=broker,
                restart=lambda: restart_in_place(broker),
                name="wiretap",
                extra={"tap": tap},
            )
    finally:
        tap.stop()
