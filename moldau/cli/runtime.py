"""How commands run: a new event loop (uvloop's when installed) and, for the servers, the log.

Shared by ``moldau serve``, ``moldau proxy`` and the client tools (:func:`.common.run`).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def add_log_level_option(parser: argparse.ArgumentParser) -> None:
    """``--log-level`` of a server command (INFO by default)."""
    parser.add_argument("--log-level", default="INFO", choices=list(LOG_LEVELS))


def configure_logging(level: str) -> None:
    """Log lines on stderr shaped like Kafka's: ``[time] LEVEL message (logger)``."""
    logging.basicConfig(
        level=getattr(logging, level),
        format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)",
        stream=sys.stderr,
    )


def run_loop(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion on a new event loop: uvloop's when it is installed."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        return asyncio.run(coro)
    return uvloop.run(coro)


def stop_on_signals(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> None:
    """The first SIGTERM or SIGINT sets ``stop``; every later one is ignored, as the JVM
    ignores signals while Kafka's shutdown hooks run.

    Supervisors and scripts repeat SIGTERM. The default action must never come back during a
    clean shutdown, or a repeated signal turns it into death by signal: the loop puts it back
    when its own handlers are removed or it closes, and Python when it finalizes (for every
    signal with a Python handler). So plain Python handlers, not ``loop.add_signal_handler``,
    and the first one replaces both by SIG_IGN itself, leaving no moment without a handler."""

    def on_signal(_signum: int, _frame: object) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)
        loop.call_soon_threadsafe(stop.set)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
