"""``moldau schema-registry``: Confluent's Schema Registry API, stored in a Kafka cluster.

Mirrors ``schema-registry-start schema-registry.properties``::

    moldau schema-registry --bootstrap-server localhost:9092 --listeners http://0.0.0.0:8081
    moldau schema-registry --config schema-registry.properties --property kafkastore.topic=_s

Any Kafka-compatible cluster works. Settings use Confluent's keys (``listeners``,
``kafkastore.bootstrap.servers``, ``kafkastore.topic``, ``schema.compatibility.level``, ...;
see :mod:`moldau.registry.config`); ``--bootstrap-server`` and ``--listeners`` set the first
two and win over the file. SIGTERM and SIGINT stop it cleanly.

Every instance takes part in the primary election of ``schema.registry.group.id``
(:mod:`moldau.registry.elected`), as Confluent's do: several instances on one
``kafkastore.topic`` have one primary that writes and allocates ids, the others forward
writes to it, and another takes over when it goes.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from ..client.errors import ClientError, ConfigError
from ..http import HttpError
from ..registry.config import describe, load_config
from .runtime import add_log_level_option, configure_logging, run_loop

log = logging.getLogger("moldau.registry")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    keys = "\n".join(f"  {key} (default {default}): {doc}" for key, default, doc in describe())
    parser = subparsers.add_parser(
        "schema-registry", help="run a schema registry (Confluent's API) stored in Kafka",
        description="Serve Confluent's Schema Registry REST API; the schemas live in the "
                    "_schemas topic of the given Kafka cluster.",
        epilog="settings (Confluent's keys):\n" + keys,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT[,...]",
                        help="the Kafka cluster to store schemas in "
                             "(kafkastore.bootstrap.servers)")
    parser.add_argument("--listeners", metavar="http://HOST:PORT[,...]",
                        help="where to serve the API (listeners; default http://0.0.0.0:8081)")
    parser.add_argument("--config", "-c", metavar="FILE",
                        help="schema-registry.properties file")
    parser.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                        help="set a key (repeatable), e.g. kafkastore.topic=_schemas")
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
        found["kafkastore.bootstrap.servers"] = args.bootstrap_server
    if args.listeners:
        found["listeners"] = args.listeners
    return found


async def _serve(config: object) -> int:
    from ..registry.app import SchemaRegistry
    from ..registry.elected import elected_primary_factory

    registry = SchemaRegistry(config,  # type: ignore[arg-type]
                              primary_factory=elected_primary_factory())
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    starting = asyncio.ensure_future(registry.start())
    stopping = asyncio.ensure_future(stop.wait())
    await asyncio.wait([starting, stopping], return_when=asyncio.FIRST_COMPLETED)
    if not starting.done():
        starting.cancel()
        await asyncio.gather(starting, return_exceptions=True)
        await registry.stop()
        return 0
    try:
        starting.result()
    except (HttpError, ClientError, OSError) as exc:
        stopping.cancel()
        log.error("schema registry did not start: %s", getattr(exc, "message", None) or exc)
        return 1
    await stopping
    log.info("schema registry shutting down")
    await registry.stop()
    return 0


def run(args: argparse.Namespace) -> int:
    configure_logging(args.log_level)
    try:
        config = load_config(args.config, overrides(args))
    except ConfigError as exc:
        print(f"moldau schema-registry: {exc}", file=sys.stderr)
        return 2
    return run_loop(_serve(config))
