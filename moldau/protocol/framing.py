"""Size-prefixed frame decoding, sans-I/O, shaped for ``asyncio.BufferedProtocol``.

``get_buffer()`` hands out space to receive into; ``buffer_updated(n)`` returns the frames
completed by those bytes. Small frames are copied out of one reused receive buffer (allocated
when the first bytes arrive). A frame larger than that buffer gets a buffer of its own and is
received into it directly, so a 1 MiB produce request is never copied on the way in.

Memory follows the bytes that arrive, never the size a peer announces: a frame up to 64 KiB
gets its buffer at once; a larger one gets an anonymous memory map of its announced size, of
which the decoder hands out only what its :class:`FrameMemory` granted, in steps that double
with what has arrived (64 KiB, then as much again as already received). The operating system
backs a map's pages only when they are written, so a peer that announces 100 MiB and sends
nothing costs one step of accounting and no memory at all.

A :class:`FrameMemory` (the broker's ``queued.max.request.bytes`` pool) may refuse a step;
:attr:`FrameDecoder.waiting` then turns true, the caller stops reading and calls
:meth:`FrameDecoder.retry` when memory was released. Without one, memory is not limited.

The first bytes of a connection are checked for other protocols (an HTTP server's answer, an
HTTP request, TLS, SSH) before they are read as a size, so a wrong address or port gets a
:class:`ForeignProtocol` error that says what answered instead of "a frame of 1213486160
bytes" (which is ``b"HTTP"``).
"""

from __future__ import annotations

import mmap
import struct
from typing import Protocol

from .errors import ForeignProtocol, FrameTooLarge, ProtocolError

_SIZE = struct.Struct(">i")

# Frames up to this size get their whole buffer at once (from the heap, reused, cheap);
# larger ones a memory map whose pages are reserved, and backed, as bytes arrive.
ALLOCATE_AT_ONCE = 64 * 1024
# The smallest reservation step of a large frame.
STEP = 64 * 1024

Frame = bytes | memoryview


class FrameMemory(Protocol):
    """Where a decoder accounts the memory of its frames (a broker-wide pool)."""

    def reserve(self, nbytes: int) -> bool:
        """Account ``nbytes`` more for the frame being received; False refuses them."""

    def complete(self, nbytes: int, reserved: int) -> None:
        """A frame of ``nbytes`` is complete; ``reserved`` of them were reserved before (the
        rest, a small frame copied out of the receive buffer, is accounted now)."""


# First four bytes of other protocols, as they would be misread as a frame size.
_FOREIGN = {
    b"HTTP": ("http-response", "an HTTP response"),
    b"SSH-": ("ssh", "an SSH banner"),
    **{method: ("http-request", "an HTTP request")
       for method in (b"GET ", b"POST", b"PUT ", b"HEAD", b"DELE", b"OPTI", b"PATC",
                      b"CONN", b"TRAC", b"PRI ")},
}


def sniff_foreign(head: bytes | bytearray | memoryview) -> tuple[str, str] | None:
    """``(kind, description)`` when the first four bytes of a connection belong to another
    protocol (HTTP request or response, TLS record, SSH banner); None if they may be Kafka.

    A TLS record starts with its content type (0x15 alert, 0x16 handshake) and major
    version 3; read as a Kafka size that is a frame of at least 352 MB, which no first
    request or response of a Kafka connection comes near.
    """
    head = bytes(head[:4])
    found = _FOREIGN.get(head)
    if found is not None:
        return found
    if len(head) >= 3 and head[0] in (0x15, 0x16) and head[1] == 3 and head[2] <= 4:
        return ("tls", "a TLS alert" if head[0] == 0x15 else "a TLS handshake")
    return None


