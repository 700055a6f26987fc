"""``moldau rest-proxy``: Confluent's REST Proxy API (v2 and v3) for a Kafka cluster.

Mirrors ``kafka-rest-start kafka-rest.properties``::

    moldau rest-proxy --bootstrap-server localhost:9092 --listeners http://0.0.0.0:8082
    moldau rest-proxy --config kafka-rest.properties --property consumer.instance.timeout.ms=60000

Any Kafka-compatible cluster works. Settings use Confluent's keys (``listeners``,
``bootstrap.servers``, ``schema.registry.url``, ``consumer.instance.timeout.ms``, ``client.*``
/ ``producer.*`` / ``consumer.*`` / ``admin.*`` for the proxy's Kafka clients; see
:mod:`moldau.rest.config`); ``--bootstrap-server`` and ``--listeners`` set the first two and
win over the file. SIGTERM and SIGINT stop it cleanly: consumer instances leave their groups.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from ..client.errors import ConfigError
from ..rest.config import RestConfig, describe, load_config
from .runtime import add_log_level_option, configure_logging, run_loop

log = logging.getLogger("moldau.rest")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    keys = "\n".join(f"  {key} (default {default}): {doc}" for key, default, doc in describe())
    parser = subparsers.add_parser(
        "rest-proxy", help="run a REST proxy (Confluent's API v2 and v3) for a Kafka cluster",
        description="Serve Confluent's REST Proxy API: produce, consume and administer Kafka "
                    "over HTTP.",
        epilog="settings (Confluent's keys):\n" + keys,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT[,...]",
                        help="the Kafka cluster (bootstrap.servers)")
    parser.add_argument("--listeners", metavar="http://HOST:PORT[,...]",
                        help="where to serve the API (listeners; default http://0.0.0.0:8082)")
    parser.add_argument("--config", "-c", metavar="FILE", help="kafka-rest.properties file")
    parser.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                        help="set a key (repeatable), e.g. schema.registry.url=http://h:8081")
    add_log_level_option(parser)
    parser.set_defaults(func=run)


def overrides(args: argparse.Namespace) -> dict[str, str]:
    """``--property`` pairs, then ``--bootstrap-server`` and ``--listeners``."""
    found: dict[str, str] = {}
    for item in args.property:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--property {item!r} is not KEY=VALUE")
        found[key.strip()] = value.strip()
    if args.bootstrap_server:
        found["bootstrap.servers"] = args.bootstrap_server
    if args.listeners:
        found["listeners"] = args.listeners
    return found


async def _serve(config: RestConfig) -> int:
    from ..rest.app import RestProxy

    proxy = RestProxy(config)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await proxy.start()
    except OSError as exc:
        log.error("rest proxy did not start: %s", exc.strerror or exc)
        await proxy.stop()
        return 1
    await stop.wait()
    log.info("rest proxy shutting down")
    await proxy.stop()
    return 0


def run(args: argparse.Namespace) -> int:
    configure_logging(args.log_level)
    try:
        config = load_config(args.config, overrides(args))
    except ConfigError as exc:
        print(f"moldau rest-proxy: {exc}", file=sys.stderr)
        return 2
    return run_loop(_serve(config))
