"""What ``moldau schema-registry`` and ``moldau rest-proxy`` share: the options of Confluent's
start scripts and the serve loop.

Options: ``--bootstrap-server`` and ``--listeners`` (which win over the file), ``--config
FILE`` (a ``.properties`` file of Confluent's keys) and ``--property KEY=VALUE``
(repeatable). A bad setting prints one line naming the key and exits 2.

The serve loop starts the service, serves until the first SIGTERM or SIGINT
(:func:`.runtime.stop_on_signals`) and stops it: exit 0. A signal while it starts (the
registry reads its store and waits for an election) cancels the start. A service that does
not start logs why and exits 1; its ``start`` leaves nothing running then.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Protocol, TypeVar

from ..client.errors import ClientError, ConfigError
from ..http import HttpError
from .runtime import add_log_level_option, configure_logging, run_loop, stop_on_signals

C = TypeVar("C")


class Service(Protocol):
    """An HTTP service as the serve loop drives it (``SchemaRegistry``, ``RestProxy``)."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


def add_service_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser], command: str, *,
    help: str, description: str, keys: list[tuple[str, Any, str]], bootstrap_help: str,
    default_listeners: str, config_file: str, property_example: str,
) -> argparse.ArgumentParser:
    """The parser of ``moldau <command>``: the shared options, ``keys`` (key, default, doc)
    in the epilog."""
    epilog = "\n".join(f"  {key} (default {default}): {doc}" for key, default, doc in keys)
    parser = subparsers.add_parser(
        command, help=help, description=description,
        epilog="settings (Confluent's keys):\n" + epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT[,...]", help=bootstrap_help)
    parser.add_argument("--listeners", metavar="http://HOST:PORT[,...]",
                        help=f"where to serve the API (listeners; default {default_listeners})")
    parser.add_argument("--config", "-c", metavar="FILE", help=f"{config_file} file")
    parser.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                        help=f"set a key (repeatable), e.g. {property_example}")
    add_log_level_option(parser)
    return parser


def overrides(args: argparse.Namespace, bootstrap_key: str) -> dict[str, str]:
    """``--property`` pairs, then ``--bootstrap-server`` (as ``bootstrap_key``) and
    ``--listeners``."""
    found: dict[str, str] = {}
    for item in args.property:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--property {item!r} is not KEY=VALUE")
        found[key.strip()] = value.strip()
    if args.bootstrap_server:
        found[bootstrap_key] = args.bootstrap_server
    if args.listeners:
        found["listeners"] = args.listeners
    return found


async def serve(service: Service, what: str, log: logging.Logger) -> int:
    """Start ``service`` (``what`` names it in the log), serve until a signal, stop it."""
    stop = asyncio.Event()
    stop_on_signals(asyncio.get_running_loop(), stop)
    starting = asyncio.ensure_future(service.start())
    stopping = asyncio.ensure_future(stop.wait())
    await asyncio.wait([starting, stopping], return_when=asyncio.FIRST_COMPLETED)
    if not starting.done():
        starting.cancel()
        await asyncio.gather(starting, return_exceptions=True)
        await service.stop()
        return 0
    try:
        starting.result()
    except (HttpError, ClientError, OSError) as exc:
        stopping.cancel()
        log.error("%s did not start: %s", what, _reason(exc))
        return 1
    await stopping
    log.info("%s shutting down", what)
    await service.stop()
    return 0


def _reason(exc: BaseException) -> str:
    """An error's own message: HttpError's and ClientError's ``message``, an OSError's
    ``strerror`` (HttpService's names the listener it could not bind)."""
    return str(getattr(exc, "message", None) or getattr(exc, "strerror", None) or exc)


def run(args: argparse.Namespace, command: str, bootstrap_key: str,
        load_config: Callable[[str | None, Mapping[str, str]], C],
        serve_config: Callable[[C], Coroutine[Any, Any, int]]) -> int:
    """``moldau <command>``: the settings (exit 2 naming a bad key), then
    ``serve_config(config)`` on a new event loop."""
    configure_logging(args.log_level)
    try:
        config = load_config(args.config, overrides(args, bootstrap_key))
    except ConfigError as exc:
        print(f"moldau {command}: {exc}", file=sys.stderr)
        return 2
    return run_loop(serve_config(config))
