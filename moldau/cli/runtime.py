"""How commands run: a new event loop (uvloop's when installed) and, for the servers, the log.

Shared by ``moldau serve``, ``moldau proxy`` and the client tools (:func:`.common.run`).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
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
