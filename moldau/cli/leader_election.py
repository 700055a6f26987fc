"""``moldau leader-election``: elect partition leaders (kafka-leader-election.sh).

Same flags and output as Kafka's ``kafka-leader-election.sh``::

    moldau leader-election --bootstrap-server localhost:9092 --election-type PREFERRED \\
        (--all-topic-partitions | --topic orders --partition 0 | --path-to-json-file f.json)

PREFERRED gives each partition back to its preferred replica (the first of its assignment),
for instance after a rolling restart left the leaders bunched on the brokers that stayed up;
UNCLEAN elects a leader for partitions whose in-sync replicas are all gone (data loss). The
JSON file is Kafka's: ``{"partitions": [{"topic": "orders", "partition": 0}, ...]}``.

It prints Kafka's lines::

    Successfully completed leader election (PREFERRED) for partitions orders-0, orders-1
    Valid replica already elected for partitions orders-2
    Error completing leader election (PREFERRED) for partition: orders-3: <error>

and exits 1 when any partition could not be elected ("N replica(s) could not be elected").
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from moldau.client import AdminClient, BrokerError, TopicPartition
from moldau.protocol.errors import ErrorCode

from .common import CliError, add_connection_options, add_tool_parser, admin_client, run

ELECTION_TYPES = {"PREFERRED": 0, "UNCLEAN": 1}
_EXCLUSIVE = ("topic", "all-topic-partitions", "path-to-json-file")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_tool_parser(
        subparsers, "leader-election", help="elect partition leaders, e.g. the preferred "
                                            "replicas (kafka-leader-election.sh)",
        description="Elect the leaders of partitions: PREFERRED moves leadership back to "
                    "each partition's preferred replica (the first of its assignment); "
                    "UNCLEAN elects an out-of-sync replica where no in-sync one is alive "
                    "(records it lacks are lost). Same flags and output as Kafka's "
                    "kafka-leader-election.sh.",
        epilog="examples:\n"
               "  moldau leader-election -b localhost:9092 --election-type PREFERRED "
               "--all-topic-partitions\n"
               "  moldau leader-election -b localhost:9092 --election-type preferred "
               "--topic orders --partition 0\n"
               "  moldau leader-election -b localhost:9092 --election-type UNCLEAN "
               "--path-to-json-file partitions.json",
    )
    add_connection_options(
        parser, config_flags=("--admin.config", "--command-config"),
        config_help="properties file of admin client settings (Kafka's --admin.config)")
    parser.add_argument("--election-type", dest="election_type", metavar="PREFERRED|UNCLEAN",
                        help="REQUIRED: type of election: PREFERRED or UNCLEAN "
                             "(case-insensitive)")
    parser.add_argument("--topic", help="name of the topic whose partition's leader to "
                                        "elect; needs --partition")
    parser.add_argument("--partition", type=int, help="partition of --topic to elect")
    parser.add_argument("--all-topic-partitions", dest="all_topic_partitions",
                        action="store_true",
                        help="elect leaders of every partition that needs an election")
    parser.add_argument("--path-to-json-file", dest="path_to_json_file", metavar="FILE",
                        help='JSON file of partitions: {"partitions": [{"topic": "foo", '
                             '"partition": 1}, ...]}')
    parser.set_defaults(func=main, parser=parser)


def election_type(text: str | None) -> int:
    """``--election-type`` (case-insensitive) to Kafka's byte."""
    if text is None:
        raise CliError('Missing required argument "[election-type]": PREFERRED or UNCLEAN', 2)
    value = ELECTION_TYPES.get(text.strip().upper())
    if value is None:
        raise CliError(f"--election-type {text!r}: the election type is PREFERRED or UNCLEAN",
                       2)
    return value


def check_options(args: argparse.Namespace) -> None:
    """Kafka's option rules: exactly one of --topic, --all-topic-partitions,
    --path-to-json-file; --partition with --topic and only with it."""
    given = [args.topic is not None, args.all_topic_partitions,
             args.path_to_json_file is not None]
    if not any(given):
        raise CliError("One and only one of the following options is required: "
                       + ", ".join(_EXCLUSIVE), 2)
    if sum(given) > 1:
        raise CliError("Only one of the following options is allowed: "
                       + ", ".join(_EXCLUSIVE), 2)
    if args.topic is not None and args.partition is None:
        raise CliError("Missing required option(s): partition", 2)
    if args.topic is None and args.partition is not None:
        raise CliError("Option partition is only allowed if topic is used", 2)


