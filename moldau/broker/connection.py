"""One client connection: framing, in-order request processing, backpressure.

Kafka processes the requests of one connection strictly one at a time and answers in order;
clients rely on it (librdkafka pipelines produce requests and matches responses in order).
Synchronous handlers answer inline from ``buffer_updated``; an ``async`` handler (long-poll
fetch, acks=all produce, group joins) parks the connection until it completes, while other
connections go on.

One exception, for throughput with replication: Produce requests that arrive while an acks=all
produce of the same connection waits for its replicas are appended at once, in the order they
came, and answered in that order as each is done (:meth:`KafkaConnection._append_pipelined`).
Kafka handles them one after the other, each after the previous one's replication round trip;
with librdkafka's pipelining (one small request per record at ``linger.ms=0``) that made a
replicated leader fall behind a few thousand records a second on this Python broker. Appends
keep their order, so what a log holds is what Kafka would hold; only the waits overlap (each
timed from its own append, as Kafka's DelayedProduce). Any other request still waits its turn.

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

A client that closes its socket (or only its sending side) right after sending does not lose
what it sent: as Kafka's Selector keeps a closed channel until the requests already read from
it are processed ("closingChannels"), the connection drains. Frames already received are
handled in order, an async handler in flight finishes (a parked long-poll Fetch is dropped at
once: it only reads; after :data:`DRAIN_GRACE_S` every handler still waiting is given up), and
the answers are discarded.
A partly received frame is dropped. Each frame's memory goes back to the pool as it is
handled, and the rest when the drain ends. A connection that the broker closes (bad input,
idle, shutdown) drops what is queued instead.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import socket
import time
from collections import deque
from typing import Any, Protocol

from ..protocol.api_keys import ApiKey
from ..protocol.errors import ForeignProtocol, ProtocolError
from ..protocol.framing import Frame, FrameDecoder
from .config.loader import BrokerConfig
from .context import BrokerContext
from .dispatch import Disconnect, RawResponse, RequestContext, encode_result, parse_frame
from .handlers.api_versions import fallback_response
from .memory_pool import MemoryPool

log = logging.getLogger(__name__)

# Per-connection receive buffer, allocated when a connection first sends. Larger frames
# (produce requests of batched records) get a buffer of their own and are received without a
# copy, so a bigger one only costs memory: 8 KiB holds dozens of pipelined fetch, metadata
# or heartbeat requests, and 2,000 connections that sent something hold 16 MB.
RECEIVE_BUFFER = 8 * 1024

# How long a request in progress when its client left may still run (an acks=all produce
# waiting for its replicas, an offset commit being written, a parked JoinGroup): Kafka
# clients' default request.timeout.ms, after which the client itself would have given up.
DRAIN_GRACE_S = 30.0
# Requests that only read: parked in a long poll when the client leaves, they are dropped.
READ_ONLY_PARKED = frozenset({ApiKey.FETCH})


# A handler of a pipelined produce request raised (logged): the connection closes when its
# answer's turn comes.
_FAILED = object()


def _abandon(awaitable: Any) -> None:
    """Let go of a handler's result that will not be awaited (a coroutine that never ran
    would warn; one that ran to its end or was cancelled is closed already); a list holds
    the results of pipelined produce requests."""
    if isinstance(awaitable, list):
        for each in awaitable:
            _abandon(each)
    elif inspect.iscoroutine(awaitable) or getattr(awaitable, "defers_append", False):
        awaitable.close()


class ConnectionOwner(Protocol):
    """What a connection needs of the server that accepted it (:class:`~.server.Broker`)."""

    config: BrokerConfig
    memory_pool: MemoryPool
    connections: set[KafkaConnection]

    @property
    def context(self) -> BrokerContext:
        """The node as the connection's request handlers see it."""
        ...

    def admit(self, conn: KafkaConnection) -> bool: ...

    def note_memory_wait(self) -> None: ...


