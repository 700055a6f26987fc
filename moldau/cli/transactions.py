"""``moldau transactions``: list, describe and abort transactions, find hanging ones
(kafka-transactions.sh, KIP-664).

    moldau transactions -b localhost:9092 list [--duration-filter MS] \\
        [--transactional-id-pattern REGEX]
    moldau transactions -b localhost:9092 describe --transactional-id ID
    moldau transactions -b localhost:9092 describe-producers --topic T --partition P \\
        [--broker-id N]
    moldau transactions -b localhost:9092 abort --topic T --partition P \\
        (--start-offset O | --producer-id ID --producer-epoch E --coordinator-epoch C)
    moldau transactions -b localhost:9092 find-hanging (--broker-id N | --topic T \\
        [--partition P]) [--max-transaction-timeout MINUTES]

Columns and sub-command names are Kafka's. ``find-hanging`` reports transactions a partition
leader holds open (DescribeProducers) for longer than ``--max-transaction-timeout`` that no
coordinator accounts for (ListTransactions by producer id, then DescribeTransactions): those
hold back the last stable offset and every read_committed consumer, and ``abort`` ends them.
"""

from __future__ import annotations

import argparse
import sys
import time

from moldau.client import AdminClient, BrokerError, TopicPartition
from moldau.client.admin_txn import TransactionDescription

from .common import CliError, add_connection_options, add_tool_parser, run_admin_action
from .transactions_format import (
    DESCRIBE_HEADERS,
    HANGING_HEADERS,
    LIST_HEADERS,
    PRODUCER_HEADERS,
    describe_row,
    hanging,
    hanging_rows,
    list_rows,
    open_transactions,
    producer_rows,
    table,
)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_tool_parser(
        subparsers, "transactions",
        help="list, describe and abort transactions; find hanging ones "
             "(kafka-transactions.sh)",
        description="Inspect transactions at their coordinators and at partition leaders, "
                    "and abort a hanging transaction. Same sub-commands, flags and columns "
                    "as Kafka's kafka-transactions.sh; connection options go before the "
                    "sub-command.",
        epilog="examples:\n"
               "  moldau transactions -b localhost:9092 list\n"
               "  moldau transactions -b localhost:9092 describe --transactional-id app-1\n"
               "  moldau transactions -b localhost:9092 find-hanging --broker-id 1\n"
               "  moldau transactions -b localhost:9092 abort --topic orders --partition 0 "
               "--start-offset 42",
    )
    add_connection_options(parser)
    parser.set_defaults(func=main, parser=parser)
    subs = parser.add_subparsers(dest="txn_command", metavar="COMMAND")
    ls = subs.add_parser("list", help="transactions of every coordinator")
    ls.add_argument("--duration-filter", type=int, default=-1, metavar="MS",
                    help="only transactions open longer than MS milliseconds")
    ls.add_argument("--transactional-id-pattern", metavar="REGEX",
                    help="only transactional ids matching this regular expression")
    desc = subs.add_parser("describe", help="one transactional id at its coordinator")
    desc.add_argument("--transactional-id", required=True, metavar="ID")
    prod = subs.add_parser("describe-producers", help="active producers of a partition")
    prod.add_argument("--topic", required=True)
    prod.add_argument("--partition", required=True, type=int)
    prod.add_argument("--broker-id", type=int, metavar="N",
                      help="ask this broker (e.g. a follower) instead of the leader")
    abort = subs.add_parser("abort", help="abort a hanging transaction on one partition")
    abort.add_argument("--topic", required=True)
    abort.add_argument("--partition", required=True, type=int)
    abort.add_argument("--start-offset", type=int, metavar="OFFSET",
                       help="the open transaction's first offset (its producer is looked up)")
    abort.add_argument("--producer-id", type=int)
    abort.add_argument("--producer-epoch", type=int)
    abort.add_argument("--coordinator-epoch", type=int)
    hang = subs.add_parser("find-hanging", help="open transactions no coordinator knows")
    hang.add_argument("--broker-id", type=int, metavar="N",
                      help="check every partition this broker leads")
    hang.add_argument("--topic")
    hang.add_argument("--partition", type=int)
    hang.add_argument("--max-transaction-timeout", type=int, default=15, metavar="MINUTES",
                      help="the largest transaction.timeout.ms of your producers, in minutes "
                           "(default 15, the broker's transaction.max.timeout.ms)")


