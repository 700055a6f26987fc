"""Purgatory: waiters wake on notify of any of their keys, expire at their deadline, and leave
nothing behind either way (also when cancelled)."""

from __future__ import annotations

import asyncio
import time

from moldau.broker.purgatory import Purgatory


def test_notify_wakes_waiters_of_that_key_only() -> None:
    async def main() -> None:
        p = Purgatory()
        a = asyncio.ensure_future(p.wait([("t", 0), ("t", 1)], 30))
        b_started = time.monotonic()
        b = asyncio.ensure_future(p.wait([("t", 2)], 0.2))
        await asyncio.sleep(0.01)
        assert len(p) == 3
        p.notify(("t", 1))
        assert await a is True
        assert await b is False
        # b expired at its own deadline: not before it, and long before a's 30 s (the bounds
        # count from b's start, so a slow machine cannot push them either way).
        assert 0.19 <= time.monotonic() - b_started < 15
        assert len(p) == 0
        p.notify(("t", 2))  # nobody waits: nothing happens

    asyncio.run(main())


def test_zero_timeout_and_cancellation_leave_nothing_behind() -> None:
    async def main() -> None:
        p = Purgatory()
        assert await p.wait([("t", 0)], 0) is False
        task = asyncio.ensure_future(p.wait([("t", 0)], 5))
        await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert task.cancelled() and len(p) == 0
        # a notify right at the deadline is not an error
        waiter = asyncio.ensure_future(p.wait([("t", 0)], 0.05))
        await asyncio.sleep(0.05)
        p.notify(("t", 0))
        assert await waiter in (True, False)
        assert len(p) == 0

    asyncio.run(main())


def test_a_notify_before_the_waiting_task_runs_is_not_lost() -> None:
    async def main() -> None:
        p = Purgatory()
        future = p.watch([("t", 0)])  # registered synchronously (a fetch found no data)
        p.notify(("t", 0))  # a produce in the same loop turn, before the waiter awaits
        t0 = time.monotonic()
        assert await p.wait_on([("t", 0)], future, 30) is True
        assert time.monotonic() - t0 < 15  # woken, not expired at 30 s
        assert len(p) == 0

    asyncio.run(main())
