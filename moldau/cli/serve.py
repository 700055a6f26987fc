"""``moldau serve``: run a broker (broker and controller in one process).

Mirrors ``kafka-server-start.sh server.properties --override key=value``. Without ``--config``
the embedded defaults apply (listener PLAINTEXT://localhost:9092, data under ./data).
``KAFKA_*`` environment variables override keys the way the Docker images do.
SIGTERM and SIGINT shut down cleanly: logs are flushed, checkpoints and the clean-shutdown
marker are written, so the next start skips log recovery.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from ..broker.config import ConfigError, load_config
from .runtime import add_log_level_option, configure_logging, run_loop

log = logging.getLogger("moldau.serve")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "serve", help="run a broker",
        description="Run a Moldau broker. Settings use Kafka's server.properties keys.",
    )
    parser.add_argument("config", nargs="?", help="server.properties file (positional form)")
    parser.add_argument("--config", "-c", dest="config_flag", metavar="FILE",
                        help="server.properties file; embedded defaults when omitted")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config key (repeatable)")
    add_log_level_option(parser)
    parser.set_defaults(func=run)


def _stop_on_signals(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> None:
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


async def _serve(config: object) -> int:
    from ..broker.server import Broker

    broker = Broker(config)  # type: ignore[arg-type]
    stop = asyncio.Event()
    _stop_on_signals(asyncio.get_running_loop(), stop)
    try:
        await broker.start()
    except OSError as exc:
        log.error("%s", exc.strerror or exc)
        await broker.stop()
        return 1
    await stop.wait()
    log.info("[MoldauServer id=%s] shutting down", broker.node_id)
    await broker.stop()
    return 0


def run(args: argparse.Namespace) -> int:
    configure_logging(args.log_level)
    path = args.config_flag or args.config
    try:
        config = load_config(path, args.override)
    except ConfigError as exc:
        print(f"moldau serve: {exc}", file=sys.stderr)
        return 2
    return run_loop(_serve(config))
