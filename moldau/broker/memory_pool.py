"""The broker-wide bound on request memory (``queued.max.request.bytes``), Kafka's MemoryPool.

Every request frame is accounted from its first byte of buffer until its request has been
handled: a frame with its own buffer as the decoder reserves it (in steps, as bytes arrive,
see :mod:`moldau.protocol.framing`), a small frame copied out of a connection's receive buffer
when it is complete. When the pool is exhausted, connections stop reading (``pause_reading``)
until memory is released, as Kafka's Selector mutes its channels; the operating system's
socket buffers and TCP flow control hold the rest.

Two rules keep that from stalling for good:

* a connection holding no complete request may always read small frames (those that fit its
  receive buffer): a client that sends one request at a time is never starved by others
  that filled the pool, and what this can add is bounded by the receive buffers;
* when memory is refused to a frame being received, one frame at a time may go over the
  limit and finish (like Kafka, whose pool admits a request while any memory is left):
  otherwise frames that are each partly received could hold all of the pool and wait on
  each other forever.

So request memory stays under ``queued.max.request.bytes + socket.request.max.bytes``, plus
the receive buffers of the connections. A capacity of -1 (Kafka's default) means no limit.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["Account", "MemoryPool"]


def _nothing() -> None:
    pass


class MemoryPool:
    """Request memory of the whole broker, shared by the accounts of its connections."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity if capacity > 0 else None
        self.used = 0
        self._overflow: Account | None = None
        # Connections waiting for memory, first come first called back (dicts keep order):
        # for a reservation of the frame they receive (the overflow slot may serve them),
        # and for room to read new frames (only released memory serves them).
        self._reserving: dict[Account, None] = {}
        self._reading: dict[Account, None] = {}

    @property
    def exhausted(self) -> bool:
        """True while no more memory may be handed out (apart from the two rules above)."""
        return self.capacity is not None and self.used >= self.capacity

    def account(self, on_available: Callable[[], None]) -> Account:
        """A new account for one connection; ``on_available`` is called when memory was
        released after the account asked to wait for it."""
        return Account(self, on_available)

    def _reserve(self, account: Account, nbytes: int) -> bool:
        if self.capacity is None or self.used + nbytes <= self.capacity:
            self.used += nbytes
            return True
        if self._overflow is None or self._overflow is account:
            self._overflow = account
            self.used += nbytes
            return True
        return False

    def _release(self, nbytes: int) -> None:
        self.used -= nbytes
        self._wake()

    def _end_overflow(self, account: Account) -> None:
        if self._overflow is account:
            self._overflow = None
            self._wake()

    def _wake(self) -> None:
        """Call back waiting accounts, first come first, while one could get memory: the
        pool has room, or (for a reservation) the overflow slot is free. Each is called
        once per round; one that still cannot go on waits again, at the back."""
        if not self._reserving and not self._reading:
            return
        for waiters in (self._reserving, self._reading):
            for account in list(waiters):
                if self.exhausted and (waiters is self._reading or self._overflow is not None):
                    break
                if waiters.pop(account, 0) is None:
                    account.waiting = False
                    account.on_available()


class Account:
    """The request memory of one connection (implements the decoder's FrameMemory)."""

    __slots__ = ("closed", "on_available", "partial", "pool", "ready", "waiting")

    def __init__(self, pool: MemoryPool, on_available: Callable[[], None]) -> None:
        self.pool = pool
        self.on_available = on_available
        self.partial = 0  # reserved for the frame being received
        self.ready = 0    # complete frames whose requests are not handled yet
        self.waiting = False
        self.closed = False

    def reserve(self, nbytes: int) -> bool:
        """More memory for the frame being received; False when the pool refuses it."""
        if self.closed or not self.pool._reserve(self, nbytes):
            return False
        self.partial += nbytes
        return True

    def complete(self, nbytes: int, reserved: int) -> None:
        """A frame of ``nbytes`` is complete, ``reserved`` of them reserved beforehand."""
        if self.closed:
            return
        self.partial -= reserved
        self.ready += nbytes
        self.pool.used += nbytes - reserved
        self.pool._end_overflow(self)

    def release(self, nbytes: int) -> None:
        """The request of a frame of ``nbytes`` has been handled: its memory is free."""
        if self.closed:
            return
        self.ready -= nbytes
        self.pool._release(nbytes)

    @property
    def must_wait(self) -> bool:
        """True when this connection must not read new frames: the pool is exhausted and
        the connection already holds a complete request."""
        return self.ready > 0 and self.pool.exhausted

    def wait(self, *, reserving: bool) -> None:
        """Ask to be called back (``on_available``) when memory is released: for a refused
        reservation of the frame being received (``reserving``), or to read new frames."""
        if self.closed:
            return
        self.pool._reserving.pop(self, None)
        self.pool._reading.pop(self, None)
        (self.pool._reserving if reserving else self.pool._reading)[self] = None
        self.waiting = True

    def stop_waiting(self) -> None:
        """No call-back is needed any more (the connection may read again on its own)."""
        self.pool._reserving.pop(self, None)
        self.pool._reading.pop(self, None)
        self.waiting = False

    def drop_partial(self) -> None:
        """The frame being received will never be complete (the client left): free what was
        reserved for it and stop waiting. Complete frames keep their memory until their
        requests are handled (:meth:`release`) or the account closes."""
        if self.closed:
            return
        self.stop_waiting()
        held, self.partial = self.partial, 0
        self.pool.used -= held
        if self.pool._overflow is self:
            self.pool._overflow = None
        self.pool._wake()

    def close(self) -> None:
        """The connection is gone: free everything it held."""
        if self.closed:
            return
        held = self.partial + self.ready
        self.partial = self.ready = 0
        self.closed = True
        self.on_available = _nothing  # the connection refers to us: no reference cycle
        self.pool._reserving.pop(self, None)
        self.pool._reading.pop(self, None)
        self.pool.used -= held
        self.pool._overflow = None if self.pool._overflow is self else self.pool._overflow
        self.pool._wake()