class FrameDecoder:
    """Split a byte stream into Kafka frames (each without its 4-byte size prefix).

    Frames come out as ``bytes`` (small ones) or read-only ``memoryview`` (frames that got a
    buffer of their own). ``limit_name`` names the limit in the error for a frame over
    ``max_frame_size`` (the broker's key; a client says what its limit is).
    """

    def __init__(self, max_frame_size: int, buffer_size: int = 256 * 1024, *,
                 memory: FrameMemory | None = None,
                 limit_name: str = "socket.request.max.bytes") -> None:
        self.max_frame_size = max_frame_size
        self.limit_name = limit_name
        self.memory = memory
        # Allocated when the first bytes arrive: a connection that never sends costs nothing.
        self._buffer_size = buffer_size
        self._buf = bytearray()
        self._view = memoryview(self._buf)  # slicing a view copies nothing
        self._start = 0
        self._end = 0
        self._first = True  # nothing read yet: check for other protocols
        # The frame being received into its own buffer.
        self._big: memoryview | None = None
        self._big_size = 0
        self._big_filled = 0
        self._big_granted = 0
        # A refused reservation: how much is needed, and the size of a frame whose own
        # buffer could not be started yet (its first bytes wait in the receive buffer).
        self._wanted = 0
        self._pending_size = 0

    @property
    def waiting(self) -> bool:
        """True while reading must pause until :meth:`retry` gets the memory it needs."""
        return self._wanted > 0

    @property
    def in_frame(self) -> bool:
        """True while a frame with its own buffer is partly received."""
        return self._big is not None or self._pending_size > 0

    def get_buffer(self) -> memoryview:
        """Writable space for the next bytes from the socket."""
        if self._wanted:
            raise RuntimeError("frame decoder is waiting for memory: pause reading, retry()")
        if self._big is not None:
            return self._big[self._big_filled : self._big_granted]
        if self._end == len(self._buf):
            if not self._buf:
                self._buf = bytearray(self._buffer_size)
                self._view = memoryview(self._buf)
            self._compact()
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int) -> list[Frame]:
        """Account for ``nbytes`` written into the last buffer; return completed frames."""
        if self._big is not None:
            self._big_filled += nbytes
            if self._big_filled == self._big_size:
                return [self._finish_big()]
            if self._big_filled == self._big_granted:
                self._grow()
            return []
        self._end += nbytes
        return self._split()

    def retry(self) -> bool:
        """Ask again for the memory a refused reservation wanted; True when reading may go on."""
        if not self._wanted:
            return True
        if self._big is None:
            return self._begin_big(self._pending_size, self._start, self._end)
        if self.memory is not None and not self.memory.reserve(self._wanted):
            return False
        self._big_granted += self._wanted
        self._wanted = 0
        return True

    def discard(self) -> None:
        """Drop a partly received frame and what waits in the receive buffer (the
        connection is gone)."""
        self._big = None
        self._big_size = self._big_filled = self._big_granted = 0
        self._wanted = self._pending_size = 0
        self._start = self._end = 0

    def feed(self, data: bytes) -> list[Frame]:
        """Convenience for tests and fuzzing: push ``data`` and collect frames."""
        frames: list[Frame] = []
        view = memoryview(data)
        while view:
            if self._wanted and not self.retry():
                raise RuntimeError("frame memory refused; cannot feed more")
            space = self.get_buffer()
            n = min(len(space), len(view))
            space[:n] = view[:n]
            view = view[n:]
            frames.extend(self.buffer_updated(n))
        return frames

    # --- internals -------------------------------------------------------------------------
    def _split(self) -> list[Frame]:
        frames: list[Frame] = []
        buf = self._buf
        view = self._view
        start, end = self._start, self._end
        while end - start >= 4:
            if self._first:
                foreign = sniff_foreign(view[start : start + 4])
                if foreign is not None:
                    raise ForeignProtocol(foreign[0], foreign[1], bytes(view[start:end][:16]))
                self._first = False
            (size,) = _SIZE.unpack_from(buf, start)
            if size < 0:
                raise ProtocolError(f"negative frame size {size}")
            if size > self.max_frame_size:
                raise FrameTooLarge(
                    f"frame of {size} bytes exceeds {self.limit_name} ({self.max_frame_size})"
                )
            if end - start - 4 >= size:
                frames.append(bytes(view[start + 4 : start + 4 + size]))
                if self.memory is not None:
                    self.memory.complete(size, 0)
                start += 4 + size
                continue
            if size + 4 > len(buf) and not self._begin_big(size, start, end):
                self._start, self._end = start, end
                return frames
            if self._big is not None:
                return frames
            break
        if start == end:
            start = end = 0
        self._start, self._end = start, end
        return frames

    def _begin_big(self, size: int, start: int, end: int) -> bool:
        """Give the frame at ``start`` its own buffer (False: its memory was refused)."""
        have = end - start - 4
        # Without a FrameMemory nothing is accounted: the whole map is handed out at once
        # (its pages are still backed only as bytes arrive).
        if size <= ALLOCATE_AT_ONCE or self.memory is None:
            grant = size
        else:
            grant = min(size, max(STEP, 2 * have))
        if self.memory is not None and not self.memory.reserve(grant):
            self._wanted, self._pending_size = grant, size
            return False
        if size <= ALLOCATE_AT_ONCE:
            big = memoryview(bytearray(size))
        else:
            # Pages of an anonymous map are backed only when written: the memory follows
            # the bytes that arrive, and the frame is still received without a copy.
            big = memoryview(mmap.mmap(-1, size))
        big[:have] = self._view[start + 4 : end]
        self._big, self._big_size, self._big_filled, self._big_granted = big, size, have, grant
        self._wanted = self._pending_size = 0
        self._start = self._end = 0
        return True

    def _grow(self) -> None:
        step = min(self._big_size - self._big_granted, max(STEP, self._big_granted))
        if self.memory is not None and not self.memory.reserve(step):
            self._wanted = step
            return
        self._big_granted += step

    def _finish_big(self) -> memoryview:
        assert self._big is not None
        frame = self._big.toreadonly()
        if self.memory is not None:
            self.memory.complete(self._big_size, self._big_granted)
        self._big = None
        self._big_size = self._big_filled = self._big_granted = 0
        return frame

    def _compact(self) -> None:
        pending = self._end - self._start
        if self._start:
            self._view[:pending] = self._view[self._start : self._end]
        self._start, self._end = 0, pending
