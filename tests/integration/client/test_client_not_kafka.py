"""A wrong address that answers in another protocol gets an error that says so (issue 11,
defect 16): before, an HTTP server's answer was read as a frame of 1213486160 bytes (the
ASCII bytes "HTTP") "exceeding socket.request.max.bytes"."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator

import pytest

from moldau.client import AdminClient, KafkaConnectionError, NoBrokersAvailable
from moldau.client.connection import BrokerConnection

pytestmark = pytest.mark.timeout(120)

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]

HTTP_400 = (b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/html\r\nContent-Length: 0\r\n"
            b"Connection: close\r\n\r\n")
TLS_ALERT = bytes.fromhex("15030300020232")  # fatal decode_error, what a TLS server answers
SSH_BANNER = b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n"


def answering(reply: bytes, *, first: bool = False) -> Handler:
    """A server that sends ``reply`` (at once with ``first``, else after the request's first
    bytes, as nginx answers a request line it cannot parse) and closes."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not first:
            await reader.read(1)
        writer.write(reply)
        await writer.drain()
        writer.close()

    return handle


class Server:
    """An asyncio server on a free loopback port, on its own thread."""

    def __init__(self, handler: Handler) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

        async def start() -> asyncio.AbstractServer:
            return await asyncio.start_server(handler, "127.0.0.1", 0)

        self.server = asyncio.run_coroutine_threadsafe(start(), self.loop).result(10)
        self.port: int = self.server.sockets[0].getsockname()[1]

    def close(self) -> None:
        self.server.close()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture
def serve() -> Iterator[Callable[[Handler], Server]]:
    servers: list[Server] = []

    def start(handler: Handler) -> Server:
        servers.append(Server(handler))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def connect_error(port: int) -> tuple[str, float]:
    async def main() -> None:
        conn = BrokerConnection("127.0.0.1", port, connect_timeout_ms=20000)
        await conn.connect()

    started = time.monotonic()
    with pytest.raises(KafkaConnectionError) as info:
        asyncio.run(main())
    return str(info.value), time.monotonic() - started


@pytest.mark.parametrize(("reply", "first", "says"), [
    (HTTP_400, False, "this is an HTTP server, not a Kafka broker"),
    (TLS_ALERT, False, "this port speaks TLS (SSL): it is not a plaintext Kafka listener"),
    (SSH_BANNER, True, "this is an SSH server, not a Kafka broker"),
])
def test_another_protocol_is_named(serve: Callable[[Handler], Server], reply: bytes,
                                   first: bool, says: str) -> None:
    server = serve(answering(reply, first=first))
    message, took = connect_error(server.port)
    assert says in message, message
    assert f"127.0.0.1:{server.port}" in message, message
    assert "1213486160" not in message and "socket.request.max.bytes" not in message, message
    assert took < 15, f"the error took {took:.1f} s"  # at once, not at the connect time-out


def test_clients_do_not_retry_a_web_server(serve: Callable[[Handler], Server]) -> None:
    """Retrying cannot fix a wrong address: the error comes at once, not after the time-out
    (30 s for the CLI, default.api.timeout.ms for a client)."""
    server = serve(answering(HTTP_400))

    async def main() -> None:
        async with AdminClient({"bootstrap.servers": f"127.0.0.1:{server.port}",
                                "default.api.timeout.ms": 60000}):
            pass

    started = time.monotonic()
    with pytest.raises(NoBrokersAvailable, match="this is an HTTP server, not a Kafka broker"):
        asyncio.run(main())
    assert time.monotonic() - started < 15

    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "moldau.cli.main", "topics", "--bootstrap-server",
         f"127.0.0.1:{server.port}", "--list"],
        capture_output=True, text=True, timeout=60,
    )
    took = time.monotonic() - started
    assert proc.returncode != 0
    assert "this is an HTTP server, not a Kafka broker" in proc.stderr + proc.stdout, (
        proc.stdout + proc.stderr)
    assert took < 15, f"the CLI took {took:.1f} s to give up"
