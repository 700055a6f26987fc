"""Helpers for broker-level robustness tests: a raw Kafka protocol socket and checks that a
broker still serves and still holds what it acknowledged.

Used by the integration tests that speak the protocol themselves (test_bad_input.py,
test_wire_limits.py, test_resource_limits.py, test_admin_protocol.py, ...) and by
tests/faults/test_broker_durability.py. Everything here talks to a real broker over TCP.
"""

from __future__ import annotations

import itertools
import socket
import struct
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.entities import build, to_dict
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages import decode_response, encode_request, request_schema
from moldau.protocol.records.codec import build_batch, iter_decoded
from moldau.testing.runner import BrokerProcess

_INT32 = struct.Struct(">i")
PRODUCE_VERSION = 9
FETCH_VERSION = 12


def request_frame(api: int, version: int, body: dict[str, Any] | Any, *,
                  correlation_id: int = 1, client_id: str | None = "robustness-test") -> bytes:
    """A request frame (with its size prefix) built from plain data, for raw sockets."""
    schema = request_schema(api, version)
    assert schema is not None, f"api {api} v{version} has no schema"
    return encode_request(api, version, correlation_id, client_id, build(schema, body))


def framed(payload: bytes) -> bytes:
    """``payload`` behind its 4-byte size prefix, as every Kafka frame travels."""
    return _INT32.pack(len(payload)) + payload


class Wire:
    """A blocking Kafka protocol connection that speaks plain dicts (or raw bytes)."""

    def __init__(self, port: int, *, client_id: str | None = "robustness-test",
                 timeout: float = 20.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.client_id = client_id
        self.correlation = itertools.count(1)

    def frame(self, api: int, version: int, body: dict[str, Any] | Any,
              correlation_id: int | None = None) -> tuple[int, bytes]:
        """An encoded request frame (with its size prefix) and its correlation id."""
        cid = next(self.correlation) if correlation_id is None else correlation_id
        return cid, request_frame(api, version, body, correlation_id=cid,
                                  client_id=self.client_id)

    def call(self, api: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
        cid, data = self.frame(api, version, body)
        self.sock.sendall(data)
        return self.response(api, version, cid)

    def response(self, api: int, version: int, cid: int) -> dict[str, Any]:
        correlation, entity = decode_response(api, version, self.read_frame())
        assert correlation == cid, f"correlation id {correlation}, expected {cid}"
        return to_dict(entity)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes:
        (size,) = _INT32.unpack(self._read(4))
        return self._read(size)

    def _read(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            out += chunk
        return bytes(out)

    def read_frame_or_close(self, what: str = "") -> bytes | None:
        """The next response frame, or ``None`` when the broker closed the connection (EOF
        or reset: a clean disconnect). A broker that does neither within the socket's
        time-out fails the test: a hang is not a disconnect."""
        try:
            return self.read_frame()
        except TimeoutError:
            raise AssertionError(
                f"the broker neither answered nor closed the connection within "
                f"{self.sock.gettimeout()} s{': ' + what if what else ''}") from None
        except ConnectionError:
            return None

    def send_or_close(self, data: bytes) -> bool:
        """Send ``data``; False if the broker had already closed the connection."""
        try:
            self.sock.sendall(data)
        except ConnectionError:
            return False
        return True

    def closed_by_broker(self, timeout: float = 10.0) -> bool:
        """True when the broker closes the connection within ``timeout`` without sending
        anything; False if it answered with bytes or kept the connection open."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False
        finally:
            self.sock.settimeout(20.0)
        return data == b""

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Wire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def make_batch(values: Sequence[bytes], *, key_prefix: bytes = b"k", producer_id: int = -1,
               producer_epoch: int = -1, base_sequence: int = -1,
               timestamp_ms: int | None = None) -> bytes:
    """A valid RecordBatch v2 holding ``values`` (keys ``<prefix><i>``)."""
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    return build_batch([(key_prefix + b"%d" % i, v, [], ts) for i, v in enumerate(values)],
                       producer_id=producer_id, producer_epoch=producer_epoch,
                       base_sequence=base_sequence)


def produce_body(topic: str, partition: int, records: bytes | None, *, acks: int = -1,
                 timeout_ms: int = 10000) -> dict[str, Any]:
    return {"transactional_id": None, "acks": acks, "timeout": timeout_ms,
            "topic_data": [{"name": topic,
                            "partition_data": [{"index": partition, "records": records}]}]}


def produce(wire: Wire, topic: str, partition: int, records: bytes | None, *, acks: int = -1,
            version: int = PRODUCE_VERSION) -> dict[str, Any]:
    """Produce ``records`` and return the partition's response entry."""
    response = wire.call(ApiKey.PRODUCE, version,
                         produce_body(topic, partition, records, acks=acks))
    [topic_response] = response["responses"]
    [partition_response] = topic_response["partition_responses"]
    return partition_response


def fetch_body(topic: str, partition: int, offset: int, *, max_bytes: int = 4 << 20,
               max_wait_ms: int = 0, min_bytes: int = 0, replica_id: int = -1
               ) -> dict[str, Any]:
    """A Fetch v12 request body (topic names) for one partition, no session; a
    ``replica_id`` >= 0 is what a follower sends."""
    return {
        "replica_id": replica_id, "max_wait": max_wait_ms, "min_bytes": min_bytes,
        "max_bytes": max_bytes, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{
            "partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
            "last_fetched_epoch": -1, "log_start_offset": -1,
            "partition_max_bytes": max_bytes}]}],
        "forgotten_topics_data": [], "rack_id": ""}


