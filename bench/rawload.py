"""A minimal Kafka producer on a raw socket: the same pre-built 1 MiB record batch sent over
and over (Produce v3, acks=1), pipelined. It costs the client almost nothing, so it fills a
broker's log as fast as the broker can append (used to build the 5 GB restart log).
"""

from __future__ import annotations

import os
import socket
import struct
import time

from moldau.protocol.entities import build
from moldau.protocol.messages import encode_request, request_schema
from moldau.protocol.records.codec import build_batch

_SIZE = struct.Struct(">i")


def batch_of(size: int, record_size: int = 1000, seed: int = 0) -> bytes:
    """One RecordBatch v2 of about ``size`` bytes of distinct random records."""
    n = max(1, size // (record_size + 20))
    values = os.urandom(record_size * n)
    now = int(time.time() * 1000) + seed
    return build_batch((None, values[i * record_size:(i + 1) * record_size], [], now)
                       for i in range(n))


def produce_requests(topic: str, partitions: int, batch_bytes: int) -> list[bytearray]:
    """One Produce v3 request frame per partition, each with its own batch."""
    schema = request_schema(0, 3)
    frames = []
    for p in range(partitions):
        body = build(schema, {"transactional_id": None, "acks": 1, "timeout": 30_000,
                              "topic_data": [{"name": topic, "partition_data": [
                                  {"index": p, "records": batch_of(batch_bytes, seed=p)}]}]})
        frames.append(bytearray(encode_request(0, 3, 0, "moldau-bench", body)))
    return frames


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:])
        if not k:
            raise ConnectionError("broker closed the connection")
        got += k
    return bytes(buf)


def fill(host: str, port: int, topic: str, partitions: int, total_bytes: int,
         batch_bytes: int = 1 << 20, in_flight: int = 8) -> dict[str, float]:
    """Append at least ``total_bytes`` of batches to ``topic``; returns bytes/s achieved."""
    frames = produce_requests(topic, partitions, batch_bytes)
    per_request = len(frames[0])
    count = -(-total_bytes // per_request)
    sock = socket.create_connection((host, port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    t0 = time.monotonic()
    sent = received = 0
    try:
        while received < count:
            while sent < count and sent - received < in_flight:
                frame = frames[sent % partitions]
                struct.pack_into(">i", frame, 8, sent)  # correlation id
                sock.sendall(frame)
                sent += 1
            (size,) = _SIZE.unpack(_recv_exact(sock, 4))
            body = _recv_exact(sock, size)
            (corr,) = _SIZE.unpack_from(body, 0)
            if corr != received:
                raise RuntimeError(f"response {corr} out of order (expected {received})")
            # v3 response: topics[1] name, partitions[1] index, error_code
            (name_len,) = struct.unpack_from(">h", body, 8)
            (error,) = struct.unpack_from(">h", body, 10 + name_len + 4 + 4)
            if error:
                raise RuntimeError(f"produce failed with error code {error}")
            received += 1
    finally:
        sock.close()
    elapsed = time.monotonic() - t0
    return {"bytes": count * per_request, "seconds": round(elapsed, 3),
            "mb_per_s": round(count * per_request / elapsed / 2**20, 1)}