class KafkaConnection(asyncio.BufferedProtocol):
    """Protocol instance for one accepted socket on one listener."""

    def __init__(self, broker: ConnectionOwner, listener: str) -> None:
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
        self.draining = False  # the client left; requests already read are still handled
        self.reading_paused = False
        self.writing_paused = False
        self.task: asyncio.Task[Any] | None = None
        self.task_api = -1  # api key of the request ``task`` handles
        self.task_size = 0  # size of its frame
        self.task_awaitable: Any = None  # what the handler returned, ``task`` awaits it
        # (header, handler result, frame size) of the produce requests ``task`` answers in
        # order, while it answers produce requests; later ones join (_append_pipelined)
        self.pipelined: list[tuple[Any, Any, int]] | None = None
        self._grace: asyncio.TimerHandle | None = None  # ends a drain that takes too long
        self.impatient = False  # the drain took DRAIN_GRACE_S: async handlers are given up
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
        closed_by_broker = self.closed
        self.closed = True
        self.out = []
        self.decoder.discard()
        self.account.drop_partial()  # a frame cut off by the close is never handled
        if closed_by_broker or not (self.queue or self.busy):
            self._drop()
            return
        # The client left with requests read but not handled: handle them (see the module
        # docstring); the connection stays counted (max.connections) until they are done.
        self.draining = True
        self._grace = asyncio.get_running_loop().call_later(DRAIN_GRACE_S, self._grace_over)
        if not self.busy:
            self._process()
        elif self.task_api in READ_ONLY_PARKED:
            self._cancel_task()

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
            elif self.pipelined is not None:
                self._append_pipelined()
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
        while self.queue and (not self.closed or self.draining):
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
                chunks = self._encode(header, None, fallback=True)
                if chunks is None:
                    return
                out += chunks
                release(size)
                continue
            ctx = RequestContext(header, self.listener, self.client_host, self.client_port,
                                 self.broker.context, self)
            try:
                result = spec.fn(ctx, request)
            except Exception:
                log.exception("handler for api %s v%s failed", header.api_key, header.api_version)
                self.close("internal error")
                return
            if result is None:
                release(size)
                continue
            if type(result) is not RawResponse and inspect.isawaitable(result):
                if self.draining and (header.api_key in READ_ONLY_PARKED or self.impatient):
                    _abandon(result)  # nobody would read its answer
                    release(size)
                    continue
                self._flush()
                self.busy = True
                if header.api_key == ApiKey.PRODUCE and not self.draining:
                    self.pipelined = [(header, result, size)]
                    self.task_api, self.task_size = header.api_key, size
                    self.task_awaitable = [result]
                    self.task = asyncio.ensure_future(self._finish_pipelined(self.pipelined))
                    self._append_pipelined()
                    self._update_reading()  # the queue was drained into the pipeline
                    return
                self.task_api, self.task_size = header.api_key, size
                self.task_awaitable = result
                self.task = asyncio.ensure_future(self._finish(header, result, size))
                return
            chunks = self._encode(header, result)
            if chunks is None:
                return
            out += chunks
            release(size)
        self._flush()
        if self.draining:
            self._drained()
            return
        self._update_reading()

    async def _finish(self, header: Any, awaitable: Any, size: int) -> None:
        # A cancellation (CancelledError) is not caught: _cancel_task carries on after it.
        try:
            result = await awaitable
        except Exception:
            log.exception("handler for api %s v%s failed", header.api_key, header.api_version)
            self.close("internal error")
            return
        self.busy = False
        self.task = self.task_awaitable = None
        if self.closed and not self.draining:
            return
        chunks = self._encode(header, result)
        if chunks is None:
            return
        self._write(chunks)  # dropped unread when draining
        self.account.release(size)
        self._process()

    # --- produce requests pipelined behind one that waits for its replicas ----------------
    def _queued_produce(self) -> bool:
        """Whether the next queued frame is a Produce request (its api key, not parsed)."""
        if not self.queue:
            return False
        frame = self.queue[0]
        return len(frame) >= 2 and int.from_bytes(frame[:2], "big") == ApiKey.PRODUCE

    def _append_pipelined(self) -> None:
        """Handle the Produce requests queued behind one that waits (acks=all) now: their
        records are appended in the order they came, and each waits for its replicas from
        now on, so the requests of one connection share the replication round trips instead
        of taking one each. Answers still leave in order (:meth:`_finish_pipelined`). A
        request whose appends wait for transaction verification (``defers_append``) stops the
        pulling: nothing may be appended before it.

        A frame that cannot be handled here (a bad header, an acks=0 request, whose failure
        closes the connection) is put back and handled in order after the parked ones."""
        parked = self.pipelined
        while parked is not None and not self.draining and self._queued_produce():
            if getattr(parked[-1][1], "defers_append", False):
                # Its records are appended only once its transaction is verified: what came
                # after it waits its turn (handled once the parked ones are answered).
                return
            frame = self.queue.popleft()
            try:
                header, spec, request = parse_frame(frame)
            except Exception:
                spec = request = None
            if spec is None or getattr(request, "acks", 0) not in (1, -1):
                self.queue.appendleft(frame)
                return
            ctx = RequestContext(header, self.listener, self.client_host, self.client_port,
                                 self.broker.context, self)
            try:
                result: Any = spec.fn(ctx, request)
            except Exception:
                log.exception("handler for api %s v%s failed", header.api_key,
                              header.api_version)
                result = _FAILED
            parked.append((header, result, len(frame)))
            self.task_size += len(frame)
            self.task_awaitable.append(result)
            if result is _FAILED:
                return

    async def _finish_pipelined(self, parked: list[tuple[Any, Any, int]]) -> None:
        """Answer pipelined Produce requests in the order they came, each as soon as it and
        those before it are done."""
        try:
            done = 0
            while done < len(parked):  # requests arriving meanwhile join (_append_pipelined)
                header, awaitable, _size = parked[done]
                done += 1
                if awaitable is _FAILED:
                    self.close("internal error")
                    return
                if type(awaitable) is not RawResponse and inspect.isawaitable(awaitable):
                    try:
                        result = await awaitable
                    except Exception:
                        log.exception("handler for api %s v%s failed", header.api_key,
                                      header.api_version)
                        self.close("internal error")
                        return
                else:
                    result = awaitable
                if self.closed and not self.draining:
                    return
                chunks = self._encode(header, result)
                if chunks is None:
                    return
                self._write(chunks)  # dropped unread when draining
        finally:
            if self.pipelined is parked:
                self.pipelined = None
            for _header, awaitable, _size in parked:
                _abandon(awaitable)  # those never awaited (the connection went first)
        self.busy = False
        self.task = self.task_awaitable = None
        self.account.release(sum(entry[2] for entry in parked))
        self._process()

    def _encode(self, header: Any, result: Any, *, fallback: bool = False) -> list[Any] | None:
        """The response frame's chunks (``[]`` for no response); None when it cannot be
        encoded: the connection is then closed. Skipping the answer instead would let the
        next response take its place, and the client would match answers to the wrong
        requests."""
        try:
            if fallback:
                return [fallback_response(header)]
            return encode_result(header, result) or []
        except Exception:
            log.exception("cannot encode the response to api %s v%s (correlation id %s) for "
                          "%s:%s; closing the connection", header.api_key, header.api_version,
                          header.correlation_id, self.client_host, self.client_port)
            self.close("internal error")
            return None

    def _cancel_task(self) -> None:
        """Give up the request in progress of a draining connection (it may not even have
        started: then nothing in :meth:`_finish` runs) and go on with the queued ones."""
        task = self.task
        if task is None or task.done():
            return
        size, awaitable = self.task_size, self.task_awaitable

        def cancelled(_task: asyncio.Task[Any]) -> None:
            _abandon(awaitable)  # a task cancelled before it ran never awaited it
            if self.task is not task or not self.draining:
                return
            self.busy = False
            self.task = self.task_awaitable = self.pipelined = None
            self.account.release(size)
            self._process()

        task.add_done_callback(cancelled)
        task.cancel()

    def _grace_over(self) -> None:
        """The client left DRAIN_GRACE_S ago: give up the request in progress and any later
        one that would wait; requests answered at once are still handled."""
        self._grace = None
        self.impatient = True
        self._cancel_task()

    def _drained(self) -> None:
        """A draining connection handled every request it had read: let it go."""
        if not self.busy and not self.queue:
            self.draining = False
            self._drop()

    def _drop(self) -> None:
        """Forget the connection: its request in progress, its queue and all its memory."""
        self.draining = False
        self.broker.connections.discard(self)
        if self._grace is not None:
            self._grace.cancel()
            self._grace = None
        task = self.task
        if task is not None and not task.done() and task is not asyncio.current_task():
            awaitable = self.task_awaitable
            task.add_done_callback(lambda _task: _abandon(awaitable))
            task.cancel()
        self.queue.clear()
        self.account.close()

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
        # produce requests appended while an earlier one waits count as queued: they hold
        # their frames' memory until answered
        queued = len(self.queue) + (len(self.pipelined) if self.pipelined else 0)
        should_pause = self.writing_paused or queued >= self.max_queued
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
        if self.draining:  # the transport is gone already: stop handling what is left
            self._drop()
            return
        if self.transport is not None and not self.closed:
            self._flush()
            self.transport.close()
        self.closed = True
        self.queue.clear()
        self.account.close()