def parse_election_file(path: str) -> list[TopicPartition]:
    """The partitions of a kafka-leader-election.sh JSON file; errors name the file and what
    is wrong with it."""
    try:
        with open(path, encoding="utf-8") as f:
            document: Any = json.load(f)
    except OSError as exc:
        raise CliError(f"--path-to-json-file {path}: cannot read it: {exc.strerror}") from None
    except ValueError as exc:
        raise CliError(f"--path-to-json-file {path}: not valid JSON: {exc}") from None
    entries = document.get("partitions") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise CliError(f'--path-to-json-file {path}: Replica election data is missing the '
                       f'"partitions" field; expected {{"partitions": [{{"topic": "foo", '
                       f'"partition": 1}}]}}')
    partitions: list[TopicPartition] = []
    for entry in entries:
        topic = entry.get("topic") if isinstance(entry, dict) else None
        partition = entry.get("partition") if isinstance(entry, dict) else None
        if not isinstance(topic, str) or not isinstance(partition, int) \
                or isinstance(partition, bool):
            raise CliError(f"--path-to-json-file {path}: {json.dumps(entry)} is not a "
                           f'partition; each entry is {{"topic": "<name>", "partition": <n>}}')
        partitions.append(TopicPartition(topic, partition))
    if not partitions:
        raise CliError(f"--path-to-json-file {path}: Replica election data is empty: list "
                       f"at least one partition")
    duplicates = sorted({f"{tp.topic}-{tp.partition}" for tp in partitions
                         if partitions.count(tp) > 1})
    if duplicates:
        raise CliError(f"--path-to-json-file {path}: Replica election data contains duplicate "
                       f"partitions: {','.join(duplicates)}")
    return partitions


def exception_name(code: ErrorCode) -> str:
    """Kafka's exception class for an error code, e.g.
    org.apache.kafka.common.errors.PreferredLeaderNotAvailableException."""
    words = code.name.split("_")
    name = "".join(w.title() for w in words)
    if not name.endswith("Exception"):
        name += "Exception"
    return f"org.apache.kafka.common.errors.{name}"


def report(kind: str, results: dict[TopicPartition, BrokerError | None]) -> int:
    """Print Kafka's lines for ``results``; the exit code (1 if any partition failed)."""
    def names(tps: list[TopicPartition]) -> str:
        return ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(tps))

    succeeded = [tp for tp, err in results.items() if err is None]
    noop = [tp for tp, err in results.items()
            if err is not None and err.code == ErrorCode.election_not_needed]
    failed = {tp: err for tp, err in results.items()
              if err is not None and err.code != ErrorCode.election_not_needed}
    if succeeded:
        print(f"Successfully completed leader election ({kind}) for partitions "
              f"{names(succeeded)}")
    if noop:
        print(f"Valid replica already elected for partitions {names(noop)}")
    for tp, err in sorted(failed.items()):
        detail = _broker_message(err)
        print(f"Error completing leader election ({kind}) for partition: "
              f"{tp.topic}-{tp.partition}: {exception_name(err.code)}{detail}")
    sys.stdout.flush()
    if failed:
        print(f"{len(failed)} replica(s) could not be elected", file=sys.stderr)
        return 1
    return 0


def _broker_message(err: BrokerError) -> str:
    # BrokerError's text is "CODE (broker's message)"; Kafka prints the message alone.
    text, head = err.message, f"{err.code.name.upper()} ("
    if text.startswith(head) and text.endswith(")"):
        return ": " + text[len(head):-1]
    return ""


async def _elect(admin: AdminClient, args: argparse.Namespace, kind: int,
                 partitions: list[TopicPartition] | None) -> int:
    results = await admin.elect_leaders(kind, partitions)
    return report(next(n for n, v in ELECTION_TYPES.items() if v == kind), results)


def main(args: argparse.Namespace) -> int:
    def prepare() -> tuple[int, list[TopicPartition] | None]:
        kind = election_type(args.election_type)
        check_options(args)
        if args.topic is not None:
            return kind, [TopicPartition(args.topic, args.partition)]
        if args.path_to_json_file is not None:
            return kind, parse_election_file(args.path_to_json_file)
        return kind, None

    async def go() -> int:
        kind, partitions = prepare()
        async with admin_client(args, "leader-election-tool") as admin:
            return await _elect(admin, args, kind, partitions)

    return run(go, "moldau leader-election", "moldau leader-election")
