"""One proxied client connection: client socket <-> upstream broker socket.

Bytes flow through as they arrive, in both directions, with transport-level flow control (a
slow reader on one side pauses reading on the other). The request direction is only scanned
for frame heads; the response direction holds back, decodes and rewrites just the answers
that carry broker addresses (see :mod:`.rewrite`). Both directions keep the connection's
order because each is one sequential stream handled synchronously.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from moldau.protocol.api_keys import api_name
from moldau.protocol.errors import ProtocolError

from .rewrite import RewriteError, needs_rewrite, rewrite_response
from .streams import InFlight, RequestScanner, ResponseStream

if TYPE_CHECKING:
    from .server import ProxyServer

log = logging.getLogger("moldau.proxy")

# Write buffer limits: large enough that a 1 MiB produce request or fetch response does not
# flip reading on and off several times per frame.
_HIGH_WATER = 4 * 1024 * 1024
_LOW_WATER = 1024 * 1024

# (address, what it is) candidates to connect to, tried in order
Targets = Callable[[], list[tuple[tuple[str, int], str]]]


def _nodelay(transport: Any) -> None:
    sock = transport.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass


def connect_error_text(exc: BaseException, host: str, timeout_ms: int) -> str:
    """Plain words for why a TCP connect failed."""
    if isinstance(exc, socket.gaierror):
        return f"DNS lookup of {host!r} failed ({exc.strerror or exc})"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused (nothing listens on that port, or a firewall rejects it)"
    if isinstance(exc, TimeoutError):
        return f"no answer within {timeout_ms} ms (a firewall may drop the packets)"
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return str(exc)


class ClientSide(asyncio.Protocol):
    """The proxy's end of a client's connection; owns the matching upstream connection."""

    def __init__(self, server: ProxyServer, listener: str, targets: Targets) -> None:
        self.server = server
        self.listener = listener  # "bootstrap" or "broker 1", for log lines
        self.targets = targets
        self.transport: asyncio.Transport | None = None
        self.upstream: asyncio.Transport | None = None
        self.peer = "?"
        self.scanner = RequestScanner()
        self.in_flight = InFlight(needs_rewrite)
        self.closed = False
        self._early: list[bytes] = []  # client bytes received before the upstream was open
        self._task: asyncio.Task[None] | None = None

    # --- client side ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        if peer:
            self.peer = f"{peer[0]}:{peer[1]}"
        _nodelay(transport)
        self.transport.set_write_buffer_limits(_HIGH_WATER, _LOW_WATER)
        # Nothing is read until the upstream connection is open: the kernel holds the bytes.
        self.transport.pause_reading()
        self.server.connections.add(self)
        self._task = asyncio.get_running_loop().create_task(self._connect())

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        timeout_ms = self.server.config.connect_timeout_ms
        failures: list[str] = []
        for (host, port), what in self.targets():
            try:
                async with asyncio.timeout(timeout_ms / 1000):
                    transport, _ = await loop.create_connection(
                        lambda: UpstreamSide(self), host, port)
            except (OSError, TimeoutError) as exc:
                failures.append(f"{what}: {connect_error_text(exc, host, timeout_ms)}")
                continue
            if self.closed:
                transport.close()
                return
            self.upstream = transport  # type: ignore[assignment]
            if self._early:
                transport.writelines(self._early)
                self._early.clear()
            log.debug("client %s on %s -> %s", self.peer, self.listener, what)
            assert self.transport is not None
            self.transport.resume_reading()
            return
        self.server.report_unreachable(self.listener, self.peer, failures)
        self.close()

    def data_received(self, data: bytes) -> None:
        try:
            heads = self.scanner.feed(data)
        except ProtocolError as exc:
            log.warning("client %s on %s sent a bad frame (%s); closing", self.peer,
                        self.listener, exc)
            self.close()
            return
        if heads:
            self.in_flight.add(heads)
        if self.upstream is not None:
            self.upstream.write(data)
        else:
            # uvloop may deliver bytes that were read before pause_reading took effect
            self._early.append(data)
            self.transport.pause_reading()  # type: ignore[union-attr]

    def eof_received(self) -> bool:
        # Half-close: pass the EOF on and keep delivering the answers still coming.
        if self.upstream is not None and self.upstream.can_write_eof():
            self.upstream.write_eof()
            return True
        return False

    def pause_writing(self) -> None:
        if self.upstream is not None:
            self.upstream.pause_reading()

    def resume_writing(self) -> None:
        if self.upstream is not None and not self.upstream.is_closing():
            self.upstream.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.close()

    # --- upstream side --------------------------------------------------------------------

    def send_to_client(self, pieces: Iterable[bytes | bytearray | memoryview]) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.writelines(pieces)

    def rewrite(self, api_key: int, version: int, frame: memoryview) -> bytes | None:
        """Rewrite one held-back response (None: pass it on unchanged)."""
        try:
            return rewrite_response(api_key, version, frame, self.server.resolve)
        except RewriteError as exc:
            problem = str(exc)
        except Exception as exc:  # a bug must not take the connection down with it
            log.exception("rewriting %s v%d failed", api_name(api_key), version)
            problem = f"{type(exc).__name__}: {exc}"
        self.server.warn_once(
            (api_key, version),
            f"{api_name(api_key)} v{version} answer passed through unchanged: {problem}; "
            "clients may be handed broker addresses they cannot reach",
        )
        return None

    # --- closing --------------------------------------------------------------------------

    def close(self) -> None:
        """Close both sides (buffered bytes are still flushed)."""
        if self.closed:
            return
        self.closed = True
        self.server.connections.discard(self)
        if self._task is not None and not self._task.done():
            self._task.cancel()
        for transport in (self.transport, self.upstream):
            if transport is not None and not transport.is_closing():
                transport.close()

    def abort(self) -> None:
        """Drop both sides at once (shutdown)."""
        self.close()
        for transport in (self.transport, self.upstream):
            if transport is not None:
                transport.abort()


class UpstreamSide(asyncio.Protocol):
    """The proxy's connection to a broker on behalf of one client connection."""

    def __init__(self, client: ClientSide) -> None:
        self.client = client
        self.transport: asyncio.Transport | None = None
        self.stream = ResponseStream(client.in_flight.answer, client.rewrite)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        _nodelay(transport)
        self.transport.set_write_buffer_limits(_HIGH_WATER, _LOW_WATER)

    def data_received(self, data: bytes) -> None:
        try:
            pieces = self.stream.feed(data)
        except ProtocolError as exc:
            log.warning("%s sent a bad frame to client %s (%s); closing", self.client.listener,
                        self.client.peer, exc)
            self.client.close()
            return
        if len(pieces) == 1:
            transport = self.client.transport
            if transport is not None and not transport.is_closing():
                transport.write(pieces[0])
        elif pieces:
            self.client.send_to_client(pieces)

    def eof_received(self) -> bool:
        return False

    def pause_writing(self) -> None:
        if self.client.transport is not None:
            self.client.transport.pause_reading()

    def resume_writing(self) -> None:
        transport = self.client.transport
        if transport is not None and not transport.is_closing():
            transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.client.close()
