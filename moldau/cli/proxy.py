"""``moldau proxy``: a Kafka-protocol proxy for clients that cannot reach advertised addresses.

Example (seed 002: brokers advertise pre-NAT addresses 10.1.0.11-13, reachable as
203.0.113.11-13)::

    moldau proxy --bootstrap-server 203.0.113.11:9092 \\
        --address-map 10.1.0.11=203.0.113.11,10.1.0.12=203.0.113.12,10.1.0.13=203.0.113.13 \\
        --listen-host 0.0.0.0 --advertised-host proxy.example.com --port-base 19090

Broker ``n`` is then served on port ``19090+n``; clients use the broker ports as their
``bootstrap.servers`` (printed at start: ``clients bootstrap from ...``). A bootstrap server
that is not a broker's address (an alias, a load balancer) gets a port of its own.
SIGTERM or SIGINT stop it cleanly.
With ``--json`` one JSON object per line goes to stdout: ``started`` (all mappings), then
``route_added``/``route_moved``/``listener_error`` as brokers appear or move, ``stopped``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
from typing import Any

from ..client.address_map import AddressMap
from ..client.config import parse_servers
from ..client.errors import ConfigError
from ..proxy import PortPlan, ProxyConfig, ProxyError, ProxyServer
from .runtime import add_log_level_option, configure_logging, run_loop

log = logging.getLogger("moldau.proxy")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "proxy", help="Kafka-protocol proxy that rewrites broker addresses",
        description=(
            "Listen on one local port per upstream broker, forward "
            "Kafka requests byte for byte, and rewrite the broker addresses in Metadata, "
            "FindCoordinator, DescribeCluster (and KIP-951 node endpoint) answers to the "
            "proxy's own, so unmodified clients reach brokers whose advertised addresses "
            "they cannot reach."),
    )
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,...]",
                        help="upstream brokers to discover the cluster from")
    parser.add_argument("--listen-host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1; 0.0.0.0 for all, "
                             "then --advertised-host is required)")
    parser.add_argument("--advertised-host", metavar="HOST",
                        help="host name or IP clients use to reach the proxy, written into "
                             "rewritten answers (default: --listen-host)")
    parser.add_argument("--port-base", type=int, metavar="N",
                        help="serve broker n on port N+n (default: free ports chosen by the "
                             "OS)")
    parser.add_argument("--bootstrap-port", type=int, action="append", default=[],
                        metavar="PORT",
                        help="port for a bootstrap server that is not a broker's own address "
                             "(repeatable, in --bootstrap-server order; default: free)")
    parser.add_argument("--broker-port", action="append", default=[], metavar="ID=PORT",
                        help="pin broker ID to local PORT (repeatable)")
    parser.add_argument("--address-map", action="append", default=[],
                        metavar="ADVERTISED=REACHABLE[,...]",
                        help="how the proxy reaches brokers advertised at addresses it "
                             "cannot reach, e.g. 10.1.0.11:9092=203.0.113.11:9092 or "
                             "10.1.0.12=203.0.113.12 (broker.address.map syntax; repeatable)")
    parser.add_argument("--connect-timeout-ms", type=int, default=10000, metavar="MS",
                        help="limit for connecting to an upstream broker (default 10000)")
    parser.add_argument("--startup-timeout-ms", type=int, default=30000, metavar="MS",
                        help="how long to keep trying the bootstrap servers at start "
                             "(default 30000)")
    parser.add_argument("--json", action="store_true",
                        help="print a JSON status line at start (and one per change)")
    add_log_level_option(parser)
    parser.set_defaults(func=run)


def _broker_ports(items: list[str]) -> dict[int, int]:
    ports: dict[int, int] = {}
    for item in items:
        node, sep, port = item.partition("=")
        if not sep or not node.strip().isdigit() or not port.strip().isdigit():
            raise ConfigError(f"--broker-port {item!r} is not ID=PORT (e.g. 1=19093)")
        ports[int(node)] = int(port)
    return ports


def build_config(args: argparse.Namespace) -> ProxyConfig:
    """ProxyConfig from parsed arguments; raises ConfigError/ProxyError on bad values."""
    for flag, value in [("--port-base", args.port_base),
                        *(("--bootstrap-port", p) for p in args.bootstrap_port)]:
        if value is not None and not 0 <= value < 65536:
            raise ConfigError(f"{flag} {value} is not a port (0-65535)")
    return ProxyConfig(
        bootstrap_servers=parse_servers("--bootstrap-server", args.bootstrap_server),
        listen_host=args.listen_host,
        advertised_host=args.advertised_host,
        ports=PortPlan(base=args.port_base, explicit=_broker_ports(args.broker_port),
                       bootstrap=args.bootstrap_port),
        address_map=AddressMap.parse(",".join(args.address_map)),
        connect_timeout_ms=args.connect_timeout_ms,
        startup_timeout_ms=args.startup_timeout_ms,
    )


async def _run(config: ProxyConfig, emit: Any) -> int:
    server = ProxyServer(config, on_event=emit)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    starting = asyncio.ensure_future(server.start())
    stopping = asyncio.ensure_future(stop.wait())
    await asyncio.wait([starting, stopping], return_when=asyncio.FIRST_COMPLETED)
    if not starting.done():  # SIGTERM while still discovering the cluster
        starting.cancel()
        await asyncio.gather(starting, return_exceptions=True)
        await server.stop()
        log.info("stopped before the upstream cluster answered")
        emit({"event": "stopped"})
        return 0
    try:
        starting.result()
    except ProxyError as exc:
        stopping.cancel()
        log.error("%s", exc)
        await server.stop()
        return 1
    await stopping
    log.info("stopping: closing %d client connection(s)", len(server.connections))
    await server.stop()
    emit({"event": "stopped"})
    return 0


def run(args: argparse.Namespace) -> int:
    configure_logging(args.log_level)
    try:
        config = build_config(args)
    except (ConfigError, ProxyError) as exc:
        print(f"moldau proxy: {exc}", file=sys.stderr)
        return 2

    def emit(event: dict[str, Any]) -> None:
        if args.json:
            sys.stdout.write(json.dumps(event) + "\n")
            sys.stdout.flush()

    return run_loop(_run(config, emit))
