"""``moldau doctor``: check that every broker the cluster advertises is reachable from here.

Connects to each bootstrap address (ApiVersions, Metadata, DescribeConfigs), then dials every
advertised broker endpoint the way a client does — resolve, TCP connect, ApiVersions,
Metadata — and says per broker what worked; for each failure the reason in plain words and
the fixes (the broker's ``advertised.listeners`` line, an ``--address-map`` entry, or
``moldau proxy``). Flags bootstrap lists that mix listeners (seed 001).

On a cluster it also reports the active controller (and when there is none), how many brokers
are registered and how many are reachable from here, and offline partitions (no leader),
naming the brokers to start again. ``--zookeeper`` adds ZooKeeper's view: ``/controller`` and
the registration of every broker with the endpoints of all its listeners.

Exit status: 0 when every broker is reachable (with the ``--address-map`` given, if any), the
bootstrap list is consistent, a controller is active, no partition is offline and no ISR is
smaller than its topic's ``min.insync.replicas`` (under-replicated partitions are a warning:
they still work); 1 otherwise; 2 for bad options.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from moldau.client import AddressMap, ConfigError
from moldau.client.config import parse_servers
from moldau.doctor import diagnose, observe, render_json, render_text

from .common import positive_seconds

DEFAULT_TIMEOUT_S = 5.0


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "doctor", help="check that every advertised broker address is reachable from here",
        description=(
            "Connect to the bootstrap servers, then dial every broker address the cluster "
            "advertises, as a client would. Prints per broker what worked; for each failure "
            "why (unresolvable name, refused, timed out, another node answering) and how to "
            "fix it; on a cluster also the controller, registered vs reachable brokers, offline "
            "and under-replicated partitions, and ISRs below min.insync.replicas. Exit status "
            "0 when all brokers are reachable, every partition has a leader and no ISR is "
            "below min.insync.replicas; 1 when not."),
    )
    parser.add_argument(
        "--bootstrap-server", "-b", dest="bootstrap_server", required=True,
        metavar="HOST:PORT[,...]",
        help="address(es) clients bootstrap with, exactly as they are configured")
    parser.add_argument(
        "--address-map", dest="address_map", metavar="ADVERTISED=REACHABLE[,...]",
        help="check as a moldau client with this broker.address.map would connect "
             "(e.g. '10.0.0.5:9092=203.0.113.7:19092')")
    parser.add_argument(
        "--timeout", type=positive_seconds, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
        help=f"time limit for each name lookup, connection and request "
             f"(default {DEFAULT_TIMEOUT_S:g})")
    parser.add_argument(
        "--zookeeper", metavar="HOST:PORT[,...][/CHROOT]",
        help="also read the cluster's registrations from ZooKeeper (read-only; the brokers' "
             "zookeeper.connect): the controller, and every listener of every broker, "
             "including brokers the bootstrap listener does not show")
    parser.add_argument("--json", action="store_true",
                        help="print the observations and findings as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        servers = parse_servers("--bootstrap-server", args.bootstrap_server)
        address_map = AddressMap.parse(args.address_map)
    except ConfigError as exc:
        print(f"moldau doctor: {exc}", file=sys.stderr)
        return 2

    async def main() -> int:
        observations = await observe(servers, address_map=address_map,
                                     timeout_s=args.timeout, zookeeper=args.zookeeper)
        report = diagnose(observations, timeout_s=args.timeout)
        sys.stdout.write(render_json(report) if args.json else render_text(report))
        return report.exit_code

    try:
        return asyncio.run(main())
    except KeyboardInterrupt:
        return 130
