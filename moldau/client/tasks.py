"""Background tasks a client component owns: held while they run, all stopped on close."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine, Iterable
from typing import Any


def spawn(tasks: set[asyncio.Task[Any]], coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
    """Run ``coro`` as a task kept in ``tasks`` until it ends (the event loop itself holds
    only a weak reference, so an unreferenced task could be collected mid-run)."""
    task = asyncio.get_running_loop().create_task(coro)
    tasks.add(task)
    task.add_done_callback(tasks.discard)
    return task


async def cancel_and_wait(tasks: Iterable[asyncio.Task[Any] | None]) -> None:
    """Cancel every task (None entries are skipped), then wait until each has ended; how one
    ended (cancelled, or with an error) no longer matters to a component that is stopping."""
    live = [t for t in tasks if t is not None]
    for t in live:
        t.cancel()
    for t in live:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await t
