"""``moldau topics``: create, list, describe, alter and delete topics (kafka-topics.sh).

Flags, output and error texts follow Kafka's ``kafka-topics.sh``::

    moldau topics -b localhost:9092 --create --topic orders --partitions 3 \\
        --config retention.ms=60000
    moldau topics -b localhost:9092 --list [--exclude-internal]
    moldau topics -b localhost:9092 --describe [--topic orders]
    moldau topics -b localhost:9092 --alter --topic orders --partitions 6
    moldau topics -b localhost:9092 --delete --topic orders [--if-exists]

``--topic`` is a regular expression (matched against whole names) everywhere but ``--create``,
as in Kafka. Topic configs are changed with ``moldau configs``. Errors print one line to
stderr, ``Error while executing topic command : <reason>``, and exit with status 1.
"""

from __future__ import annotations

import argparse
import base64
import re
import sys
from collections.abc import Mapping
from typing import Any

from moldau.client import (
    AdminClient,
    BrokerError,
    ConfigResource,
    NewTopic,
    PartitionInfo,
    PartitionReassignment,
    TopicInfo,
    UnsupportedVersionError,
)
from moldau.protocol.errors import ErrorCode

from .common import (
    CliError,
    add_connection_options,
    add_tool_parser,
    broker_message,
    parse_key_value,
    run_admin_action,
)

ERROR_PREFIX = "Error while executing topic command "
ACTIONS = ("create", "list", "describe", "alter", "delete")
_REPORTS = ("under_replicated_partitions", "unavailable_partitions", "under_min_isr_partitions",
            "at_min_isr_partitions")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_tool_parser(
        subparsers, "topics", help="create, list, describe, alter or delete topics "
                                   "(kafka-topics.sh)",
        description="Create, delete, describe, or change a topic. Same flags and output as "
                    "Kafka's kafka-topics.sh; give exactly one action.",
        epilog="examples:\n"
               "  moldau topics -b localhost:9092 --create --topic orders --partitions 3 \\\n"
               "      --replication-factor 1 --config retention.ms=86400000\n"
               "  moldau topics -b localhost:9092 --list --exclude-internal\n"
               "  moldau topics -b localhost:9092 --describe --topic orders\n"
               "  moldau topics -b localhost:9092 --alter --topic orders --partitions 6\n"
               "  moldau topics -b localhost:9092 --delete --topic orders\n\n"
               "To change topic configs use `moldau configs --entity-type topics "
               "--entity-name T --alter --add-config k=v`.",
    )
    add_connection_options(parser)
    actions = parser.add_argument_group("actions (exactly one)")
    actions.add_argument("--create", action="store_true", help="create a new topic")
    actions.add_argument("--list", action="store_true", help="list all available topics")
    actions.add_argument("--describe", action="store_true",
                         help="list details for the given topics (all when --topic is absent)")
    actions.add_argument("--alter", action="store_true",
                         help="change the number of partitions (configs: moldau configs)")
    actions.add_argument("--delete", action="store_true", help="delete a topic")
    opts = parser.add_argument_group("options")
    opts.add_argument("--topic", metavar="TOPIC",
                      help="the topic to create, alter, describe or delete; a regular "
                           "expression except with --create (escape dots: 'test\\.topic')")
    opts.add_argument("--partitions", type=int, metavar="N",
                      help="number of partitions for --create (default: the broker's "
                           "num.partitions) or the new total for --alter. Adding partitions "
                           "changes which partition a key maps to.")
    opts.add_argument("--replication-factor", type=int, metavar="R",
                      help="replicas per partition for --create (default: the broker's "
                           "default.replication.factor)")
    opts.add_argument("--replica-assignment", metavar="B1:B2,B1:B2,...",
                      help="manual partition-to-broker assignment for --create or --alter: "
                           "partitions separated by ',', replicas of one partition by ':'")
    opts.add_argument("--config", action="append", default=[], metavar="NAME=VALUE",
                      help="a topic config override for --create (repeatable), e.g. "
                           "--config cleanup.policy=compact --config retention.ms=60000")
    opts.add_argument("--if-not-exists", action="store_true",
                      help="with --create: do nothing if the topic already exists")
    opts.add_argument("--if-exists", action="store_true",
                      help="with --alter, --delete or --describe: do nothing if the topic "
                           "does not exist")
    opts.add_argument("--exclude-internal", action="store_true",
                      help="leave internal topics (__consumer_offsets, ...) out of --list and "
                           "--describe")
    report = parser.add_argument_group("--describe filters")
    report.add_argument("--under-replicated-partitions", action="store_true",
                        help="only partitions whose ISR is smaller than the replica set")
    report.add_argument("--unavailable-partitions", action="store_true",
                        help="only partitions whose leader is not available")
    report.add_argument("--under-min-isr-partitions", action="store_true",
                        help="only partitions whose ISR is smaller than min.insync.replicas")
    report.add_argument("--at-min-isr-partitions", action="store_true",
                        help="only partitions whose ISR size equals min.insync.replicas")
    report.add_argument("--topics-with-overrides", action="store_true",
                        help="only topics that have overridden configs (no partition lines)")
    parser.set_defaults(func=main, parser=parser)


