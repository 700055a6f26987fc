"""Producer batching rules: batch.size, linger.ms, flush, muting, retries."""

from __future__ import annotations

import asyncio

from moldau.client.accumulator import RecordAccumulator, estimate_size
from moldau.client.types import TopicPartition
from moldau.protocol.records import batch as B
from moldau.protocol.records.codec import decode_batch
from moldau.protocol.records.compression import Codec

TP = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def futures(n: int) -> list[asyncio.Future]:
    loop = asyncio.new_event_loop()
    return [loop.create_future() for _ in range(n)]


def test_linger_makes_a_batch_ready_after_the_delay() -> None:
    acc = RecordAccumulator(batch_size=16384, linger_ms=10, guarantee_order=True)
    (f,) = futures(1)
    acc.append(TP, b"k", b"v", [], 1, f, now=100.0)
    ready, next_time = acc.ready(100.005)
    assert ready == [] and abs(next_time - 100.010) < 1e-9
    ready, _ = acc.ready(100.010)
    assert ready == [TP]


def test_full_batch_is_ready_at_once_and_next_record_opens_a_new_batch() -> None:
    size = estimate_size(b"k", b"x" * 100, [])
    acc = RecordAccumulator(batch_size=B.HEADER_SIZE + 3 * size, linger_ms=1000,
                            guarantee_order=False)
    fs = futures(4)
    fulls = [acc.append(TP, b"k", b"x" * 100, [], i, fs[i], 0.0)[1] for i in range(3)]
    assert fulls == [False, False, True]
    assert acc.ready(0.0)[0] == [TP]
    acc.append(TP, b"k", b"x" * 100, [], 3, fs[3], 0.0)
    assert len(acc.queues[TP]) == 2
    assert [len(b.records) for b in acc.queues[TP]] == [3, 1]


def test_oversized_record_travels_alone() -> None:
    acc = RecordAccumulator(batch_size=100, linger_ms=0, guarantee_order=False)
    fs = futures(2)
    acc.append(TP, None, b"x" * 1000, [], 0, fs[0], 0.0)
    acc.append(TP, None, b"y", [], 0, fs[1], 0.0)
    assert [len(b.records) for b in acc.queues[TP]] == [1, 1]


def test_flush_ignores_linger() -> None:
    acc = RecordAccumulator(batch_size=16384, linger_ms=60000, guarantee_order=True)
    (f,) = futures(1)
    acc.append(TP, None, b"v", [], 0, f, 0.0)
    assert acc.ready(1.0)[0] == []
    acc.flushing += 1
    assert acc.ready(1.0)[0] == [TP]


def test_in_flight_partition_is_muted_when_order_is_guaranteed() -> None:
    acc = RecordAccumulator(batch_size=16384, linger_ms=0, guarantee_order=True)
    fs = futures(2)
    acc.append(TP, None, b"a", [], 0, fs[0], 0.0)
    acc.append(TP1, None, b"b", [], 0, fs[1], 0.0)
    acc.in_flight.add(TP)
    assert acc.ready(0.0)[0] == [TP1]


def test_requeued_batch_keeps_bytes_and_sequence_and_waits_for_backoff() -> None:
    acc = RecordAccumulator(batch_size=16384, linger_ms=0, guarantee_order=True)
    fs = futures(3)
    for i in range(3):
        acc.append(TP, str(i).encode(), b"v", [("h", b"1")], 1000 + i, fs[i], 0.0)
    batch = acc.pop(TP)
    batch.producer_id, batch.producer_epoch, batch.base_sequence = 7, 1, 40
    first = batch.encode(Codec.LZ4)
    batch.retry_after = 5.0
    acc.requeue(batch)
    assert acc.ready(4.0)[0] == []
    assert acc.ready(5.0)[0] == [TP]
    again = acc.pop(TP)
    assert again is batch and again.encode(Codec.LZ4) is first
    decoded = decode_batch(first)
    h = decoded.header
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.record_count) == (7, 1, 40, 3)
    assert [r.key for r in decoded.records] == [b"0", b"1", b"2"]
    assert h.compression == Codec.LZ4


def test_complete_and_fail_resolve_futures() -> None:
    loop = asyncio.new_event_loop()
    acc = RecordAccumulator(batch_size=16384, linger_ms=0, guarantee_order=True)
    fs = [loop.create_future() for _ in range(2)]
    acc.append(TP, None, b"a", [], 11, fs[0], 0.0)
    acc.append(TP, None, b"b", [], 12, fs[1], 0.0)
    batch = acc.pop(TP)
    batch.complete(100, log_append_time=-1)
    assert [f.result() for f in fs] == [("t", 0, 100, 11), ("t", 0, 101, 12)]
    other = [loop.create_future()]
    acc.append(TP, None, b"c", [], 0, other[0], 0.0)
    acc.pop(TP).fail(RuntimeError("boom"))
    assert isinstance(other[0].exception(), RuntimeError)
    loop.close()
