"""Pieces of the live fuzzer (:mod:`.live`): what is in flight, the broker log reader, and
helpers that read requests, seeds and partitions."""

from __future__ import annotations

import os
import re
import socket
import struct
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.records.batch import iter_batches
from moldau.protocol.records.codec import decode_batch
from tests.integration.broker_wire import Wire, fetch_raw, list_offset

from .batches import check_batches

_TRACEBACK = "Traceback (most recent call last):"
_LOG_RECORD = re.compile(r"^\[\d{4}-\d\d-\d\d ")
# A handler raised, or its response could not be encoded: both name the api and version.
HANDLER_FAILED = re.compile(r"(?:handler for|cannot encode the response to) api (-?\d+) "
                            r"v(-?\d+)\b")
SIZE = struct.Struct(">i")


@dataclass
class Finding:
    kind: str
    signature: str
    detail: str
    inputs: list[tuple[int, bytes]]  # (input number, bytes as sent, with size prefix)
    known: str = ""
    count: int = 1


@dataclass
class Pending:
    n: int
    payload: bytes  # as sent, with the size prefix
    api_key: int
    version: int
    cid: int
    expect: str  # "response", "none" (acks=0 produce) or "close"
    wait: float  # seconds the broker may rightly take (long polls, rebalances)
    produce: list[tuple[str, int, bytes | None]] | None = None
    fallback: bool = False  # an ApiVersions answered in the KIP-511 v0 format
    slow: bool = False  # may rightly wait (group joins, long polls): sent on a slow lane


@dataclass
class Conn:
    sock: socket.socket
    lonely: bool = False
    slow: bool = False
    out: bytearray = field(default_factory=bytearray)
    inbuf: bytearray = field(default_factory=bytearray)
    pending: deque[Pending] = field(default_factory=deque)
    next_cid: int = 1
    head_since: float = field(default_factory=time.monotonic)
    opened: float = field(default_factory=time.monotonic)


class BrokerLog:
    """Reads what the broker appended to its log, complete lines only."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.pos = path.stat().st_size if path.exists() else 0
        self.carry = ""

    def new_tracebacks(self) -> list[str]:
        with open(self.path, "rb") as f:
            f.seek(self.pos)
            data = f.read()
        end = data.rfind(b"\n")
        if end < 0:
            return []
        self.pos += end + 1
        text = self.carry + data[: end + 1].decode(errors="replace")
        out = []
        lines = text.splitlines()
        i = 0
        self.carry = ""
        while i < len(lines):
            if lines[i].startswith(_TRACEBACK):
                start = max(0, i - 1)
                j = i + 1
                while j < len(lines) and not _LOG_RECORD.match(lines[j]):
                    j += 1
                if j == len(lines):  # the traceback may go on: read it with the next lines
                    self.carry = "\n".join(lines[start:]) + "\n"
                    break
                out.append("\n".join(lines[start:j]))
                i = j
            else:
                i += 1
        return out



def rss_kb(pid: int) -> int:
    """A process's resident memory (VmRSS) in KiB; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return 0
    return 0


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) a process used so far; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


@contextmanager
def suppress() -> Iterator[None]:
    try:
        yield
    except (OSError, KeyError, ValueError):
        pass


def read_values(wire: Wire, topic: str, partition: int, first: int, end: int
                 ) -> dict[int, bytes | None]:
    """{offset: value} of the records in [first, end) that decode."""
    got: dict[int, bytes | None] = {}
    offset = max(first, list_offset(wire, topic, partition, -2))
    while offset < end:
        entry = fetch_raw(wire, topic, partition, offset)
        if entry["error_code"] == ErrorCode.offset_out_of_range:
            start = list_offset(wire, topic, partition, -2)
            if start <= offset:
                break
            offset = start
            continue
        data = entry["records"] or b""
        advanced = False
        for pos, header in iter_batches(data):
            try:
                decoded = decode_batch(data, pos)
            except Exception:
                pass
            else:
                # Only batches whose records number 0..n-1 (others may name any offset,
                # which Kafka allows, and are not in the ledger).
                base = header.base_offset
                if [r.offset - base for r in decoded.records] == list(range(len(decoded.records))):
                    for record in decoded.records:
                        got.setdefault(record.offset, record.value)
            if header.next_offset > offset:
                offset = header.next_offset
                advanced = True
        if not advanced:
            break
    return got


def no_problems(problems: list[str]) -> None:
    if problems:
        raise AssertionError("; ".join(problems[:10]) + (" ..." if len(problems) > 10 else ""))


def ms(value: Any) -> int:
    from moldau.protocol.entities import to_ms

    return to_ms(value)


def api_versions_v0() -> Any:
    from moldau.protocol.messages import request_schema

    return request_schema(ApiKey.API_VERSIONS, 0)()


def names(request: Any) -> set[str]:
    """Topic names (and resource names) anywhere in a decoded request."""
    from .mutate import leaves

    out = set()
    for _path, f, value in leaves(request):
        if isinstance(value, str) and (f.type_name == "TopicName" or f.name in (
                "resource_name", "topic", "topic_name", "name")):
            out.add(value)
        elif f.kind == "strs" and value and f.type_name == "TopicName":
            out.update(value)
    return out


def partitions_asked(api: int, request: Any) -> int:
    total = 0
    for topic in request.topics:
        if api == ApiKey.CREATE_TOPICS:
            total += len(topic.assignments) or max(topic.num_partitions, 1)
        else:
            total += max(topic.count, 0)
    return total


def seed_batches(seeds: list[Any]) -> Iterator[bytes]:
    """The record batches real clients sent in the corpus's Produce requests."""
    from moldau.protocol.messages import decode_request_header
    from moldau.protocol.produce_request import decode_produce_body

    for seed in seeds:
        if seed.api_key != ApiKey.PRODUCE or seed.source == "built":
            continue
        header, offset = decode_request_header(seed.frame)
        try:
            request = decode_produce_body(header.api_version, seed.frame, offset)
        except Exception:
            continue
        for _t, parts in request.topics:
            for _p, blob in parts:
                if blob is not None and check_batches(blob).problem is None:
                    yield bytes(blob)