# --- argument checks (pure) ----------------------------------------------------------------


def check_args(args: argparse.Namespace) -> str | None:
    """The first usage problem of ``args`` as Kafka words it, or None."""
    chosen = [a for a in ACTIONS if getattr(args, a)]
    if len(chosen) != 1:
        return ("Command must include exactly one action: --list, --describe, --create, "
                "--alter or --delete")
    action = chosen[0]
    if action in ("create", "alter", "delete") and not args.topic:
        return f"Missing required argument \"[topic]\" (--topic is required with --{action})"
    if action == "alter" and args.partitions is None:
        return "Missing required argument \"[partitions]\" (--alter changes the partition count)"
    if args.config and action != "create":
        return ("Option \"[config]\" can't be used with option \"[" + action + "]\" (To alter "
                "topic configurations, use `moldau configs`.)")
    if args.partitions is not None and action not in ("create", "alter"):
        return f"Option \"[partitions]\" can't be used with option \"[{action}]\""
    if args.replication_factor is not None and action != "create":
        return f"Option \"[replication-factor]\" can't be used with option \"[{action}]\""
    if args.replica_assignment and action not in ("create", "alter"):
        return f"Option \"[replica-assignment]\" can't be used with option \"[{action}]\""
    if args.replica_assignment and (
            (args.partitions is not None and action == "create")
            or args.replication_factor is not None):
        return ("Option \"[replica-assignment]\" can't be used with \"[partitions]\" or "
                "\"[replication-factor]\" when creating a topic")
    if args.if_not_exists and action != "create":
        return f"Option \"[if-not-exists]\" can't be used with option \"[{action}]\""
    if args.if_exists and action not in ("alter", "delete", "describe"):
        return f"Option \"[if-exists]\" can't be used with option \"[{action}]\""
    if action != "describe" and (any(getattr(args, r) for r in _REPORTS)
                                 or args.topics_with_overrides):
        return "The partition report options can only be used with --describe"
    if args.topics_with_overrides:
        # Kafka's TopicCommand: the report filters combine with each other (a partition
        # matching any is listed), never with --topics-with-overrides.
        report = next((r for r in _REPORTS if getattr(args, r)), None)
        if report:
            return (f"Option \"[{report.replace('_', '-')}]\" can't be used with option "
                    "\"[topics-with-overrides]\"")
    if args.exclude_internal and action not in ("list", "describe"):
        return f"Option \"[exclude-internal]\" can't be used with option \"[{action}]\""
    return None


def parse_replica_assignment(text: str) -> dict[int, list[int]]:
    """``1:2,2:3`` -> {0: [1, 2], 1: [2, 3]} (Kafka's --replica-assignment syntax)."""
    result: dict[int, list[int]] = {}
    for index, part in enumerate(text.split(",")):
        try:
            brokers = [int(b.strip()) for b in part.split(":") if b.strip()]
        except ValueError:
            raise CliError(f"--replica-assignment {text!r}: broker ids must be integers",
                           2) from None
        if not brokers:
            raise CliError(f"--replica-assignment {text!r}: partition {index} has no replicas",
                           2)
        if len(set(brokers)) != len(brokers):
            raise CliError("Partition replica lists may not contain duplicate entries: "
                           + ",".join(map(str, brokers)), 2)
        result[index] = brokers
    sizes = {len(b) for b in result.values()}
    if len(sizes) > 1:
        for index, brokers in result.items():
            if len(brokers) != len(result[0]):
                raise CliError(f"Partition {index} has different replication factor: "
                               f"{brokers}", 2)
    return result