def check_args(args: argparse.Namespace) -> str | None:
    """Kafka's argument rules per sub-command; the message for a usage error, or None."""
    cmd = args.txn_command
    if cmd is None:
        return "give a sub-command: list, describe, describe-producers, abort, find-hanging"
    if cmd == "abort":
        explicit = (args.producer_id, args.producer_epoch, args.coordinator_epoch)
        if args.start_offset is None and None in explicit:
            return ("abort needs --start-offset, or all of --producer-id, --producer-epoch "
                    "and --coordinator-epoch")
        if args.start_offset is not None and any(v is not None for v in explicit):
            return "abort takes either --start-offset or the producer flags, not both"
    if cmd == "find-hanging":
        if (args.broker_id is None) == (args.topic is None):
            return "find-hanging needs exactly one of --broker-id and --topic"
        if args.partition is not None and args.topic is None:
            return "--partition needs --topic"
        if args.max_transaction_timeout < 1:
            return "--max-transaction-timeout must be at least 1 (minutes)"
    return None


async def _list(admin: AdminClient, args: argparse.Namespace) -> int:
    listings = await admin.list_transactions(
        duration_ms=args.duration_filter, pattern=args.transactional_id_pattern)
    sys.stdout.write(table(LIST_HEADERS, list_rows(listings)))
    return 0


async def _describe(admin: AdminClient, args: argparse.Namespace) -> int:
    found = await admin.describe_transactions([args.transactional_id])
    d = found[args.transactional_id]
    assert isinstance(d, TransactionDescription)
    sys.stdout.write(table(DESCRIBE_HEADERS, [describe_row(d, int(time.time() * 1000))]))
    return 0


async def _producers(admin: AdminClient, args: argparse.Namespace) -> int:
    tp = TopicPartition(args.topic, args.partition)
    result = (await admin.describe_producers([tp], broker_id=args.broker_id))[tp]
    if isinstance(result, BrokerError):
        raise result
    sys.stdout.write(table(PRODUCER_HEADERS, producer_rows(result)))
    return 0


async def _abort(admin: AdminClient, args: argparse.Namespace) -> int:
    tp = TopicPartition(args.topic, args.partition)
    if args.start_offset is None:
        await admin.abort_transaction(tp, args.producer_id, args.producer_epoch,
                                      args.coordinator_epoch)
        return 0
    states = (await admin.describe_producers([tp]))[tp]
    if isinstance(states, BrokerError):
        raise states
    match = [s for s in states if s.current_txn_start_offset == args.start_offset]
    if not match:
        raise CliError(f"Could not find any open transactions starting at offset "
                       f"{args.start_offset} on partition {tp}")
    p = match[0]
    await admin.abort_transaction(tp, p.producer_id, p.producer_epoch, p.coordinator_epoch)
    return 0


async def _partitions(admin: AdminClient, args: argparse.Namespace) -> list[TopicPartition]:
    if args.topic is not None:
        info = (await admin.describe_topics([args.topic]))[args.topic]
        parts = sorted(info.partitions) if args.partition is None else [args.partition]
        return [TopicPartition(args.topic, p) for p in parts]
    topics = await admin.list_topics(include_internal=True)
    return sorted(TopicPartition(name, p) for name, info in topics.items()
                  for p, part in info.partitions.items() if part.leader == args.broker_id)


async def _find_hanging(admin: AdminClient, args: argparse.Namespace) -> int:
    tps = await _partitions(admin, args)
    now = int(time.time() * 1000)
    raw = await admin.describe_producers(tps, broker_id=args.broker_id)
    producers = {tp: v for tp, v in raw.items() if not isinstance(v, BrokerError)}
    candidates = open_transactions(producers, now, args.max_transaction_timeout * 60000)
    described: list[TransactionDescription] = []
    if candidates:
        pids = sorted({c.producer.producer_id for c in candidates})
        listed = await admin.list_transactions(producer_ids=pids)
        if listed:
            found = await admin.describe_transactions(
                [t.transactional_id for t in listed], raise_errors=False)
            described = [d for d in found.values() if isinstance(d, TransactionDescription)]
    sys.stdout.write(table(HANGING_HEADERS, hanging_rows(hanging(candidates, described), now)))
    return 0


def main(args: argparse.Namespace) -> int:
    problem = check_args(args)
    if problem:
        args.parser.error(problem)
    actions = {"list": _list, "describe": _describe, "describe-producers": _producers,
               "abort": _abort, "find-hanging": _find_hanging}
    for name in actions:
        setattr(args, name, name == args.txn_command)
    return run_admin_action(args, actions, client_id="moldau-transactions",
                            name="moldau transactions",
                            error_prefix="Error: Transactions command failed")
