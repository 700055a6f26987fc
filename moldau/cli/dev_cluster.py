"""``moldau dev-cluster``: a ZooKeeper and N brokers on this machine, for trying a cluster.

    moldau dev-cluster --brokers 3                  # ZooKeeper + brokers 1..3 on free ports
    moldau dev-cluster --brokers 3 --base-port 9092 # brokers on 9092, 9093, 9094
    moldau dev-cluster --zookeeper zk:2181/moldau   # use a ZooKeeper that already runs

Everything lives under one directory (``--dir``, default ``./dev-cluster``):
``zookeeper/zk-1/`` (its config, data and log, when ZooKeeper is ours) and
``broker-<id>/`` (``server.properties``, ``data/`` and ``broker.log``). Running the command
again on the same directory starts the same cluster again, data included.

It prints ZooKeeper's address, every broker's listener and a ``bootstrap.servers`` string
once every broker has registered under ``/brokers/ids``, then waits. Ctrl-C or SIGTERM stop
the brokers (the controller last; SIGTERM, so each shuts down in a controlled way, kill -9
after ``--stop-timeout``) and then ZooKeeper, each by its pid. The children run in sessions
of their own, so a Ctrl-C reaches only this command, which stops them in that order; they
also die with it if it is killed.

Exit status: 0 after a clean stop, 1 when the cluster did not start, 2 for bad options or a
missing ZooKeeper installation.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import TextIO

from ..devtools import zookeeper as zk
from ..devtools.cluster import ClusterError, LocalCluster, plain_specs
from ..devtools.zookeeper import ZooKeeperUnavailable

DEFAULT_DIR = "dev-cluster"


class _Stop(Exception):
    """Raised by the SIGINT/SIGTERM handler to unwind a start or the wait."""


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "dev-cluster", help="run ZooKeeper and N brokers locally (Ctrl-C stops them)",
        description=(
            "Start a ZooKeeper (Debian's zookeeper package) and N `moldau serve` brokers on "
            "127.0.0.1 with all data under one directory, print their addresses, and stop "
            "everything cleanly on Ctrl-C or SIGTERM."),
    )
    parser.add_argument("--brokers", type=int, default=3, metavar="N",
                        help="number of brokers, ids 1..N (default 3)")
    parser.add_argument("--dir", default=DEFAULT_DIR, metavar="DIR",
                        help=f"directory for all data and logs (default ./{DEFAULT_DIR})")
    parser.add_argument("--zookeeper", metavar="HOST:PORT[,...][/CHROOT]",
                        help="use this running ZooKeeper (its zookeeper.connect string) "
                             "instead of starting one")
    parser.add_argument("--base-port", type=int, metavar="N",
                        help="broker i listens on port N+i-1 (default: free ports)")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="a broker config key for every broker (repeatable), e.g. "
                             "num.partitions=3")
    parser.add_argument("--start-timeout", type=float, default=120.0, metavar="SECONDS",
                        help="how long to wait for every broker to register (default 120)")
    parser.add_argument("--stop-timeout", type=float, default=30.0, metavar="SECONDS",
                        help="how long a broker may take to shut down before kill -9 "
                             "(default 30)")
    parser.set_defaults(func=run)


def _overrides(items: list[str]) -> dict[str, str]:
    result = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"invalid --override {item!r}: expected KEY=VALUE")
        result[key.strip()] = value
    return result


def _check(args: argparse.Namespace) -> str | None:
    """What is wrong with the options (or the machine), or None."""
    if args.brokers < 1:
        return f"--brokers {args.brokers}: a cluster needs at least one broker"
    if args.base_port is not None and not 0 < args.base_port <= 65536 - args.brokers:
        return (f"--base-port {args.base_port}: brokers 1..{args.brokers} need ports "
                f"{args.base_port}..{args.base_port + args.brokers - 1}, within 1..65535")
    if args.zookeeper is None and not zk.installed():
        return f"ZooKeeper is not installed ({zk.ZOOKEEPER_JAR} missing): {zk.INSTALL_HINT}"
    return None


def describe(cluster: LocalCluster, out: TextIO) -> None:
    """Print ZooKeeper, every broker's listeners and the bootstrap string."""
    if cluster.zookeeper is not None:
        zk_node = cluster.zookeeper.node(1)
        print(f"ZooKeeper   {cluster.zookeeper_connect}   (pid {zk_node.pid}; data and log in "
              f"{zk_node.node_dir})", file=out)
    else:
        print(f"ZooKeeper   {cluster.zookeeper_connect}   (already running)", file=out)
    for broker_id, node in sorted(cluster.brokers.items()):
        endpoints = ",".join(f"{name}://{node.address(name)}" for name in node.spec.listeners)
        print(f"broker {broker_id}    {endpoints}   (pid {node.pid}; log {node.log_path})",
              file=out)
    print(f"bootstrap.servers={cluster.bootstrap()}", file=out)
    controller = cluster.controller_id()
    if controller is not None:
        print(f"controller: broker {controller}", file=out)


def run(args: argparse.Namespace) -> int:
    problem = _check(args)
    try:
        settings = _overrides(args.override)
    except ValueError as exc:
        problem = str(exc)
    if problem:
        print(f"moldau dev-cluster: {problem}", file=sys.stderr)
        return 2
    base = Path(args.dir).resolve()
    cluster = LocalCluster(plain_specs(args.brokers, base_port=args.base_port,
                                       settings=settings),
                           base, zookeeper=args.zookeeper, isolate=True)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        raise _Stop(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    code = 0
    try:
        print(f"Starting ZooKeeper and {args.brokers} broker(s) under {base} ...", flush=True)
        cluster.start(timeout=args.start_timeout)
        describe(cluster, sys.stdout)
        print(f"All {args.brokers} broker(s) registered in ZooKeeper. Ctrl-C stops the "
              f"cluster.", flush=True)
        _watch(cluster)
    except _Stop as stop:
        print(f"{stop}: stopping the brokers, then ZooKeeper ...", flush=True)
    except (ClusterError, ZooKeeperUnavailable, RuntimeError) as exc:
        print(f"moldau dev-cluster: {exc}", file=sys.stderr, flush=True)
        code = 1
    finally:
        # a second Ctrl-C while stopping must not leave children behind
        for sig in previous:
            signal.signal(sig, signal.SIG_IGN)
        cluster.stop(timeout=args.stop_timeout)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if code == 0:
        print("Stopped.", flush=True)
    return code


def _watch(cluster: LocalCluster) -> None:
    """Wait for a signal; say so once when a broker exits on its own."""
    reported: set[int] = set()
    while True:
        for broker_id, node in cluster.brokers.items():
            if broker_id not in reported and node.proc is not None and \
                    node.proc.poll() is not None:
                reported.add(broker_id)
                print(f"broker {broker_id} exited with {node.proc.returncode}; its log is "
                      f"{node.log_path}", file=sys.stderr, flush=True)
        time.sleep(0.5)
