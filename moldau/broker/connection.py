"""One client connection: framing, in-order request processing, backpressure.

Kafka processes the requests of one connection strictly one at a time and answers in order;
clients rely on it (librdkafka pipelines produce requests and matches responses in order).
Synchronous handlers answer inline from ``buffer_updated``; an ``async`` handler (long-poll
fetch, acks=all produce, group joins) parks the connection until it completes, while other
connections go on.

Backpressure: reading pauses when more than ``queued.max.requests`` frames wait, when the
transport's write buffer is above its high-water mark (the client is not reading responses),
or when the broker's request memory (``queued.max.request.bytes``, :mod:`.memory_pool`) is
exhausted; it resumes when the memory of handled requests is released.

Memory per connection: the receive buffer is small (frames larger than it are received into
their own buffer, which grows as bytes arrive, never to what a size prefix merely announces),
so 1,000 idle clients cost tens of MB, not hundreds. Responses to requests that arrived
together (librdkafka pipelines) leave in one ``writelines``: one syscall instead of one per
response.

Idle connections (no bytes either way for ``connections.max.idle.ms``, and no request in
progress) are closed by one broker-wide sweep (:meth:`Broker.expire_idle_connections`).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import socket
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from ..protocol.errors import ForeignProtocol, ProtocolError
from ..protocol.framing import Frame, FrameDecoder
from .dispatch import Disconnect, RawResponse, RequestContext, encode_result, frame_raw, parse_frame
from .handlers.api_versions import fallback_response

if TYPE_CHECKING:
    from .server import Broker

log = logging.getLogger(__name__)

# Per-connection receive buffer, allocated when a connection first sends. Larger frames
# (produce requests of batched records) get a buffer of their own and are received without a
# copy, so a bigger one only costs memory: 8 KiB holds dozens of pipelined fetch, metadata
# or heartbeat requests, and 2,000 connections that sent something hold 16 MB.
RECEIVE_BUFFER = 8 * 1024


class KafkaConnection(asyncio.BufferedProtocol):
    """Protocol instance for one accepted socket on one listener."""

    def __init__(self, broker: Broker, listener: str) -> None:
        self.broker = broker
        self.listener = listener
        config = broker.config
        self.account = broker.memory_pool.account(self._memory_available)
        self.decoder = FrameDecoder(config["socket.request.max.bytes"], RECEIVE_BUFFER,
                                    memory=self.account)
        self.max_queued = config["queued.max.requests"]
        self.queue: deque[Frame] = deque()
        self.out: list[Any] = []  # response chunks not yet handed to the transport
        self.transport: asyncio.Transport | None = None
        self.busy = False
        self.closed = False
        self.reading_paused = False
        self.writing_paused = False
        self.task: asyncio.Task[Any] | None = None
        self.client_host = ""
        self.client_port = 0
        self.last_active = time.monotonic()

    # --- asyncio callbacks ---------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        peer = transport.get_extra_info("peername")
        if peer:
            self.client_host, self.client_port = str(peer[0]), int(peer[1])
        transport.set_write_buffer_limits(high=4 * 1024 * 1024)
        if not self.broker.admit(self):
            self.closed = True
            transport.close()
            return
        self.broker.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.broker.connections.discard(self)
        if self.task is not None and not self.task.done():
            self.task.cancel()
        self.queue.clear()
        self.account.close()
        self.decoder.discard()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.decoder.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self.last_active = time.monotonic()
        try:
            frames = self.decoder.buffer_updated(nbytes)
        except ForeignProtocol as exc:
            self.close(f"closing connection from {self.client_host}:{self.client_port} on "
                       f"listener {self.listener}: it sent {exc.description} "
                       f"({exc.head!r}), not a Kafka request")
            return
        except ProtocolError as exc:
            self.close(f"bad frame from {self.client_host}:{self.client_port}: {exc}")
            return
        if frames:
            self.queue.extend(frames)
            if not self.busy:
                self._process()
        self._update_reading()

    def eof_received(self) -> bool | None:
        return None

    def pause_writing(self) -> None:
        self.writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self.writing_paused = False
        self._update_reading()

    # --- processing ----------------------------------------------------------------------
    def _process(self) -> None:
        # Responses gather here and leave together; close() flushes them first, so a
        # handler that closes the connection (failed acks=0 produce) loses no earlier answer.
        # A frame's memory goes back to the pool once its request has been handled.
        out = self.out
        release = self.account.release
        while self.queue and not self.closed:
            frame = self.queue.popleft()
            size = len(frame)
            try:
                header, spec, request = parse_frame(frame)
            except Disconnect as exc:
                self.close(f"closing connection from {self.client_host}:{self.client_port}: {exc}")
                return
            except Exception:
                log.exception("cannot decode a request from %s:%s", self.client_host,
                              self.client_port)
                self.close("internal error")
                return
            if spec is None:
                out.append(fallback_response(header))
                release(size)
                continue
            ctx = RequestContext(header, self.listener, self.client_host, self.client_port,
                                 self.broker, self)
            try:
                result = spec.fn(ctx, request)
            except Exception:
                log.exception("handler for api %s v%s failed", header.api_key, header.api_version)
                self.close("internal error")
                return
            if result is None:
                release(size)
                continue
            if type(result) is RawResponse:
                out += frame_raw(header, result.body)
                release(size)
                continue
            if inspect.isawaitable(result):
                self._flush()
                self.busy = True
                self.task = asyncio.ensure_future(self._finish(header, result, size))
                return
            out += encode_result(header, result) or ()
            release(size)
        self._flush()
        self._update_reading()

    async def _finish(self, header: Any, awaitable: Any, size: int) -> None:
        try:
            result = await awaitable
        except asyncio.CancelledError:
            return
        except Exception:
            log.exception("handler for api %s v%s failed", header.api_key, header.api_version)
            self.close("internal error")
            return
        self.busy = False
        self.task = None
        if self.closed:
            return
        self._write(encode_result(header, result))
        self.account.release(size)
        self._process()

    def _write(self, chunks: list[Any] | None) -> None:
        if chunks:
            self.out += chunks
            self._flush()

    def _flush(self) -> None:
        out = self.out
        if not out:
            return
        self.out = []
        if self.transport is None or self.closed:
            return
        self.last_active = time.monotonic()
        if len(out) == 1:
            self.transport.write(out[0])
        else:
            self.transport.writelines(out)

    def _update_reading(self) -> None:
        if self.transport is None or self.closed:
            return
        should_pause = self.writing_paused or len(self.queue) >= self.max_queued
        if self.decoder.waiting or self.account.must_wait:
            # Request memory is exhausted: read on when some of it is released.
            should_pause = True
            if not self.account.waiting:
                self.broker.note_memory_wait()
            self.account.wait(reserving=self.decoder.waiting)
        elif self.account.waiting:
            self.account.stop_waiting()  # its own requests finished: it may read again
        if should_pause and not self.reading_paused:
            self.transport.pause_reading()
            self.reading_paused = True
        elif not should_pause and self.reading_paused:
            self.transport.resume_reading()
            self.reading_paused = False

    def _memory_available(self) -> None:
        """Called by the memory pool when memory was released after this connection waited."""
        if self.closed:
            return
        self.last_active = time.monotonic()  # it was our pause: the idle clock starts now
        if self.decoder.waiting:
            self.decoder.retry()
        self._update_reading()

    @property
    def idle(self) -> bool:
        """True when no request is queued or in progress (a long poll is not idle) and the
        broker is not holding the connection back while it waits for request memory."""
        return not self.busy and not self.queue and not self.account.waiting

    def close(self, reason: str = "") -> None:
        if reason:
            log.info("%s", reason)
        if self.transport is not None and not self.closed:
            self._flush()
            self.transport.close()
        self.closed = True
        self.queue.clear()
        self.account.close()