def topic_configs(items: list[str]) -> dict[str, str]:
    """``--config`` values to a dict; Kafka's message for a malformed one."""
    configs: dict[str, str] = {}
    for item in items:
        try:
            key, value = parse_key_value(item, "--config")
        except CliError:
            raise CliError("requirement failed: Invalid topic config: all configs to be added "
                           "must be in the format \"key=val\".") from None
        configs[key] = value.strip()
    return configs


def select_topics(names: list[str], pattern: str | None, internal: set[str],
                  exclude_internal: bool) -> list[str]:
    """Topic names matching ``pattern`` (a whole-name regex; ',' separates alternatives)."""
    regex = None
    if pattern:
        try:
            regex = re.compile(pattern.replace(",", "|").strip())
        except re.error as exc:
            raise CliError(f"--topic {pattern!r} is not a valid regular expression: {exc}",
                           2) from None
    return [n for n in sorted(names)
            if (regex is None or regex.fullmatch(n))
            and not (exclude_internal and n in internal)]


# --- describe output (pure) ----------------------------------------------------------------


def _ids(nodes: tuple[int, ...] | list[int]) -> str:
    return ",".join(str(n) for n in nodes)


def describe_lines(info: TopicInfo, configs: dict[str, Any], args: argparse.Namespace,
                   live_brokers: set[int],
                   moves: Mapping[int, PartitionReassignment] | None = None) -> list[str]:
    """Kafka's describe output for one topic: a topic line, then one line per partition.
    ``moves`` are the partitions being reassigned: as Kafka's TopicCommand, their lines add
    ``Adding Replicas``/``Removing Replicas``, and the replicas being added count neither in
    the replication factor nor as missing from the ISR."""
    moves = moves or {}
    partitions = [info.partitions[p] for p in sorted(info.partitions)]
    overrides = [(name, e.value) for name, e in sorted(configs.items()) if not e.is_default]
    reports = [r for r in _REPORTS if getattr(args, r)]
    lines: list[str] = []
    if not reports and (not args.topics_with_overrides or overrides) and partitions:
        line = f"Topic: {info.name}"
        if info.topic_id is not None:
            line += f"\tTopicId: {_topic_id(info.topic_id)}"
        line += (f"\tPartitionCount: {len(partitions)}"
                 f"\tReplicationFactor: {_factor(partitions[0], moves)}"
                 f"\tConfigs: {','.join(f'{k}={v}' for k, v in overrides)}")
        lines.append(line)
    if args.topics_with_overrides:
        return lines
    min_isr_entry = configs.get("min.insync.replicas")
    min_isr = int(min_isr_entry.value) if min_isr_entry and min_isr_entry.value else 1
    for p in partitions:
        has_leader = p.leader >= 0
        wanted = not reports or any((
            args.under_replicated_partitions and _factor(p, moves) > len(p.isr),
            args.unavailable_partitions and (not has_leader or p.leader not in live_brokers),
            args.under_min_isr_partitions and (not has_leader or len(p.isr) < min_isr),
            args.at_min_isr_partitions and len(p.isr) == min_isr,
        ))
        if wanted:
            lines.append(f"\tTopic: {info.name}\tPartition: {p.partition}"
                         f"\tLeader: {p.leader if has_leader else 'none'}"
                         f"\tReplicas: {_ids(p.replicas)}\tIsr: {_ids(p.isr)}"
                         + _offline(p.offline_replicas) + _moving(moves.get(p.partition)))
    return lines


def _factor(p: PartitionInfo, moves: Mapping[int, PartitionReassignment]) -> int:
    move = moves.get(p.partition)
    return len(p.replicas) - (len(move.adding_replicas) if move is not None else 0)


def _moving(move: PartitionReassignment | None) -> str:
    if move is None:
        return ""
    return (f"\tAdding Replicas: {_ids(move.adding_replicas)}"
            f"\tRemoving Replicas: {_ids(move.removing_replicas)}")


def _offline(replicas: tuple[int, ...]) -> str:
    """Confluent's kafka-topics adds ``Offline:`` (replicas on brokers that are down); Apache
    Kafka's has no such column, so it is printed only when there are some, keeping a healthy
    partition's line byte-identical to Apache Kafka's."""
    return f"\tOffline: {_ids(replicas)}" if replicas else ""