def fetch_raw(wire: Wire, topic: str, partition: int, offset: int,
              max_bytes: int = 4 << 20) -> dict[str, Any]:
    """One Fetch v12 (topic names) without waiting; the partition's response entry."""
    response = wire.call(ApiKey.FETCH, FETCH_VERSION,
                         fetch_body(topic, partition, offset, max_bytes=max_bytes))
    assert response["error_code"] == ErrorCode.none, response
    return response["responses"][0]["partitions"][0]


@dataclass
class Fetched:
    """Records read from a partition, with the partition's offsets at the time."""

    records: list[tuple[int, bytes | None, bytes | None]] = field(default_factory=list)
    high_watermark: int = -1
    log_start_offset: int = -1


def fetch_all(port: int, topic: str, partition: int = 0, start: int | None = None) -> Fetched:
    """Every record from ``start`` (default: the log start) to the high watermark, with each
    batch's CRC-32C verified (a corrupt batch fails the test)."""
    out = Fetched()
    with Wire(port) as wire:
        if start is None:
            start = list_offset(wire, topic, partition, -2)
        offset = start
        while True:
            entry = fetch_raw(wire, topic, partition, offset)
            assert entry["error_code"] == ErrorCode.none, entry
            out.high_watermark = entry["high_watermark"]
            out.log_start_offset = entry["log_start_offset"]
            data = entry["records"] or b""
            got = False
            for batch in iter_decoded(data, verify_crc=True):
                for record in batch.records:
                    if record.offset >= offset:
                        out.records.append((record.offset, record.key, record.value))
                        got = True
                offset = max(offset, batch.header.next_offset)
            if offset >= out.high_watermark:
                return out
            assert got or data, f"fetch at {offset} returned nothing below the HW {entry}"


def list_offset(wire: Wire, topic: str, partition: int, timestamp: int) -> int:
    """ListOffsets v7: -2 earliest, -1 latest, -3 max timestamp, else by timestamp."""
    response = wire.call(ApiKey.LIST_OFFSETS, 7, {
        "replica_id": -1, "isolation_level": 0,
        "topics": [{"name": topic, "partitions": [{
            "partition_index": partition, "current_leader_epoch": -1,
            "timestamp": timestamp}]}]})
    entry = response["topics"][0]["partitions"][0]
    assert entry["error_code"] == ErrorCode.none, entry
    return int(entry["offset"])


def create_topic(wire: Wire, name: str, partitions: int = 1,
                 configs: dict[str, str] | None = None) -> None:
    response = wire.call(ApiKey.CREATE_TOPICS, 5, {
        "topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                    "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
        "timeout": 10000, "validate_only": False})
    entry = response["topics"][0]
    assert entry["error_code"] in (ErrorCode.none, ErrorCode.topic_already_exists), entry


@contextmanager
def serving(settings: Mapping[str, Any] | None = None,
            topics: Mapping[str, Mapping[str, str]] | None = None) -> Iterator[BrokerProcess]:
    """A ``moldau serve`` process with ``settings``, on a free port, holding ``topics``
    (name -> topic configs, one partition each); stopped cleanly (then its data removed) on
    exit."""
    with BrokerProcess(settings=settings) as node:
        with Wire(node.port()) as wire:
            for name, configs in (topics or {}).items():
                create_topic(wire, name, configs=dict(configs))
        yield node


def rss_mb(broker: BrokerProcess) -> float:
    """The broker process's resident memory (VmRSS), in MiB."""
    assert broker.proc is not None, "the broker is not running"
    with open(f"/proc/{broker.proc.pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS in /proc/{broker.proc.pid}/status")


def metadata(wire: Wire, topics: Iterable[str] | None, *, allow_create: bool = True,
             version: int = 12) -> dict[str, Any]:
    body = {"topics": None if topics is None else [{"name": t, "topic_id": None}
                                                    for t in topics],
            "allow_auto_topic_creation": allow_create,
            "include_topic_authorized_operations": False}
    return wire.call(ApiKey.METADATA, version, body)


@dataclass
class Ledger:
    """What the broker acknowledged: {(topic, partition): {offset: value}}."""

    acked: dict[tuple[str, int], dict[int, bytes]] = field(default_factory=dict)

    def add(self, topic: str, partition: int, base_offset: int,
            values: Sequence[bytes]) -> None:
        part = self.acked.setdefault((topic, partition), {})
        for i, value in enumerate(values):
            part[base_offset + i] = value

    def verify(self, port: int) -> int:
        """Every acknowledged record is served with its value; returns how many."""
        n = 0
        for (topic, partition), expected in self.acked.items():
            got = {off: value for off, _k, value in fetch_all(port, topic, partition).records}
            missing = [off for off in expected if off not in got]
            assert not missing, f"{topic}-{partition}: acknowledged offsets missing {missing[:10]}"
            wrong = [off for off, value in expected.items() if got[off] != value]
            assert not wrong, f"{topic}-{partition}: different values at offsets {wrong[:10]}"
            n += len(expected)
        return n


_health_counter = itertools.count()


def assert_serves(port: int, topic: str, ledger: Ledger | None = None) -> None:
    """A fresh connection can produce (acks=all) to ``topic`` and read the record back."""
    value = b"health-%d-%f" % (next(_health_counter), time.time())
    with Wire(port, client_id="health-check") as wire:
        entry = produce(wire, topic, 0, make_batch([value]))
        assert entry["error_code"] == ErrorCode.none, entry
        offset = entry["base_offset"]
        got = fetch_all(port, topic, 0, start=offset).records
        assert got and got[0][0] == offset and got[0][2] == value, got
    if ledger is not None:
        ledger.add(topic, 0, offset, [value])


def unexpected_tracebacks(log_text: str) -> list[str]:
    """Python tracebacks in a broker log (a handler raised: "internal error" disconnect)."""
    return ["Traceback (most recent call last):" + block[:3000]
            for block in log_text.split("Traceback (most recent call last):")[1:]]
