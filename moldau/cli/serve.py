"""``moldau serve``: run a broker (broker and controller in one process).

Mirrors ``kafka-server-start.sh server.properties --override key=value``. Without ``--config``
the embedded defaults apply (listener PLAINTEXT://localhost:9092, data under ./data).
``KAFKA_*`` environment variables override keys the way the Docker images do.
SIGTERM and SIGINT shut down cleanly: logs are flushed, checkpoints and the clean-shutdown
marker are written, so the next start skips log recovery.

With ``schema.registry.listeners`` set, a schema registry (:mod:`moldau.registry`) runs in
the same process and event loop: it starts once the broker serves, stores its schemas in
``_schemas`` through the broker's first listener, and stops before the broker. With
``rest.proxy.listeners`` set, a REST Proxy (:mod:`moldau.rest`) runs there too, after the
registry (whose URL it uses for the schema formats), and stops first.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from typing import Any

from ..broker.config import ConfigError, load_config
from ..http import ListenerError, parse_listeners
from .runtime import add_log_level_option, configure_logging, run_loop, stop_on_signals

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


def _own_address(broker: Any) -> str:
    """host:port of the broker's first listener, as a client on this machine reaches it."""
    bound = broker.bound[0]
    host = bound.endpoint.host
    if host in ("", "0.0.0.0", "::"):
        host = "127.0.0.1"
    return f"[{host}]:{bound.port}" if ":" in host else f"{host}:{bound.port}"


async def _start_registry(listeners: str, broker: Any) -> Any:
    """The in-process schema registry, started against the broker's own listener."""
    from ..registry.app import SchemaRegistry
    from ..registry.config import build_config
    from ..registry.elected import elected_primary

    registry = SchemaRegistry(build_config({
        "listeners": listeners,
        "kafkastore.bootstrap.servers": _own_address(broker),
    }), primary_factory=elected_primary)
    await registry.start()
    return registry


def _local_url(url: str) -> str:
    """A listener URL as a client on this machine reaches it (0.0.0.0 -> 127.0.0.1)."""
    scheme, _, rest = url.partition("://")
    host, _, port = rest.rpartition(":")
    if host in ("", "0.0.0.0", "[::]", "::"):
        host = "127.0.0.1"
    return f"{scheme}://{host}:{port}"


async def _start_rest_proxy(listeners: str, broker: Any, registry: Any) -> Any:
    """The in-process REST Proxy, its clients on the broker's own listener."""
    from ..rest.app import RestProxy
    from ..rest.config import build_config

    raw = {"listeners": listeners, "bootstrap.servers": _own_address(broker)}
    if registry is not None:
        raw["schema.registry.url"] = _local_url(registry.urls()[0])
    proxy = RestProxy(build_config(raw))
    await proxy.start()
    return proxy


async def _serve(config: Any) -> int:
    from ..broker.server import Broker

    broker = Broker(config)
    stop = asyncio.Event()
    stop_on_signals(asyncio.get_running_loop(), stop)
    try:
        await broker.start()
    except OSError as exc:
        log.error("%s", exc.strerror or exc)
        await broker.stop()
        return 1
    registry = None
    listeners = config["schema.registry.listeners"]
    if listeners:
        try:
            registry = await _start_registry(listeners, broker)
        except Exception as exc:  # the registry's own errors name their cause
            log.error("schema registry (schema.registry.listeners=%s) did not start: %s",
                      listeners, getattr(exc, "message", None) or exc)
            await broker.stop()
            return 1
    proxy = None
    listeners = config["rest.proxy.listeners"]
    if listeners:
        try:
            proxy = await _start_rest_proxy(listeners, broker, registry)
        except Exception as exc:  # the proxy's own errors name their cause
            log.error("rest proxy (rest.proxy.listeners=%s) did not start: %s",
                      listeners, getattr(exc, "message", None) or exc)
            if registry is not None:
                await registry.stop()
            await broker.stop()
            return 1
    await stop.wait()
    log.info("[MoldauServer id=%s] shutting down", broker.node_id)
    if proxy is not None:
        await proxy.stop()
    if registry is not None:
        await registry.stop()
    await broker.stop()
    return 0


def run(args: argparse.Namespace) -> int:
    configure_logging(args.log_level)
    path = args.config_flag or args.config
    try:
        config = load_config(path, args.override)
        for key in ("schema.registry.listeners", "rest.proxy.listeners"):
            if config[key]:
                parse_listeners(config[key], key)
    except (ConfigError, ListenerError) as exc:
        print(f"moldau serve: {exc}", file=sys.stderr)
        return 2
    return run_loop(_serve(config))
