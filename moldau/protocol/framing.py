"""Size-prefixed frame decoding, sans-I/O, shaped for ``asyncio.BufferedProtocol``.

``get_buffer()`` hands out space to receive into; ``buffer_updated(n)`` returns the frames
completed by those bytes. Small frames are copied out of one reused receive buffer; a frame
larger than that buffer gets its own bytearray, received into directly, so a 1 MiB produce
request is never copied on the way in. The receive buffer is what an idle connection costs,
so a server with many connections picks a small one (frames above it are not copied anyway).
"""

from __future__ import annotations

import struct

from .errors import FrameTooLarge, ProtocolError

_SIZE = struct.Struct(">i")


class FrameDecoder:
    """Split a byte stream into Kafka frames (each without its 4-byte size prefix)."""

    def __init__(self, max_frame_size: int, buffer_size: int = 256 * 1024) -> None:
        self.max_frame_size = max_frame_size
        self._buf = bytearray(buffer_size)
        self._view = memoryview(self._buf)  # slicing a view copies nothing
        self._start = 0
        self._end = 0
        self._big: bytearray | None = None
        self._big_filled = 0

    def get_buffer(self) -> memoryview:
        """Writable space for the next bytes from the socket."""
        if self._big is not None:
            return memoryview(self._big)[self._big_filled :]
        if self._end == len(self._buf):
            self._compact()
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int) -> list[bytes | bytearray]:
        """Account for ``nbytes`` written into the last buffer; return completed frames."""
        frames: list[bytes | bytearray] = []
        if self._big is not None:
            self._big_filled += nbytes
            if self._big_filled < len(self._big):
                return frames
            frames.append(self._big)
            self._big = None
            self._big_filled = 0
            return frames
        self._end += nbytes
        buf = self._buf
        view = self._view
        start, end = self._start, self._end
        while end - start >= 4:
            (size,) = _SIZE.unpack_from(buf, start)
            if size < 0:
                raise ProtocolError(f"negative frame size {size}")
            if size > self.max_frame_size:
                raise FrameTooLarge(
                    f"frame of {size} bytes exceeds socket.request.max.bytes "
                    f"({self.max_frame_size})"
                )
            if end - start - 4 >= size:
                frames.append(bytes(view[start + 4 : start + 4 + size]))
                start += 4 + size
                continue
            if size + 4 > len(buf):
                big = bytearray(size)
                have = end - start - 4
                big[:have] = view[start + 4 : end]
                self._big, self._big_filled = big, have
                start = end = 0
            break
        if start == end:
            start = end = 0
        self._start, self._end = start, end
        return frames

    def feed(self, data: bytes) -> list[bytes | bytearray]:
        """Convenience for tests and fuzzing: push ``data`` and collect frames."""
        frames: list[bytes | bytearray] = []
        view = memoryview(data)
        while view:
            space = self.get_buffer()
            n = min(len(space), len(view))
            space[:n] = view[:n]
            view = view[n:]
            frames.extend(self.buffer_updated(n))
        return frames

    def _compact(self) -> None:
        pending = self._end - self._start
        if self._start:
            self._view[:pending] = self._view[self._start : self._end]
        self._start, self._end = 0, pending
