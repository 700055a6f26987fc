"""``moldau produce``: send lines from standard input as records (kafka-console-producer.sh).

    echo "hello" | moldau produce -b localhost:9092 --topic greetings
    moldau produce -b localhost:9092 --topic orders \\
        --property parse.key=true --property key.separator=: < orders.txt

Each input line is one record; ``--property`` options control how a line splits into
headers, key and value (see :mod:`moldau.cli.line_reader`). Records are sent in the
background and batched (``--linger-ms``, ``--batch-size``); ``--sync`` waits for each one.
A record the cluster does not acknowledge is reported on stderr
(``Error when sending message to topic ...``) and makes the command exit with status 1.
With ``--value-format avro|json-schema|protobuf`` (and ``--key-format``) values (keys) are
JSON and are written framed for the schema registry, as Confluent's
kafka-avro-console-producer does (see :mod:`moldau.cli.schema_formats`).
As with Kafka's producer, a topic that does not exist is created when the broker allows
auto-creation.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import threading
from typing import Any

from moldau.client import Producer, RecordMetadata

from .common import (
    CliError,
    add_connection_options,
    add_tool_parser,
    client_config,
    describe_error,
    format_properties,
    key_values,
    probe_topic,
    run,
)
from .line_reader import PROPERTIES, LineReader, ReaderError
from .schema_formats import (
    PRODUCE_EPILOG,
    READER_PROPERTIES,
    RecordEncoder,
    add_format_options,
    known_properties,
)

_CHUNK = 1 << 16
_MAX_ERRORS_SHOWN = 10


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_tool_parser(
        subparsers, "produce", help="send stdin lines to a topic (kafka-console-producer.sh)",
        description="Read lines from standard input and send each one as a record to a topic, "
                    "like Kafka's kafka-console-producer.sh. Exits 1 if any record was not "
                    "acknowledged.",
        epilog="line format (--property), Kafka's defaults:\n"
               "  parse.key=false          line is 'key<key.separator>value'\n"
               "  key.separator=\\t\n"
               "  parse.headers=false      line starts 'h1:v1,h2:v2<headers.delimiter>'\n"
               "  headers.delimiter=\\t\n"
               "  headers.separator=,\n"
               "  headers.key.separator=:\n"
               "  null.marker=             a field equal to this becomes null\n"
               "  ignore.error=false       a line without the separator becomes a value\n\n"
               "examples:\n"
               "  echo 'hello' | moldau produce -b localhost:9092 --topic greetings\n"
               "  printf 'k1:v1\\nk2:v2\\n' | moldau produce -b localhost:9092 --topic t \\\n"
               "      --property parse.key=true --property key.separator=:\n"
               "  printf 'trace:abc\\tk1\\tv1\\n' | moldau produce -b localhost:9092 --topic t \\\n"
               "      --property parse.headers=true --property parse.key=true\n"
               "  echo '{\"id\": 1}' | moldau produce -b localhost:9092 --topic t \\\n"
               "      --value-format avro --property schema.registry.url=http://localhost:8081 \\\n"
               "      --property value.schema='{\"type\":\"record\",\"name\":\"R\",\"fields\":"
               "[{\"name\":\"id\",\"type\":\"int\"}]}'\n\n" + PRODUCE_EPILOG,
    )
    add_connection_options(
        parser, config_flags=("--producer.config", "--command-config"),
        config_help="producer properties file (Kafka's key names); --producer-property "
                    "values take precedence",
        bootstrap_aliases=("--broker-list",),
    )
    parser.add_argument("--topic", required=True, help="REQUIRED: the topic to produce to")
    fmt = parser.add_argument_group("input")
    fmt.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                     help="how lines are parsed (repeatable; see below)")
    fmt.add_argument("--reader-config", metavar="FILE",
                     help="properties file of --property settings (--property wins)")
    add_format_options(parser)
    prod = parser.add_argument_group("producer")
    prod.add_argument("--producer-property", action="append", default=[], metavar="KEY=VALUE",
                      help="a producer setting such as linger.ms=5 or enable.idempotence=false "
                           "(repeatable)")
    prod.add_argument("--sync", action="store_true",
                      help="send one record at a time and wait for its acknowledgement")
    prod.add_argument("--compression-codec", nargs="?", const="gzip", metavar="CODEC",
                      help="none, gzip, snappy, lz4 or zstd (gzip when given without a value)")
    prod.add_argument("--request-required-acks", metavar="ACKS",
                      help="acks: all/-1 (default), 1 or 0")
    prod.add_argument("--batch-size", type=int, metavar="BYTES",
                      help="batch.size: close a partition's batch at this many bytes")
    prod.add_argument("--linger-ms", type=int, metavar="MS",
                      help="linger.ms: wait this long for more records before sending")
    prod.add_argument("--request-timeout-ms", type=int, metavar="MS",
                      help="request.timeout.ms of produce requests")
    prod.add_argument("--message-send-max-retries", type=int, metavar="N",
                      help="retries before a record is given up")
    prod.add_argument("--retry-backoff-ms", type=int, metavar="MS", help="retry.backoff.ms")
    prod.add_argument("--max-block-ms", type=int, metavar="MS",
                      help="max.block.ms: how long to wait for metadata")
    prod.add_argument("--max-memory-bytes", type=int, metavar="BYTES",
                      help="buffer.memory: bytes of records buffered before input is paused")
    prod.add_argument("--metadata-expiry-ms", type=int, metavar="MS",
                      help="metadata.max.age.ms")
    parser.set_defaults(func=main, parser=parser)


def producer_overrides(args: argparse.Namespace) -> dict[str, str]:
    """Producer settings from the dedicated flags, then --producer-property (which wins)."""
    flags = {
        "compression.type": args.compression_codec,
        "acks": args.request_required_acks,
        "batch.size": args.batch_size,
        "linger.ms": args.linger_ms,
        "request.timeout.ms": args.request_timeout_ms,
        "retries": args.message_send_max_retries,
        "retry.backoff.ms": args.retry_backoff_ms,
        "max.block.ms": args.max_block_ms,
        "buffer.memory": args.max_memory_bytes,
        "metadata.max.age.ms": args.metadata_expiry_ms,
    }
    result = {k: str(v) for k, v in flags.items() if v is not None}
    result.update(key_values(args.producer_property, "--producer-property"))
    return result


def reader_properties(args: argparse.Namespace) -> dict[str, str]:
    """The --property settings (over --reader-config's), unknown keys warned about."""
    return format_properties(args.property, args.reader_config, "--reader-config",
                             known_properties(args, PROPERTIES, READER_PROPERTIES), "produce")


def reader_from_args(args: argparse.Namespace, props: dict[str, str] | None = None
                     ) -> LineReader:
    if props is None:
        props = reader_properties(args)
    try:
        return LineReader.from_properties(props)
    except ReaderError as exc:
        raise CliError(str(exc), 2) from None


def _describe_size(data: bytes | None) -> str:
    return "null" if data is None else f"{len(data)} bytes"


class _Input:
    """Standard input read in a thread, handed to the event loop line by line.

    ``os.read`` returns whatever is available, so a line typed at a terminal or written by a
    slow pipe is sent at once, while a file is read in large chunks.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.queue: asyncio.Queue[list[bytes] | None] = asyncio.Queue(maxsize=8)
        self.prompt = sys.stdin.isatty()
        threading.Thread(target=self._read, name="moldau-produce-stdin", daemon=True).start()

    def _put(self, item: list[bytes] | None) -> None:
        asyncio.run_coroutine_threadsafe(self.queue.put(item), self.loop).result()

    def _read(self) -> None:
        fd = sys.stdin.fileno()
        rest = b""
        try:
            while True:
                if self.prompt:
                    sys.stdout.write(">")
                    sys.stdout.flush()
                chunk = os.read(fd, _CHUNK)
                if not chunk:
                    break
                lines = (rest + chunk).split(b"\n")
                rest = lines.pop()
                if lines:
                    self._put(lines)
            if rest:
                self._put([rest])
        except Exception:
            pass  # the loop stopped (an error or Ctrl-C) or stdin is unreadable: end of input
        finally:
            try:
                self._put(None)
            except Exception:
                pass


async def produce(args: argparse.Namespace, reader: LineReader, config: dict[str, Any],
                  props: dict[str, str] | None = None) -> int:
    encoder = await RecordEncoder.create(args, props or {})
    try:
        return await _produce(args, reader, config, encoder)
    finally:
        if encoder is not None:
            await encoder.close()


async def _produce(args: argparse.Namespace, reader: LineReader, config: dict[str, Any],
                   encoder: RecordEncoder | None) -> int:
    await probe_topic(args, args.topic, create=True)
    producer = Producer(config)
    await producer.start()
    failures: list[str] = []
    sent = 0

    def report(key: bytes | None, value: bytes | None, exc: BaseException) -> None:
        failures.append(describe_error(exc))
        if len(failures) <= _MAX_ERRORS_SHOWN:
            print(f"Error when sending message to topic {args.topic} with key: "
                  f"{_describe_size(key)}, value: {_describe_size(value)} with error: "
                  f"{describe_error(exc)}", file=sys.stderr)

    def done(fut: asyncio.Future[RecordMetadata], key: bytes | None,
             value: bytes | None) -> None:
        if not fut.cancelled() and fut.exception() is not None:
            report(key, value, fut.exception())  # type: ignore[arg-type]

    limit = int(producer.config["buffer.memory"])
    source = _Input(asyncio.get_running_loop())
    number = 0
    try:
        while (lines := await source.queue.get()) is not None:
            for raw in lines:
                number += 1
                line = raw[:-1] if raw.endswith(b"\r") else raw
                key, value, headers = reader.parse(line, number)
                if encoder is not None:
                    key, value = await encoder.encode(key, value, number)
                fut = producer.send(args.topic, value, key=key, headers=headers)
                sent += 1
                if args.sync:
                    try:
                        await fut
                    except Exception as exc:
                        report(key, value, exc)
                        return 1
                else:
                    fut.add_done_callback(lambda f, k=key, v=value: done(f, k, v))
            if producer.buffered_bytes > limit:
                await producer.flush()  # back-pressure: Kafka's send() blocks here too
        await producer.flush(timeout=args.timeout)
    except ReaderError as exc:
        raise CliError(str(exc)) from None
    except TimeoutError:
        raise CliError(f"records still unacknowledged after {args.timeout:g} s (--timeout); "
                       "some may not have been delivered") from None
    finally:
        try:
            await producer.close(timeout=5)
        except TimeoutError:
            pass
    if failures:
        print(f"moldau produce: {len(failures)} of {sent} messages were not delivered",
              file=sys.stderr)
        return 1
    return 0


def main(args: argparse.Namespace) -> int:
    async def go() -> int:
        props = reader_properties(args)
        reader = reader_from_args(args, props)
        config = client_config(args, "producer", overrides=producer_overrides(args),
                               defaults={"client.id": "console-producer"})
        return await produce(args, reader, config, props)

    return run(go, "moldau produce")
