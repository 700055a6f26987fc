"""``moldau consume``: print records of a topic (kafka-console-consumer.sh).

    moldau consume -b localhost:9092 --topic orders --from-beginning
    moldau consume -b localhost:9092 --topic orders --partition 0 --offset 42 --max-messages 10
    moldau consume -b localhost:9092 --topic orders --group billing \\
        --property print.key=true --property print.offset=true

Without ``--group`` the tool reads every partition of the topic on its own (Kafka's tool joins a
throw-away group, which amounts to the same) and commits nothing. With ``--group`` it joins
that consumer group, shares the partitions with the group's other members and commits its
position. Output follows Kafka's DefaultMessageFormatter (see :mod:`moldau.cli.formatter`);
``Processed a total of N messages`` goes to stderr at the end, as Kafka's tool prints it.
With ``--value-format avro|json-schema|protobuf`` (and ``--key-format``) schema-registry framed
values (keys) are printed as JSON, as Confluent's kafka-avro-console-consumer prints them
(see :mod:`moldau.cli.schema_formats`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import sys
import time
from typing import Any

from moldau.client import ClientError, Consumer, ConsumerRecord, TopicPartition
from moldau.protocol.api_keys import ApiKey

from .common import (
    CLIENT_WARNINGS,
    CliError,
    add_connection_options,
    add_tool_parser,
    client_config,
    describe_error,
    format_properties,
    key_values,
    load_properties,
    open_bootstrap,
    probe_coordinator,
    probe_topic,
    run,
)
from .formatter import PROPERTIES, MessageFormatter
from .schema_formats import (
    CONSUME_EPILOG,
    FORMATTER_PROPERTIES,
    RecordDecoder,
    add_format_options,
    known_properties,
)

EARLIEST = -2
LATEST = -1


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_tool_parser(
        subparsers, "consume", help="print records of a topic (kafka-console-consumer.sh)",
        description="Read records from a topic and write them to standard output, like "
                    "Kafka's kafka-console-consumer.sh. By default it starts at the end of "
                    "each partition and waits for new records; stop it with Ctrl-C, "
                    "--max-messages or --timeout-ms.",
        epilog="output format (--property), Kafka's defaults:\n"
               "  print.timestamp=false  print.partition=false  print.offset=false\n"
               "  print.headers=false    print.key=false        print.value=true\n"
               "  key.separator=\\t  line.separator=\\n  headers.separator=,  "
               "null.literal=null\n\n"
               "examples:\n"
               "  moldau consume -b localhost:9092 --topic orders --from-beginning\n"
               "  moldau consume -b localhost:9092 --topic orders --partition 0 --offset 42 \\\n"
               "      --max-messages 10 --property print.key=true --property key.separator=:\n"
               "  moldau consume -b localhost:9092 --topic orders --group billing\n"
               "  moldau consume -b localhost:9092 --topic orders --from-beginning \\\n"
               "      --value-format avro --property schema.registry.url=http://localhost:8081\n\n"
               + CONSUME_EPILOG,
    )
    add_connection_options(
        parser, config_flags=("--consumer.config", "--command-config"),
        config_help="consumer properties file (Kafka's key names); --consumer-property "
                    "values take precedence",
    )
    src = parser.add_argument_group("what to read")
    src.add_argument("--topic", help="the topic to consume")
    src.add_argument("--include", metavar="REGEX",
                     help="read every topic whose whole name matches this regular expression "
                          "(topics present at start)")
    src.add_argument("--partition", type=int, metavar="P",
                     help="read only this partition (starts at its end unless --offset or "
                          "--from-beginning)")
    src.add_argument("--offset", metavar="OFFSET",
                     help="with --partition: 'earliest', 'latest' or a non-negative offset")
    src.add_argument("--from-beginning", action="store_true",
                     help="start at the earliest record when there is no committed offset")
    src.add_argument("--group", metavar="GROUP",
                     help="consumer group to join (commits offsets; shares partitions with "
                          "the group's other members)")
    src.add_argument("--isolation-level", choices=("read_uncommitted", "read_committed"),
                     help="read_committed hides records of aborted transactions")
    stop = parser.add_argument_group("when to stop")
    stop.add_argument("--max-messages", type=int, metavar="N",
                      help="exit after N records")
    stop.add_argument("--timeout-ms", type=int, metavar="MS",
                      help="exit when no record arrived for this long")
    out = parser.add_argument_group("output and consumer settings")
    out.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                     help="output format (repeatable; see below)")
    out.add_argument("--formatter-config", metavar="FILE",
                     help="properties file of --property settings (--property wins)")
    out.add_argument("--consumer-property", action="append", default=[], metavar="KEY=VALUE",
                     help="a consumer setting such as fetch.max.wait.ms=100 (repeatable)")
    out.add_argument("--skip-message-on-error", action="store_true",
                     help="with --value-format/--key-format: report a record that cannot be "
                          "read on stderr and go on (default: stop with status 1)")
    add_format_options(parser)
    parser.set_defaults(func=main, parser=parser)


# --- argument checks (pure) ----------------------------------------------------------------


def parse_offset(text: str | None, from_beginning: bool) -> int:
    """--offset as EARLIEST, LATEST or an offset (Kafka's rules and wording)."""
    if text is None:
        return EARLIEST if from_beginning else LATEST
    lowered = text.lower()
    if lowered == "earliest":
        return EARLIEST
    if lowered == "latest":
        return LATEST
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise CliError(f"The provided offset value '{text}' is incorrect. Valid values are "
                       "'earliest', 'latest', or a non-negative long.", 2)
    return value


def check_args(args: argparse.Namespace, consumer_props: dict[str, str]) -> str | None:
    """The first usage problem, in Kafka's words, or None."""
    if (args.topic is None) == (args.include is None):
        return "Exactly one of --include/--topic is required."
    if args.partition is not None:
        if args.topic is None:
            return "The topic is required when partition is specified."
        if args.from_beginning and args.offset is not None:
            return "Options from-beginning and offset cannot be specified together."
    elif args.offset is not None:
        return "The partition is required when offset is specified."
    groups = {g for g in (args.group, consumer_props.get("group.id")) if g}
    if len(groups) > 1:
        return ("The group ids provided in different places (directly using '--group', via "
                "'--consumer-property', or via '--consumer.config') do not match. Detected "
                "group ids: " + ", ".join(f"'{g}'" for g in sorted(groups)))
    if groups and args.partition is not None:
        return "Options group and partition cannot be specified together."
    reset = consumer_props.get("auto.offset.reset")
    if args.from_beginning and reset is not None and reset != "earliest":
        return (f"Can't simultaneously specify --from-beginning and 'auto.offset.reset={reset}'"
                ", please remove one option")
    if args.max_messages is not None and args.max_messages < 0:
        return "--max-messages must not be negative"
    return None


def consumer_settings(args: argparse.Namespace) -> dict[str, str]:
    """--consumer.config file, then --consumer-property, then the dedicated flags."""
    props: dict[str, str] = {}
    if args.command_config:
        props.update(load_properties(args.command_config, "--consumer.config"))
    props.update(key_values(args.consumer_property, "--consumer-property"))
    if args.group:
        props["group.id"] = args.group
    args.group_id_setting = props.get("group.id")
    props.setdefault("auto.offset.reset", "earliest" if args.from_beginning else "latest")
    if args.isolation_level:
        props["isolation.level"] = args.isolation_level
    return props


def consumer_group(args: argparse.Namespace) -> str | None:
    """The group id (--group, or group.id from --consumer-property / --consumer.config)."""
    return args.group or args.group_id_setting


def formatter_properties(args: argparse.Namespace) -> dict[str, str]:
    """The --property settings (over --formatter-config's), unknown keys warned about."""
    return format_properties(args.property, args.formatter_config, "--formatter-config",
                             known_properties(args, PROPERTIES, FORMATTER_PROPERTIES),
                             "consume")


def formatter_from_args(args: argparse.Namespace,
                        props: dict[str, str] | None = None) -> MessageFormatter:
    return MessageFormatter.from_properties(
        formatter_properties(args) if props is None else props)


# --- consuming ----------------------------------------------------------------------------


def _compile(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise CliError(f"--include {pattern!r} is not a valid regular expression: {exc}",
                       2) from None


async def _matching_topics(args: argparse.Namespace, regex: re.Pattern[str]) -> dict[str, int]:
    conn = await open_bootstrap(args)
    try:
        response = await conn.request(ApiKey.METADATA, {
            "topics": None, "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        }, version=conn.versions.require(ApiKey.METADATA, 1))
    finally:
        conn.close()
        await conn.wait_closed()
    return {t.name: len(t.partitions) for t in response.topics
            if not t.error_code and regex.fullmatch(t.name)}


async def _resolve(args: argparse.Namespace) -> dict[str, int]:
    """Topics to read and their partition counts (empty: a group subscribes to --include)."""
    group = consumer_group(args)
    if group:
        await probe_coordinator(args, group)
    if args.group_pattern:
        return {}
    if args.topic is not None:
        return {args.topic: await probe_topic(args, args.topic, create=True)}
    partitions = await _matching_topics(args, _compile(args.include))
    if not partitions:
        raise CliError(f"no topic matches --include {args.include!r}")
    return partitions


def _assign(consumer: Consumer, args: argparse.Namespace, partitions: dict[str, int]) -> None:
    """Subscribe (with a group) or assign partitions (without) and set start positions."""
    if args.group_pattern:
        consumer.subscribe(_compile(args.include))  # new matching topics join as they appear
        return
    if consumer.config["group.id"]:
        consumer.subscribe(sorted(partitions))
        return
    if args.partition is not None:
        count = partitions[args.topic]
        if not 0 <= args.partition < count:
            raise CliError(f"partition {args.partition} does not exist: topic '{args.topic}' "
                           f"has {count} partition(s) (0-{count - 1})")
        tp = TopicPartition(args.topic, args.partition)
        consumer.assign([tp])
        offset = parse_offset(args.offset, args.from_beginning)
        if offset == EARLIEST:
            consumer.seek_to_beginning([tp])
        elif offset == LATEST:
            consumer.seek_to_end([tp])
        else:
            consumer.seek(tp, offset)
        return
    consumer.assign([TopicPartition(t, p) for t, n in sorted(partitions.items())
                     for p in range(n)])


def _has_position(consumer: Consumer) -> bool:
    """True once some assigned partition knows where to read (the cluster was reached)."""
    return any(consumer.subscription.state(tp).position is not None
               for tp in consumer.assignment())


async def _decoded(decoder: RecordDecoder | None, records: list[ConsumerRecord],
                   skip_errors: bool) -> list[ConsumerRecord]:
    """Records with schema-registry framed keys/values as JSON (unreadable ones skipped with
    a message when ``skip_errors``, else the CliError stops the command)."""
    if decoder is None:
        return records
    out = []
    for record in records:
        try:
            out.append(await decoder.decode(record))
        except CliError as exc:
            if not skip_errors:
                raise
            print(f"moldau consume: skipping: {exc}", file=sys.stderr)
    return out


async def consume(args: argparse.Namespace, config: dict[str, Any],
                  formatter: MessageFormatter, decoder: RecordDecoder | None = None) -> int:
    loop = asyncio.get_running_loop()
    stopped: list[int] = []
    for sig, code in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
        loop.add_signal_handler(sig, stopped.append, code)
    count = 0
    skipped = 0
    exit_code = 0
    out = sys.stdout.buffer
    args.group_pattern = bool(config.get("group.id")) and args.include is not None
    partitions = await _resolve(args)  # fails before anything is counted
    consumer = Consumer(config)
    try:
        await consumer.start()
        _assign(consumer, args, partitions)
        limit = args.max_messages
        idle_limit = None if args.timeout_ms is None or args.timeout_ms < 0 else (
            args.timeout_ms / 1000)
        last = started = time.monotonic()
        reading = False
        while not stopped and (limit is None or count + skipped < limit):
            records = await consumer.poll(
                0.2, None if limit is None else limit - count - skipped)
            if not records:
                if idle_limit is not None and time.monotonic() - last >= idle_limit:
                    break
                reading = reading or _has_position(consumer)
                # Give up only when the client is failing (it warned) and there is something
                # to read: an idle group member with no partitions is not an error.
                if (not reading and CLIENT_WARNINGS.last is not None
                        and time.monotonic() - started > args.timeout
                        and (consumer.assignment() or not config.get("group.id"))):
                    raise CliError(
                        f"could not start reading within {args.timeout:g} s (--timeout): "
                        + (CLIENT_WARNINGS.last or "no partition got a position"))
                continue
            reading = True
            last = time.monotonic()
            seen = len(records)
            records = await _decoded(decoder, records, args.skip_message_on_error)
            try:
                out.write(b"".join(formatter.format(r) for r in records))
                out.flush()
            except BrokenPipeError:
                print("Unable to write to standard out, closing consumer.", file=sys.stderr)
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
                count += len(records)
                break
            count += len(records)
            skipped += seen - len(records)
    except (CliError, ClientError) as exc:
        print(f"moldau consume: {describe_error(exc)}", file=sys.stderr)
        exit_code = getattr(exc, "exit_code", 1)
    finally:
        try:
            await asyncio.wait_for(consumer.close(), 10)
        except Exception as exc:  # closing must not hide the count or the first error
            print(f"moldau consume: while closing: {describe_error(exc)}", file=sys.stderr)
        if decoder is not None:
            await decoder.close()
        print(f"Processed a total of {count} messages", file=sys.stderr)
    return stopped[0] if stopped else exit_code


def main(args: argparse.Namespace) -> int:
    async def go() -> int:
        props = consumer_settings(args)
        problem = check_args(args, props)
        if problem:
            raise CliError(problem, 2)
        parse_offset(args.offset, args.from_beginning)
        format_props = formatter_properties(args)
        formatter = formatter_from_args(args, format_props)
        decoder = RecordDecoder.create(args, format_props)
        args.command_config = None  # already merged into props
        config = client_config(args, "consumer", overrides=props,
                               defaults={"client.id": "console-consumer"})
        return await consume(args, config, formatter, decoder)

    return run(go, "moldau consume")
