"""One TCP connection to one broker: framing, pipelining, version negotiation.

Requests are written as soon as they are made (many in flight); each response is matched to
its request by correlation id, so callers simply ``await conn.request(...)``. On connect the
connection runs the ApiVersions handshake (v3 first; KIP-511 fallback) and from then on picks,
per API, the highest version both sides speak (:mod:`.versions`).

A request that times out closes the connection, as Kafka's Java client does: a broker that
does not answer one request is not trusted with the others, and a half-open TCP connection is
only detected this way. Every failure names the address and the cause (DNS, refused, timeout).

The peer, when known, is anything with a ``node_id`` and a ``describe()`` (the client's
``BrokerInfo``, or a broker's description of another broker); failures of a connection to an
address that came from cluster metadata get a hint on how to fix it (``address_hint``; the
client adds its ``broker.address.map``).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import socket
import struct
from collections.abc import Mapping
from typing import Any, Protocol

from moldau.protocol.api_keys import ApiKey, api_name
from moldau.protocol.entities import build
from moldau.protocol.errors import ErrorCode, ForeignProtocol, ProtocolError
from moldau.protocol.framing import Frame, FrameDecoder
from moldau.protocol.messages import decode_response, encode_request, request_schema

from .errors import BrokerError, KafkaConnectionError, KafkaTimeoutError, NotKafkaError
from .versions import (
    API_VERSIONS_FIRST,
    ApiVersionTable,
    VersionRange,
    api_versions_retry_version,
)

log = logging.getLogger(__name__)

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")

# Largest response frame accepted (librdkafka's receive.message.max.bytes is 100 MB; fetch
# responses are bounded by fetch.max.bytes, 50 MiB by default, plus overhead).
MAX_RESPONSE_FRAME = 512 * 1024 * 1024

# What answered instead of a Kafka broker, by ForeignProtocol.kind.
_NOT_KAFKA = {
    "http-response": "this is an HTTP server, not a Kafka broker",
    "http-request": "the peer speaks HTTP, not the Kafka protocol",
    "tls": "this port speaks TLS (SSL): it is not a plaintext Kafka listener",
    "ssh": "this is an SSH server, not a Kafka broker",
}

# Added to failures of a connection to an address that came from cluster metadata.
METADATA_ADDRESS_HINT = (
    "; this address came from the cluster's metadata: if it cannot be reached from here, fix "
    "that broker's advertised.listeners"
)


class Peer(Protocol):
    """The broker a connection leads to, when the caller knows it."""

    @property
    def node_id(self) -> int: ...

    def describe(self) -> str:
        """``broker 1 at host:port`` (and whatever helps to find it), for messages."""
        ...


class _Pending:
    __slots__ = ("api_key", "future", "version")

    def __init__(self, api_key: int, version: int, future: asyncio.Future[Any]) -> None:
        self.api_key = api_key
        self.version = version
        self.future = future


class _Protocol(asyncio.BufferedProtocol):
    """Feeds received bytes through a FrameDecoder into the owning connection."""

    def __init__(self, conn: BrokerConnection) -> None:
        self.conn = conn
        self.decoder = FrameDecoder(MAX_RESPONSE_FRAME, 256 * 1024,
                                    limit_name="the client's limit for a response")
        self.transport: asyncio.Transport | None = None
        self.writable = asyncio.Event()
        self.writable.set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement the interface without subclassing asyncio.Transport.
        self.transport = transport  # type: ignore[assignment]

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.decoder.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        try:
            frames = self.decoder.buffer_updated(nbytes)
        except ForeignProtocol as exc:
            self.conn._fail(NotKafkaError(
                self.conn.address, "protocol",
                f"{self.conn.describe()} answered with {exc.description} ({exc.head!r}): "
                f"{_NOT_KAFKA.get(exc.kind, 'it is not a Kafka broker')}; check the address "
                f"and port (bootstrap.servers){self.conn._hint()}",
            ))
            return
        except ProtocolError as exc:
            self.conn._fail(KafkaConnectionError(
                self.conn.address, "protocol", f"{self.conn.describe()}: bad frame: {exc}"
            ))
            return
        for frame in frames:
            self.conn._on_frame(frame)

    def eof_received(self) -> bool:
        return False

    def pause_writing(self) -> None:
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.writable.set()
        self.conn._on_lost(exc)


class BrokerConnection:
    """A connection to one broker address. Create, ``await connect()``, then ``request()``."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str | None = "moldau",
        broker: Peer | None = None,
        request_timeout_ms: int = 30000,
        connect_timeout_ms: int = 10000,
        software_name: str = "moldau-python",
        software_version: str = "0.1.0",
        address_hint: str = METADATA_ADDRESS_HINT,
    ) -> None:
        self.host = host
        self.port = port
        self.broker = broker
        self.address_hint = address_hint
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.connect_timeout_ms = connect_timeout_ms
        self.software_name = software_name
        self.software_version = software_version
        self.versions = ApiVersionTable(())
        self._protocol: _Protocol | None = None
        self._pending: dict[int, _Pending] = {}
        self._correlation = itertools.count(1)
        self._closed_error: Exception | None = None
        self._closed = asyncio.Event()
        self._connected = False

    # --- identity -------------------------------------------------------------------------

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def node_id(self) -> int | None:
        return self.broker.node_id if self.broker else None

    def describe(self) -> str:
        """``broker 1 at host:port`` (or ``bootstrap server host:port``) for messages."""
        if self.broker is not None:
            return self.broker.describe()
        return f"bootstrap server {self.address}"

    @property
    def connected(self) -> bool:
        return self._connected and self._closed_error is None

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    # --- connect --------------------------------------------------------------------------

    async def connect(self) -> None:
        """Open the TCP connection and negotiate API versions."""
        timeout = self.connect_timeout_ms / 1000
        try:
            async with asyncio.timeout(timeout):
                await self._open()
                version = API_VERSIONS_FIRST
                while True:
                    response = await self.request(
                        ApiKey.API_VERSIONS,
                        {
                            "client_software_name": self.software_name,
                            "client_software_version": self.software_version,
                        },
                        version=version,
                    )
                    ranges = [
                        VersionRange(k.api_key, k.min_version, k.max_version)
                        for k in response.api_keys
                    ]
                    if response.error_code == ErrorCode.unsupported_version and version > 0:
                        version = api_versions_retry_version(ranges)
                        continue
                    if response.error_code:
                        raise BrokerError(response.error_code, context=f"{self.describe()}: "
                                          "ApiVersions")
                    self.versions = ApiVersionTable(ranges)
                    break
        except TimeoutError:
            self.close()
            raise KafkaConnectionError(
                self.address, "timeout",
                f"cannot connect to {self.describe()}: no answer within "
                f"socket.connection.setup.timeout.ms={self.connect_timeout_ms}{self._hint()}",
            ) from None
        except BaseException:
            self.close()
            raise
        self._connected = True

    def _hint(self) -> str:
        return self.address_hint if self.broker is not None else ""

    async def _open(self) -> None:
        loop = asyncio.get_running_loop()
        protocol = _Protocol(self)
        try:
            await loop.create_connection(lambda: protocol, self.host, self.port)
        except socket.gaierror as exc:
            raise KafkaConnectionError(
                self.address, "dns",
                f"cannot connect to {self.describe()}: DNS lookup of {self.host!r} failed "
                f"({exc.strerror}){self._hint()}",
            ) from None
        except ConnectionRefusedError:
            raise KafkaConnectionError(
                self.address, "refused",
                f"cannot connect to {self.describe()}: connection refused "
                f"(nothing listens on that port, or a firewall rejects it){self._hint()}",
            ) from None
        except OSError as exc:
            raise KafkaConnectionError(
                self.address, "os",
                f"cannot connect to {self.describe()}: {exc.strerror or exc}{self._hint()}",
            ) from None
        self._protocol = protocol

    # --- requests -------------------------------------------------------------------------

    async def request(
        self,
        api_key: int,
        body: Mapping[str, Any] | Any,
        *,
        version: int | None = None,
        timeout_ms: int | None = None,
        expect_response: bool = True,
    ) -> Any:
        """Send one request and return the decoded response entity.

        ``body`` is a kio entity of the right version or a dict for
        :func:`moldau.protocol.entities.build` (strict: a required field left out raises).
        ``version`` defaults to the negotiated one. With ``expect_response=False`` (Produce
        with acks=0) the call returns None once the request is written.
        """
        if version is None:
            version = self.versions.require(api_key)
        if isinstance(body, Mapping):
            schema = request_schema(api_key, version)
            if schema is None:
                raise ValueError(f"no schema for {api_name(api_key)} v{version}")
            body = build(schema, body, strict=True)
        protocol = self._protocol
        if self._closed_error is not None or protocol is None or protocol.transport is None:
            raise self._closed_error or KafkaConnectionError(
                self.address, "closed", f"connection to {self.describe()} is not open"
            )
        correlation_id = next(self._correlation) & 0x7FFFFFFF
        frame = encode_request(api_key, version, correlation_id, self.client_id, body)
        if not protocol.writable.is_set():
            await protocol.writable.wait()
            if self._closed_error is not None:
                raise self._closed_error
        if not expect_response:
            protocol.transport.write(frame)
            return None
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[correlation_id] = _Pending(api_key, version, future)
        protocol.transport.write(frame)
        limit = (timeout_ms if timeout_ms is not None else self.request_timeout_ms) / 1000
        try:
            async with asyncio.timeout(limit):
                return await future
        except TimeoutError:
            if future.done() and not future.cancelled():
                return future.result()
            self._pending.pop(correlation_id, None)
            error = KafkaTimeoutError(
                f"{api_name(api_key)} v{version} request to {self.describe()} got no response "
                f"within {int(limit * 1000)} ms (request.timeout.ms); closing the connection"
            )
            self._fail(KafkaConnectionError(self.address, "timeout", str(error)))
            raise error from None
        except asyncio.CancelledError:
            # The caller gave up, the broker will still answer: keep the entry (its future is
            # cancelled, so the answer is dropped) rather than take that answer for an
            # unknown correlation id and close the connection for everyone else on it.
            future.cancel()
            raise

    def _on_frame(self, frame: Frame) -> None:
        if len(frame) < 4:
            self._fail(KafkaConnectionError(
                self.address, "protocol", f"{self.describe()} sent a {len(frame)}-byte frame"
            ))
            return
        (correlation_id,) = _INT32.unpack_from(frame, 0)
        pending = self._pending.pop(correlation_id, None)
        if pending is None:
            self._fail(KafkaConnectionError(
                self.address, "protocol",
                f"{self.describe()} answered unknown correlation id {correlation_id}",
            ))
            return
        if pending.future.done():
            return
        version = pending.version
        if (
            pending.api_key == ApiKey.API_VERSIONS
            and version > 0
            and len(frame) >= 6
            and _INT16.unpack_from(frame, 4)[0] == ErrorCode.unsupported_version
        ):
            version = 0  # KIP-511: the answer to an unsupported version is in v0 format
        if not isinstance(frame, bytes):
            # kio's native reader wants a read-only buffer; a read-only view copies nothing.
            frame = memoryview(frame).toreadonly()
        try:
            _cid, value = decode_response(pending.api_key, version, frame)
        except Exception as exc:
            error = KafkaConnectionError(
                self.address, "protocol",
                f"cannot decode {api_name(pending.api_key)} v{pending.version} response from "
                f"{self.describe()}: {exc}",
            )
            pending.future.set_exception(error)
            self._fail(error)
            return
        pending.future.set_result(value)

    # --- closing --------------------------------------------------------------------------

    def _fail(self, error: Exception) -> None:
        if self._closed_error is None:
            self._closed_error = error
        pending, self._pending = self._pending, {}
        for p in pending.values():
            if not p.future.done():
                p.future.set_exception(error)
        if self._protocol is not None and self._protocol.transport is not None:
            self._protocol.transport.close()
        else:
            self._closed.set()

    def _on_lost(self, exc: Exception | None) -> None:
        reason = f": {exc}" if exc else ""
        self._fail(KafkaConnectionError(
            self.address, "closed", f"connection to {self.describe()} was closed{reason}"
        ))
        self._closed.set()

    def close(self) -> None:
        """Close the connection; requests still in flight fail with KafkaConnectionError."""
        self._fail(KafkaConnectionError(
            self.address, "closed", f"connection to {self.describe()} was closed by the client"
        ))

    async def wait_closed(self) -> None:
        """Wait until the transport is gone."""
        if self._protocol is None:
            return
        await self._closed.wait()

    def __repr__(self) -> str:
        return f"<BrokerConnection {self.describe()} in_flight={self.in_flight}>"
