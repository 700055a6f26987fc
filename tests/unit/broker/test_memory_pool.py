"""queued.max.request.bytes: the broker-wide request memory pool (moldau/broker/memory_pool.py)."""

from __future__ import annotations

from moldau.broker.memory_pool import MemoryPool
from moldau.protocol.framing import FrameDecoder


class Conn:
    """Stands for a connection: counts the pool's call-backs."""

    def __init__(self, pool: MemoryPool) -> None:
        self.woken = 0
        self.account = pool.account(self.wake)

    def wake(self) -> None:
        self.woken += 1


def test_reservations_stop_at_capacity_and_resume_on_release() -> None:
    pool = MemoryPool(100)
    a, b, c = Conn(pool), Conn(pool), Conn(pool)
    assert a.account.reserve(60) and b.account.reserve(40)
    assert pool.exhausted
    # One frame being received may go over, so partly received frames cannot wait on each
    # other forever; a second may not.
    assert c.account.reserve(10) and pool.used == 110
    assert not b.account.reserve(10)
    b.account.wait(reserving=True)
    c.account.complete(10, 10)  # c's frame is complete: the overflow slot is free again
    assert b.woken == 1, "a waiting reservation is called back when the slot frees"
    assert b.account.reserve(10)
    b.account.complete(50, 50)
    a.account.complete(60, 60)
    assert pool.used == 120 and pool.exhausted
    assert a.account.must_wait and b.account.must_wait
    a.account.wait(reserving=False)
    c.account.release(10)
    assert pool.used == 110 and a.woken == 0, "still exhausted: no call-back to read more"
    b.account.release(50)
    assert pool.used == 60 and not pool.exhausted and a.woken == 1


def test_a_connection_without_requests_may_always_read_small_frames() -> None:
    pool = MemoryPool(10)
    hog, quiet = Conn(pool), Conn(pool)
    hog.account.complete(50, 0)
    assert pool.exhausted and hog.account.must_wait
    assert not quiet.account.must_wait
    quiet.account.complete(5, 0)
    assert quiet.account.must_wait
    quiet.account.wait(reserving=False)
    quiet.account.release(5)
    assert not quiet.account.must_wait and quiet.woken == 0  # pool still exhausted
    quiet.account.stop_waiting()
    hog.account.release(50)
    assert quiet.woken == 0, "no call-back after stop_waiting"


def test_closing_frees_everything_once() -> None:
    pool = MemoryPool(100)
    a, b = Conn(pool), Conn(pool)
    assert a.account.reserve(70)
    a.account.complete(20, 0)
    assert not b.account.reserve(90) or pool.used == 180
    b.account.wait(reserving=True)
    a.account.close()
    a.account.close()
    a.account.release(20)  # a handler finishing after the close changes nothing
    assert pool.used == (90 if b.account.partial else 0)
    assert not a.account.reserve(1)


def test_a_client_that_left_frees_its_cut_off_frame_and_keeps_its_complete_ones() -> None:
    """A connection drains after its client left: the frame it was receiving is dropped at
    once (also giving back the overflow slot), complete frames keep their memory until
    their requests are handled."""
    pool = MemoryPool(100)
    leaving, other = Conn(pool), Conn(pool)
    assert leaving.account.reserve(30)
    leaving.account.complete(30, 30)  # one complete request, not handled yet
    assert leaving.account.reserve(80)  # a large frame, partly received, over the limit
    assert not other.account.reserve(10)
    other.account.wait(reserving=True)
    leaving.account.drop_partial()
    assert pool.used == 30 and other.woken == 1 and not leaving.account.waiting
    assert other.account.reserve(10)
    leaving.account.release(30)  # its last request was handled
    leaving.account.close()
    assert pool.used == 10


def test_minus_one_means_no_limit() -> None:
    pool = MemoryPool(-1)
    conn = Conn(pool)
    assert conn.account.reserve(10**12) and not pool.exhausted


def test_decoder_and_pool_finish_every_frame_whatever_the_interleaving() -> None:
    # Twelve connections each receive a 300 kB frame, a chunk at a time, round robin,
    # through a pool of 256 kB: partly received frames hold the pool, and only the
    # overflow rule lets them finish. Each frame's request is handled once complete.
    pool = MemoryPool(256 * 1024)
    size = 300_000
    payloads = [bytes([i]) * size for i in range(12)]
    streams = [len(p).to_bytes(4, "big") + p for p in payloads]
    conns = [Conn(pool) for _ in payloads]
    decoders = [FrameDecoder(1 << 20, 1024, memory=c.account) for c in conns]
    sent = [0] * len(streams)
    done: dict[int, bytes] = {}
    peak = 0
    for _round in range(10_000):
        if len(done) == len(streams):
            break
        for i, (decoder, stream) in enumerate(zip(decoders, streams, strict=True)):
            if i in done or (decoder.waiting and not decoder.retry()):
                continue
            space = decoder.get_buffer()
            n = min(len(space), 7000, len(stream) - sent[i])
            space[:n] = stream[sent[i] : sent[i] + n]
            sent[i] += n
            for got in decoder.buffer_updated(n):
                done[i] = bytes(got)
                conns[i].account.release(len(got))
            peak = max(peak, pool.used)
    assert done == dict(enumerate(payloads))
    assert pool.used == 0
    assert peak <= 256 * 1024 + size
