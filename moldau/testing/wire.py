"""Drive a broker's connections in process, without sockets (benchmarks and tests).

:class:`NullTransport` stands in for the socket and counts what the broker writes; :func:`feed`
pushes request bytes through a :class:`KafkaConnection` as if they had been received; the
``*_frame`` helpers build requests with kio, as a client would send them.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from ..broker.connection import KafkaConnection
from ..protocol.entities import build
from ..protocol.messages import encode_request, request_schema
from ..protocol.records.codec import build_batch


class NullTransport(asyncio.Transport):
    """Counts what the broker writes."""

    def __init__(self) -> None:
        super().__init__()
        self.written = 0
        self.writes = 0

    def write(self, data: Any) -> None:
        self.written += len(data)
        self.writes += 1

    def writelines(self, chunks: Any) -> None:
        for c in chunks:
            self.written += len(c)
        self.writes += 1

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass


def _frame(api_key: int, version: int, body: dict[str, Any]) -> bytes:
    entity = build(request_schema(api_key, version), body)
    return encode_request(api_key, version, 1, "rdkafka", entity)


def produce_frame(topic: str, partitions: int, records: int, size: int, acks: int = 1) -> bytes:
    value = bytes(size)
    now = int(time.time() * 1000)
    batch = build_batch([(None, value, [], now)] * records)
    return _frame(0, 10, {"transactional_id": None, "acks": acks, "timeout": 30_000,
                          "topic_data": [{"name": topic, "partition_data": [
                              {"index": p, "records": batch} for p in range(partitions)]}]})


def fetch_frame(topic_id: uuid.UUID, partitions: int, offset: int,
                max_wait_ms: int = 0) -> bytes:
    return _frame(1, 16, {"replica_id": -1, "max_wait": max_wait_ms, "min_bytes": 1,
                          "max_bytes": 52428800, "isolation_level": 0, "session_id": 0,
                          "session_epoch": -1, "topics": [{"topic_id": topic_id, "partitions": [
                              {"partition": p, "current_leader_epoch": -1,
                               "fetch_offset": offset, "last_fetched_epoch": -1,
                               "log_start_offset": -1, "partition_max_bytes": 1048576}
                              for p in range(partitions)]}],
                          "forgotten_topics_data": [], "rack_id": ""})


def metadata_frame(topics: list[str]) -> bytes:
    return _frame(3, 12, {"topics": [{"topic_id": uuid.UUID(int=0), "name": t}
                                     for t in topics],
                          "allow_auto_topic_creation": False,
                          "include_topic_authorized_operations": False})


def feed(conn: KafkaConnection, frame: bytes) -> None:
    """Push ``frame`` through ``conn`` as if it arrived from the socket."""
    view = memoryview(frame)
    while view:
        buf = conn.get_buffer(len(view))
        n = min(len(buf), len(view))
        buf[:n] = view[:n]
        conn.buffer_updated(n)
        view = view[n:]
