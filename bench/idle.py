"""What 1,000 idle client connections cost a broker (RSS)."""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

from .proc import rss_bytes

# ApiVersions v0 request, correlation id 1, null client id
_API_VERSIONS = struct.pack(">ihhih", 10, 18, 0, 1, -1)


def idle_connections(host: str, port: int, pid: int, count: int,
                     hold_s: float = 2.0) -> dict[str, Any]:
    """Open ``count`` connections, each completing one ApiVersions exchange, and hold them."""
    time.sleep(0.5)
    before = rss_bytes(pid)
    socks: list[socket.socket] = []
    t0 = time.monotonic()
    try:
        for _ in range(count):
            s = socket.create_connection((host, port), timeout=10)
            s.sendall(_API_VERSIONS)
            socks.append(s)
        for s in socks:
            (size,) = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))
            s.recv(size, socket.MSG_WAITALL)
        opened_s = time.monotonic() - t0
        time.sleep(hold_s)
        during = rss_bytes(pid)
    finally:
        for s in socks:
            s.close()
    return {"connections": len(socks), "open_s": round(opened_s, 3),
            "rss_before_mb": round(before / 2**20, 1), "rss_with_mb": round(during / 2**20, 1),
            "rss_delta_mb": round((during - before) / 2**20, 1),
            "kb_per_connection": round((during - before) / len(socks) / 1024, 1)}
