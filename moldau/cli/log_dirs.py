"""``moldau log-dirs``: each broker's log dirs and the size of every replica in them
(kafka-log-dirs.sh).

Same flags and output as Kafka's ``kafka-log-dirs.sh``::

    moldau log-dirs --describe --bootstrap-server localhost:9092 [--broker-list 1,2] \\
        [--topic-list orders,payments]

It prints two lines, then one line of JSON::

    Querying brokers for log directories information
    Received log directory information from brokers 1,2
    {"version":1,"brokers":[{"broker":1,"logDirs":[{"logDir":"/var/lib/moldau","error":null,
      "partitions":[{"partition":"orders-0","size":1024,"offsetLag":0,"isFuture":false}]}]}]}

As Kafka's tool it asks every broker for all its partitions (DescribeLogDirs) and keeps the
``--topic-list`` topics itself; a broker of ``--broker-list`` that the cluster does not list
is an error before anything is asked.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from moldau.client import AdminClient, LogDirDescription

from .common import CliError, add_connection_options, add_tool_parser, run_admin_action

#: Kafka's exception class names for the errors a log dir can report.
_ERROR_CLASSES = {56: "org.apache.kafka.common.errors.KafkaStorageException"}


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_tool_parser(
        subparsers, "log-dirs", help="log dirs of brokers and replica sizes "
                                     "(kafka-log-dirs.sh)",
        description="Query the log directories of brokers: the size of every partition "
                    "replica in them. Same flags and JSON output as Kafka's "
                    "kafka-log-dirs.sh.",
        epilog="examples:\n"
               "  moldau log-dirs --describe --bootstrap-server localhost:9092\n"
               "  moldau log-dirs --describe -b localhost:9092 --broker-list 1,2 "
               "--topic-list orders",
    )
    add_connection_options(parser)
    parser.add_argument("--describe", action="store_true", required=True,
                        help="describe the log directories on the given brokers (required)")
    parser.add_argument("--broker-list", default="", metavar="ID,ID,...",
                        help="the brokers to query, e.g. \"1,2,3\" (default: every broker "
                             "of the cluster)")
    parser.add_argument("--topic-list", default="", metavar="TOPIC,TOPIC,...",
                        help="the topics to show, e.g. \"orders,payments\" (default: all)")
    parser.set_defaults(func=main, parser=parser)


def split_list(text: str) -> list[str]:
    """Kafka's comma list: empty items dropped."""
    return [item.strip() for item in text.split(",") if item.strip()]


def parse_brokers(text: str) -> set[int]:
    """``--broker-list`` to broker ids; a usage error names a value that is not one."""
    try:
        return {int(item) for item in split_list(text)}
    except ValueError:
        raise CliError(f"--broker-list {text!r}: broker ids are integers separated by "
                       "commas, e.g. 1,2,3", 2) from None


def brokers_to_query(asked: set[int], cluster: set[int]) -> list[int]:
    """The brokers to ask: ``asked`` (all of ``cluster`` when empty); an error names those
    the cluster does not list, in Kafka's words."""
    missing = asked - cluster
    if missing:
        raise CliError("ERROR: The given brokers do not exist from --broker-list: "
                       f"{_joined(missing)}. Current existent brokers: {_joined(cluster)}")
    return sorted(asked or cluster)


def _joined(ids: set[int] | list[int]) -> str:
    return ",".join(str(i) for i in sorted(ids))


def log_dirs_json(described: dict[int, dict[str, LogDirDescription]],
                  topics: set[str]) -> str:
    """kafka-log-dirs.sh's JSON document (compact, one line), partitions filtered to
    ``topics`` (all when empty)."""
    brokers: list[dict[str, Any]] = []
    for broker, dirs in sorted(described.items()):
        log_dirs = []
        for path, desc in sorted(dirs.items()):
            error = None
            if desc.error is not None:
                error = _ERROR_CLASSES.get(int(desc.error.code), str(desc.error.code))
            partitions = [
                {"partition": f"{tp.topic}-{tp.partition}", "size": info.size,
                 "offsetLag": info.offset_lag, "isFuture": info.is_future}
                for tp, info in sorted(desc.replicas.items())
                if not topics or tp.topic in topics]
            log_dirs.append({"logDir": path, "error": error, "partitions": partitions})
        brokers.append({"broker": broker, "logDirs": log_dirs})
    return json.dumps({"version": 1, "brokers": brokers}, separators=(",", ":"))


async def _describe(admin: AdminClient, args: argparse.Namespace) -> int:
    asked = parse_brokers(args.broker_list)
    cluster = {b.node_id for b in (await admin.describe_cluster()).brokers}
    brokers = brokers_to_query(asked, cluster)
    print("Querying brokers for log directories information", flush=True)
    described = await admin.describe_log_dirs(brokers)
    print(f"Received log directory information from brokers {_joined(brokers)}")
    sys.stdout.write(log_dirs_json(described, set(split_list(args.topic_list))) + "\n")
    return 0


def main(args: argparse.Namespace) -> int:
    return run_admin_action(args, {"describe": _describe}, client_id="log-dirs-tool",
                            name="moldau log-dirs", error_prefix="moldau log-dirs")