def _topic_id(topic_id: Any) -> str:
    """Kafka prints topic ids in its URL-safe base64 form (22 characters)."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


# --- actions ------------------------------------------------------------------------------


async def _create(admin: AdminClient, args: argparse.Namespace) -> int:
    name = args.topic
    if args.replication_factor is not None and not 1 <= args.replication_factor <= 32767:
        raise CliError("The replication factor must be between 1 and 32767 inclusive")
    if args.partitions is not None and args.partitions < 1:
        raise CliError("The partitions must be greater than 0")
    configs = topic_configs(args.config)
    assignment = parse_replica_assignment(args.replica_assignment) if (
        args.replica_assignment) else None
    if "." in name or "_" in name:
        print("WARNING: Due to limitations in metric names, topics with a period ('.') or "
              "underscore ('_') could collide. To avoid issues it is best to use either, but "
              "not both.")
    new = NewTopic(name, -1 if args.partitions is None else args.partitions,
                   -1 if args.replication_factor is None else args.replication_factor,
                   configs, assignment)
    results = await admin.create_topics([new], raise_errors=False)
    error = results.get(name)
    if error is not None:
        if error.code == ErrorCode.topic_already_exists and args.if_not_exists:
            return 0
        raise CliError(broker_message(error, name))
    print(f"Created topic {name}.")
    return 0


async def _topics(admin: AdminClient, args: argparse.Namespace) -> tuple[
        list[str], dict[str, TopicInfo]]:
    infos = await admin.list_topics(include_internal=True)
    internal = {n for n, i in infos.items() if i.is_internal}
    names = select_topics(list(infos), args.topic, internal, args.exclude_internal)
    if args.topic and not names and not args.if_exists and not args.list:
        raise CliError(f"Topic '{args.topic}' does not exist as expected")
    return names, infos


async def _describe(admin: AdminClient, args: argparse.Namespace) -> int:
    names, infos = await _topics(admin, args)
    if not names:
        return 0
    configs = await admin.describe_configs([ConfigResource.topic(n) for n in names])
    live = {b.node_id for b in (await admin.describe_cluster()).brokers}
    moves = await _reassignments(admin)
    out: list[str] = []
    for name in names:
        mine = {tp.partition: m for tp, m in moves.items() if tp.topic == name}
        out.extend(describe_lines(infos[name], configs.get(ConfigResource.topic(name), {}),
                                  args, live, mine))
    if out:
        sys.stdout.write("\n".join(out) + "\n")
    return 0


async def _reassignments(admin: AdminClient) -> dict[Any, PartitionReassignment]:
    """The reassignments in progress; none from a broker without ListPartitionReassignments
    (as Kafka's TopicCommand, which then describes without them)."""
    try:
        return await admin.list_partition_reassignments()
    except (BrokerError, UnsupportedVersionError):
        return {}


async def _alter(admin: AdminClient, args: argparse.Namespace) -> int:
    names, _infos = await _topics(admin, args)
    if not names:
        return 0
    if args.replica_assignment:
        raise CliError("--replica-assignment with --alter is not supported yet; Moldau places "
                       "new partitions itself")
    _raise_failures(await admin.create_partitions({n: args.partitions for n in names},
                                                  raise_errors=False))
    return 0


async def _delete(admin: AdminClient, args: argparse.Namespace) -> int:
    names, _infos = await _topics(admin, args)
    if not names:
        return 0
    _raise_failures(await admin.delete_topics(names, raise_errors=False))
    return 0


def _raise_failures(results: dict[str, BrokerError | None]) -> None:
    """One CliError naming every topic the broker refused, with its reason."""
    failed = [broker_message(e, n) for n, e in results.items() if e is not None]
    if failed:
        raise CliError("; ".join(failed))


async def _list(admin: AdminClient, args: argparse.Namespace) -> int:
    names, _infos = await _topics(admin, args)
    if names:
        print("\n".join(names))
    return 0


def main(args: argparse.Namespace) -> int:
    problem = check_args(args)
    if problem:
        args.parser.error(problem)
    return run_admin_action(
        args, {"create": _create, "list": _list, "describe": _describe, "alter": _alter,
               "delete": _delete},
        client_id="moldau-topics", name="moldau topics", error_prefix=ERROR_PREFIX)

