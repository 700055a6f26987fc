"""Sans-I/O frame tracking for the two directions of a proxied connection.

The proxy never reassembles frames it does not need. Client bytes go to the broker exactly as
they arrive; :class:`RequestScanner` only follows frame boundaries and peeks at the first
8 bytes of each request (api key, version, correlation id) so the proxy knows which responses
to rewrite. Broker bytes go to the client as they arrive too, except the frames whose
correlation id was marked: :class:`ResponseStream` holds such a frame back until it is
complete, hands it to a rewrite function and emits the result in its place, so responses keep
their order.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable

from moldau.protocol.errors import ProtocolError

_PRODUCE = 0

# size, api_key, api_version, correlation_id
_REQUEST_HEAD = struct.Struct(">ihhi")
# size, correlation_id
_RESPONSE_HEAD = struct.Struct(">ii")

RequestHead = tuple[int, int, int]  # api_key, api_version, correlation_id
Piece = bytes | bytearray | memoryview
# (api_key, api_version, frame without size prefix) -> the whole new frame, or None to keep it
# correlation id of a response -> (api_key, api_version) when it must be rewritten, else None
Lookup = Callable[[int], tuple[int, int] | None]
Rewriter = Callable[[int, int, bytes], bytes | None]


class RequestScanner:
    """Follows request frame boundaries in a client's byte stream.

    :meth:`feed` returns ``(api_key, api_version, correlation_id)`` of every request whose
    first 12 bytes (size + 8 header bytes) were completed by ``data``. Bytes are not copied
    except a header split across two reads (at most 11 bytes kept).
    """

    __slots__ = ("_head", "_remaining")

    def __init__(self) -> None:
        self._remaining = 0  # bytes of the current frame after its 12-byte head
        self._head = bytearray()

    def feed(self, data: bytes | bytearray | memoryview) -> list[RequestHead]:
        """Account for ``data``; return the heads of requests that start in it."""
        heads: list[RequestHead] = []
        pos = 0
        end = len(data)
        remaining = self._remaining
        head = self._head
        while True:
            if remaining:
                if remaining >= end - pos:
                    self._remaining = remaining - (end - pos)
                    return heads
                pos += remaining
                remaining = 0
            if head or end - pos < 12:
                take = min(12 - len(head), end - pos)
                head += data[pos : pos + take]
                pos += take
                if len(head) < 12:
                    self._remaining = 0
                    return heads
                size, api_key, version, correlation_id = _REQUEST_HEAD.unpack(head)
                head.clear()
            else:
                size, api_key, version, correlation_id = _REQUEST_HEAD.unpack_from(data, pos)
                pos += 12
            if size < 8:
                raise ProtocolError(f"request frame of {size} bytes is shorter than a header")
            heads.append((api_key, version, correlation_id))
            remaining = size - 8


class ResponseStream:
    """Passes a broker's response stream through, rewriting the frames asked for.

    ``lookup(correlation_id)`` is called once per response frame, at its head; it returns
    ``(api_key, api_version)`` when the frame must go through ``rewrite`` (None: pass it on).
    :meth:`feed` returns the pieces to write to the client, in order: slices of the input, and
    rewritten frames in place of the held-back ones. Frames larger than ``max_rewrite_size``
    are passed through unchanged rather than buffered.
    """

    __slots__ = ("_capture", "_filled", "_head", "_lookup", "_max", "_pending_head",
                 "_remaining", "_rewrite")

    def __init__(self, lookup: Lookup, rewrite: Rewriter,
                 max_rewrite_size: int = 256 * 1024 * 1024) -> None:
        self._lookup = lookup
        self._rewrite = rewrite
        self._max = max_rewrite_size
        self._remaining = 0  # bytes of a passed-through frame still to come
        self._head = bytearray()  # a response head split across reads
        self._capture: bytearray | None = None  # a frame being held back (with its prefix)
        self._filled = 0
        self._pending_head: tuple[int, int] | None = None  # (api_key, version) of the capture

    @property
    def idle(self) -> bool:
        """True at a frame boundary with nothing held back."""
        return not self._remaining and not self._head and self._capture is None

    def feed(self, data: bytes) -> list[Piece]:
        """Account for ``data``; return what to send to the client now."""
        out: list[Piece] = []
        pos = 0
        end = len(data)
        run = 0  # start of the current pass-through run in ``data``
        lookup = self._lookup
        view = memoryview(data)
        while pos < end:
            capture = self._capture
            if capture is not None:
                take = min(len(capture) - self._filled, end - pos)
                capture[self._filled : self._filled + take] = view[pos : pos + take]
                self._filled += take
                pos += take
                run = pos
                if self._filled == len(capture):
                    self._capture = None
                    out.append(self._finish(capture))
                continue
            if self._remaining:
                step = min(self._remaining, end - pos)
                pos += step
                self._remaining -= step
                continue
            head = self._head
            if head or end - pos < 8:
                if run < pos:
                    out.append(view[run:pos])
                take = min(8 - len(head), end - pos)
                head += view[pos : pos + take]
                pos += take
                run = pos
                if len(head) < 8:
                    break
                size, correlation_id = _RESPONSE_HEAD.unpack(head)
                carried = bytes(head)
                head.clear()
            else:
                size, correlation_id = _RESPONSE_HEAD.unpack_from(data, pos)
                carried = None
                pos += 8
            if size < 4:
                raise ProtocolError(f"response frame of {size} bytes has no correlation id")
            target = lookup(correlation_id)
            if target is None or size > self._max:
                if carried is not None:
                    out.append(carried)
                    run = pos
                self._remaining = size - 4
                continue
            start = pos - 8
            if carried is None and start + 4 + size <= end:
                # The whole frame is in this read: look at it in place; if it stays as it
                # is, it simply remains part of the pass-through run.
                replaced = self._rewrite(target[0], target[1], view[start + 4 : start + 4 + size])
                if replaced is not None:
                    if run < start:
                        out.append(view[run:start])
                    out.append(replaced)
                    run = start + 4 + size
                pos = start + 4 + size
                continue
            # Hold the frame back: flush what went before it, then collect it (one copy).
            if carried is None and run < start:
                out.append(view[run:start])
            capture = bytearray(size + 4)
            capture[:8] = carried if carried is not None else view[start:pos]
            self._capture, self._filled, self._pending_head = capture, 8, target
            run = pos
        if run < end:
            out.append(data if run == 0 else view[run:end])
        return out

    def _finish(self, frame: bytearray) -> Piece:
        assert self._pending_head is not None
        api_key, version = self._pending_head
        self._pending_head = None
        replaced = self._rewrite(api_key, version, memoryview(frame).toreadonly()[4:])
        return frame if replaced is None else replaced


class InFlight:
    """The requests sent on one connection and not answered yet, oldest first.

    Kafka answers requests on a connection in the order they were sent, and answers every
    request except Produce with ``acks=0``. So the answer to a correlation id is found at the
    head of the queue once unanswered Produce requests ahead of it are dropped. ``wanted``
    says which ``(api_key, api_version)`` answers the proxy rewrites; :meth:`answer` returns
    the request's ``(api_key, api_version)`` for those and None for the rest.
    """

    __slots__ = ("_queue", "_wanted", "unmatched")

    def __init__(self, wanted: Callable[[int, int], bool]) -> None:
        self._queue: deque[tuple[int, int, int, bool]] = deque()
        self._wanted = wanted
        self.unmatched = 0  # answers whose correlation id was not the expected one

    def __len__(self) -> int:
        return len(self._queue)

    def add(self, heads: list[RequestHead]) -> None:
        """Record requests as they are forwarded to the broker."""
        wanted = self._wanted
        append = self._queue.append
        for api_key, version, correlation_id in heads:
            append((correlation_id, api_key, version, wanted(api_key, version)))

    def answer(self, correlation_id: int) -> tuple[int, int] | None:
        """Match a response to its request; ``(api_key, api_version)`` if it is rewritten."""
        queue = self._queue
        while queue:
            head_id, api_key, version, wanted = queue[0]
            if head_id == correlation_id:
                queue.popleft()
                return (api_key, version) if wanted else None
            if api_key != _PRODUCE:
                break
            queue.popleft()  # a Produce with acks=0: the broker never answers it
        self.unmatched += 1
        return None
