"""Shared parts of the client-side tools: connection options, client configs, errors.

Every tool that connects takes the same options, named as in Kafka's tools:

``--bootstrap-server HOST:PORT[,...]`` (``-b``)
    where to learn the cluster from; only the first contact, every later connection goes to
    the addresses the brokers advertise.
``--command-config FILE``
    a Java-properties file of client settings (``client.id``, ``request.timeout.ms``, ...).
``--address-map 'ADVERTISED=REACHABLE,...'``
    sets ``broker.address.map``: connect to REACHABLE whenever a broker advertises ADVERTISED
    (for brokers behind NAT or in Docker that advertise an address this machine cannot reach).
``--timeout SECONDS``
    how long to keep trying to reach the cluster and to wait for each operation.

Expected failures (unreachable address, a broker error, a bad option) end in one readable
line on stderr and a non-zero exit status, never in a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import difflib
import logging
import os
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any

from moldau.client import (
    AddressMap,
    AdminClient,
    AdminError,
    BrokerConnection,
    BrokerError,
    BrokerInfo,
    ClientError,
    ConfigError,
    KafkaConnectionError,
)
from moldau.client.config import KINDS, parse_servers
from moldau.protocol import properties
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode

from .runtime import run_loop

DEFAULT_TIMEOUT_S = 30.0

# Java-client settings that command-config files commonly carry and that do not apply here
# (serializers: the tools work on bytes). Dropped with a note rather than rejected.
_IGNORED_KEYS = frozenset({
    "key.serializer", "value.serializer", "key.deserializer", "value.deserializer",
})


class CliError(Exception):
    """A failure to report as one line (``exit_code`` defaults to 1)."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


# --- help ---------------------------------------------------------------------------------


class HelpFormatter(argparse.HelpFormatter):
    """Wraps prose paragraphs of descriptions and epilogs; keeps indented lines (examples,
    tables) as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        out = []
        for para in text.strip("\n").split("\n\n"):
            lines = para.splitlines()
            if any(line.startswith(" ") for line in lines[1:]) or lines[0].startswith(" "):
                out.append("\n".join(indent + line for line in lines))
            else:
                out.append(textwrap.fill(" ".join(lines), width, initial_indent=indent,
                                         subsequent_indent=indent))
        return "\n\n".join(out)


def add_tool_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser], name: str, *, help: str,
    description: str, epilog: str = "",
) -> argparse.ArgumentParser:
    """A subcommand parser with Moldau's help layout."""
    return subparsers.add_parser(name, help=help, description=description, epilog=epilog,
                                 formatter_class=HelpFormatter)


# --- options ------------------------------------------------------------------------------


def add_connection_options(
    parser: argparse.ArgumentParser, *, config_flags: tuple[str, ...] = ("--command-config",),
    config_help: str | None = None, bootstrap_aliases: tuple[str, ...] = (),
) -> None:
    """Add --bootstrap-server/-b, the client-config file flag(s), --address-map, --timeout.

    ``config_flags`` names the properties-file option (the console producer calls it
    ``--producer.config``); ``bootstrap_aliases`` adds old spellings such as ``--broker-list``.
    """
    group = parser.add_argument_group("connection")
    group.add_argument(
        "--bootstrap-server", "-b", *bootstrap_aliases, dest="bootstrap_server",
        metavar="HOST:PORT[,...]",
        help="REQUIRED: broker(s) to connect to first, e.g. localhost:9092. The cluster then "
             "tells the client every broker's advertised address.",
    )
    group.add_argument(
        *config_flags, dest="command_config", metavar="FILE",
        help=config_help or "properties file of client settings (Kafka's key names, e.g. "
                            "client.id=me, request.timeout.ms=5000)",
    )
    group.add_argument(
        "--address-map", dest="address_map", metavar="ADVERTISED=REACHABLE[,...]",
        help="rewrite broker addresses the cluster advertises before connecting "
             "(sets broker.address.map), e.g. '10.0.0.5:9092=203.0.113.7:19092' or "
             "'kafka0=localhost'. For brokers behind NAT or inside Docker.",
    )
    group.add_argument(
        "--timeout", dest="timeout", type=positive_seconds, default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help=f"give up reaching the cluster, or waiting for an operation, after this many "
             f"seconds (default {DEFAULT_TIMEOUT_S:g})",
    )


def positive_seconds(text: str) -> float:
    """argparse ``type`` of a ``--timeout SECONDS`` option: a number greater than 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, not {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, not {text}")
    return value


def parse_key_value(text: str, what: str) -> tuple[str, str]:
    """``key=value`` (value may be empty or contain '='); raises CliError otherwise."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise CliError(f"{what} {text!r} is not in the form key=value", 2)
    return key.strip(), value


def key_values(items: list[str] | None, what: str) -> dict[str, str]:
    """Repeated ``key=value`` options to a dict (later ones win)."""
    return dict(parse_key_value(item, what) for item in items or [])


# --- properties files ---------------------------------------------------------------------

def load_properties(path: str, what: str) -> dict[str, str]:
    """Read a properties file, failing with a readable message."""
    try:
        return properties.parse(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise CliError(f"cannot read {what} {path}: {exc.strerror or exc}", 2) from None
    except properties.PropertiesError as exc:
        raise CliError(f"cannot read {what} {path}: {exc}", 2) from None


def format_properties(items: list[str], path: str | None, file_flag: str,
                      known: tuple[str, ...], tool: str) -> dict[str, str]:
    """A console tool's ``--property`` settings (``items``) over those of the properties file
    ``path`` given with ``file_flag`` (e.g. ``--formatter-config``); keys not in ``known`` get
    a warning on stderr (and are left for the formatter or reader to ignore)."""
    props: dict[str, str] = {}
    if path:
        props.update(load_properties(path, file_flag))
    props.update(key_values(items, "--property"))
    for key in props:
        if key not in known:
            print(f"moldau {tool}: warning: ignoring unknown --property {key!r} (known: "
                  f"{', '.join(known)})", file=sys.stderr)
    return props


# --- client configuration -----------------------------------------------------------------


def require_bootstrap(args: argparse.Namespace) -> list[tuple[str, int]]:
    """The parsed --bootstrap-server list; a usage error when missing or malformed."""
    if not args.bootstrap_server:
        raise CliError('Missing required argument "--bootstrap-server" (e.g. -b localhost:9092)',
                       2)
    try:
        return parse_servers("--bootstrap-server", args.bootstrap_server)
    except ConfigError as exc:
        raise CliError(str(exc), 2) from None


def client_config(args: argparse.Namespace, kind: str, *, extra_file: str | None = None,
                  overrides: Mapping[str, str] | None = None,
                  defaults: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Build a config dict for a ``kind`` ("admin", "producer", "consumer") client.

    Precedence, lowest first: ``defaults``, ``--command-config`` (or ``extra_file``), then
    ``overrides`` (e.g. ``--producer-property``), then the connection options themselves.
    """
    require_bootstrap(args)
    config: dict[str, Any] = dict(defaults or {})
    path = extra_file or getattr(args, "command_config", None)
    if path:
        config.update(load_properties(path, "client config file"))
    config.update(overrides or {})
    config["bootstrap.servers"] = args.bootstrap_server
    if args.address_map:
        config["broker.address.map"] = args.address_map
    timeout_ms = int(args.timeout * 1000)
    config.setdefault("request.timeout.ms", str(min(30000, timeout_ms)))
    config.setdefault("socket.connection.setup.timeout.ms", str(min(10000, timeout_ms)))
    known = KINDS[kind]
    if "default.api.timeout.ms" in known:
        config.setdefault("default.api.timeout.ms", str(timeout_ms))
    if kind == "producer":
        config.setdefault("max.block.ms", str(timeout_ms))
        config.setdefault("delivery.timeout.ms", str(timeout_ms))
    for key in [k for k in config if k in _IGNORED_KEYS]:
        config.pop(key)
    protocol = str(config.pop("security.protocol", "PLAINTEXT")).upper()
    if protocol != "PLAINTEXT":
        raise CliError(f"security.protocol={protocol} is not supported yet; only PLAINTEXT", 2)
    for key in [k for k in config if k not in known]:
        if key.startswith(("sasl.", "ssl.")):
            raise CliError(f"{key}: SASL and SSL settings are not supported yet", 2)
        # As Kafka's clients do: warn about a key this kind of client does not know, and go on
        # (one properties file often serves several tools).
        hint = difflib.get_close_matches(key, list(known), n=1)
        print(f"moldau: warning: ignoring {key!r}, not a {kind} setting"
              + (f" (did you mean {hint[0]!r}?)" if hint else ""), file=sys.stderr)
        config.pop(key)
    try:
        AddressMap.parse(config.get("broker.address.map"))
    except ConfigError as exc:
        raise CliError(f"--address-map: {exc}", 2) from None
    return config


# --- reaching the cluster -----------------------------------------------------------------


async def open_bootstrap(args: argparse.Namespace) -> BrokerConnection:
    """A connection to the first bootstrap address that answers, retrying until --timeout.

    Clients retry silently; a tool should say at once what is wrong, so the first round of
    failures is reported on stderr, and the final error lists each address with its cause.
    """
    servers = require_bootstrap(args)
    deadline = time.monotonic() + args.timeout
    warned = False
    pause = 0.1
    while True:
        errors: list[str] = []
        retriable = False
        for host, port in servers:
            left = max(0.05, deadline - time.monotonic())
            conn = BrokerConnection(host, port, client_id="moldau-cli",
                                    connect_timeout_ms=int(min(left, 10.0) * 1000))
            try:
                await conn.connect()
            except (KafkaConnectionError, BrokerError, OSError) as exc:
                errors.append(_strip_prefix(str(exc)))
                retriable = retriable or getattr(exc, "retriable", True)
                continue
            return conn
        if not retriable:  # every address answered in another protocol (HTTP, TLS)
            raise CliError("no Kafka broker at --bootstrap-server: " + "; ".join(errors))
        if time.monotonic() + pause >= deadline:
            raise CliError(
                "could not reach any bootstrap server within "
                f"{args.timeout:g} s (--timeout): " + "; ".join(errors)
                + ". Check --bootstrap-server: is a broker running there, and is that "
                "address reachable from this machine?"
            )
        if not warned:
            print(f"moldau: {'; '.join(errors)}; retrying for up to {args.timeout:g} s "
                  "(--timeout)", file=sys.stderr)
            warned = True
        await asyncio.sleep(pause)
        pause = min(1.0, pause * 2)


async def check_bootstrap(args: argparse.Namespace) -> None:
    """Fail early, with every address and its cause, when no bootstrap server answers."""
    conn = await open_bootstrap(args)
    conn.close()
    await conn.wait_closed()


@contextlib.asynccontextmanager
async def admin_client(args: argparse.Namespace, client_id: str) -> AsyncIterator[AdminClient]:
    """An AdminClient from the tool's connection options (``client.id`` defaults to
    ``client_id``), opened once a bootstrap server has answered (:func:`check_bootstrap`)."""
    config = client_config(args, "admin", defaults={"client.id": client_id})
    await check_bootstrap(args)
    async with AdminClient(config) as admin:
        yield admin


AdminAction = Callable[[AdminClient, argparse.Namespace], Coroutine[Any, Any, int]]


def run_admin_action(args: argparse.Namespace, actions: Mapping[str, AdminAction], *,
                     client_id: str, name: str, error_prefix: str) -> int:
    """Run the action whose flag is set in ``args`` (the caller has checked there is exactly
    one) with an :func:`admin_client`; exit code and errors as :func:`run` gives them."""

    async def go() -> int:
        async with admin_client(args, client_id) as admin:
            action = next(a for a in actions if getattr(args, a))
            return await actions[action](admin, args)

    return run(go, name, error_prefix)


async def probe_topic(args: argparse.Namespace, topic: str, *, create: bool) -> int:
    """Ask a bootstrap server about ``topic``; its partition count.

    With ``create`` the request allows auto-creation, as Kafka's Java producer and consumer
    do, so ``echo x | moldau produce --topic new`` creates the topic on brokers with
    ``auto.create.topics.enable=true``. A topic that does not exist afterwards is an error
    that says how to create it.
    """
    conn = await open_bootstrap(args)
    try:
        # v4+: the request says whether auto-creation is allowed (earlier versions let the
        # broker decide).
        version = conn.versions.require(ApiKey.METADATA, 4, what="topic metadata")
        deadline = time.monotonic() + args.timeout
        while True:
            response = await conn.request(ApiKey.METADATA, {
                "topics": [{"name": topic, "topic_id": None}],
                "allow_auto_topic_creation": create,
                "include_cluster_authorized_operations": False,
                "include_topic_authorized_operations": False,
            }, version=version)
            info = next((t for t in response.topics if t.name == topic), None)
            code = int(info.error_code) if info is not None else int(
                ErrorCode.unknown_topic_or_partition)
            if info is not None and not code and info.partitions:
                return len(info.partitions)
            retriable = code == ErrorCode.leader_not_available or (
                create and code == ErrorCode.unknown_topic_or_partition)
            if not retriable or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
    finally:
        conn.close()
        await conn.wait_closed()
    if code == ErrorCode.unknown_topic_or_partition:
        hint = (" and the broker did not create it (auto.create.topics.enable=false)"
                if create else "")
        raise CliError(f"topic '{topic}' does not exist{hint}; create it with "
                       f"`moldau topics -b {args.bootstrap_server} --create --topic {topic}`")
    if code == ErrorCode.invalid_topic_exception:
        raise CliError(f"'{topic}' is not a valid topic name: use ASCII letters, digits, "
                       "'.', '_' and '-', at most 249 characters")
    raise CliError(f"topic '{topic}' is not available: {ErrorCode(code).name.upper()}")


async def probe_coordinator(args: argparse.Namespace, group: str) -> None:
    """Find ``group``'s coordinator and make sure this machine can connect to it.

    A consumer in a group otherwise waits silently forever when the coordinator's advertised
    address is unreachable; a tool should say so, naming the address.
    """
    conn = await open_bootstrap(args)
    deadline = time.monotonic() + args.timeout
    try:
        version = conn.versions.require(ApiKey.FIND_COORDINATOR, what="consumer groups")
        while True:
            response = await conn.request(ApiKey.FIND_COORDINATOR, {
                "key": group, "key_type": 0, "coordinator_keys": [group]}, version=version)
            answer = response.coordinators[0] if version >= 4 else response
            code = int(answer.error_code)
            if not code:
                break
            if not ErrorCode(code).retriable or time.monotonic() > deadline:
                raise CliError(f"cannot find the coordinator of group '{group}': "
                               f"{ErrorCode(code).name.upper()}")
            await asyncio.sleep(0.2)
    finally:
        conn.close()
        await conn.wait_closed()
    address_map = AddressMap.parse(args.address_map)
    host, port = address_map.apply(answer.host, answer.port)
    broker = BrokerInfo(answer.node_id, host, port, None, (answer.host, answer.port))
    left = max(0.05, deadline - time.monotonic())
    link = BrokerConnection(host, port, client_id="moldau-cli", broker=broker,
                            connect_timeout_ms=int(min(left, 10.0) * 1000))
    try:
        await link.connect()
    except (KafkaConnectionError, OSError) as exc:
        raise CliError(f"the coordinator of group '{group}' is unreachable: "
                       f"{describe_error(exc)}") from None
    link.close()
    await link.wait_closed()


def _strip_prefix(text: str) -> str:
    return text[0].lower() + text[1:] if text else text


# --- errors -------------------------------------------------------------------------------

# Kafka's default messages (org.apache.kafka.common.protocol.Errors) for codes the tools
# report when the broker sent no message of its own.
_DEFAULT_MESSAGES = {
    ErrorCode.topic_already_exists: "Topic '{name}' already exists.",
    ErrorCode.unknown_topic_or_partition: "This server does not host this topic-partition.",
    ErrorCode.invalid_partitions: "Number of partitions is below 1.",
    ErrorCode.invalid_replication_factor: "Replication factor is below 1 or larger than the "
                                          "number of available brokers.",
    ErrorCode.invalid_config: "Configuration is invalid.",
    ErrorCode.group_id_not_found: "The group id does not exist.",
    ErrorCode.non_empty_group: "The group is not empty.",
    ErrorCode.policy_violation: "Request parameters do not satisfy the configured policy.",
    ErrorCode.topic_deletion_disabled: "Topic deletion is disabled.",
}


def broker_message(error: BrokerError, name: str = "") -> str:
    """The broker's own error message of ``error`` (else Kafka's default text for the code).

    :class:`BrokerError` formats ``context: CODE (message)``; tools print just the message,
    as Kafka's tools print ``exception.getMessage()``.
    """
    code = error.code
    text = error.message or ""
    marker = f"{code.name.upper()} ("
    at = text.find(marker)
    if at >= 0 and text.endswith(")"):
        return text[at + len(marker):-1]
    default = _DEFAULT_MESSAGES.get(code)
    if default:
        return default.format(name=name)
    return code.name.replace("_", " ").capitalize() + "."


def describe_error(exc: BaseException) -> str:
    """One readable line for an exception raised by the client."""
    if isinstance(exc, AdminError):
        parts = [broker_message(err, str(key)) if isinstance(err, BrokerError) else str(err)
                 for key, err in exc.errors.items()]
        return "; ".join(parts)
    if isinstance(exc, BrokerError):
        return broker_message(exc)
    text = str(exc) or type(exc).__name__
    if "this address came from the cluster's metadata" in text:
        text += ". Run `moldau doctor -b ...` to check every advertised address."
    return text


class ClientWarnings(logging.Handler):
    """Shows the client library's warnings once each (they repeat on every retry) and keeps
    the last one, for tools that give up and want to say why."""

    def __init__(self, name: str) -> None:
        super().__init__(logging.WARNING)
        self.name_prefix = name
        self.seen: set[str] = set()
        self.last: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        self.last = text
        if text not in self.seen:
            self.seen.add(text)
            print(f"{self.name_prefix}: warning: {text}", file=sys.stderr)


CLIENT_WARNINGS = ClientWarnings("moldau")


def _install_client_log(name: str) -> None:
    logger = logging.getLogger("moldau.client")
    CLIENT_WARNINGS.name_prefix = name
    if CLIENT_WARNINGS not in logger.handlers:
        logger.addHandler(CLIENT_WARNINGS)
        logger.propagate = False
    logger.setLevel(logging.WARNING)


def run(coro_factory: Callable[[], Coroutine[Any, Any, int | None]], name: str,
        error_prefix: str | None = None) -> int:
    """Run a tool's coroutine; print expected failures as one line and return the exit code.

    Usage errors (CliError with exit code 2) print as ``name: message``; failures of the
    operation as ``error_prefix: message`` (Kafka's tools have their own prefixes, such as
    "Error while executing topic command ").
    """
    _install_client_log(name)
    try:
        return int(run_loop(coro_factory()) or 0)
    except CliError as exc:
        prefix = name if exc.exit_code == 2 else (error_prefix or name)
        print(f"{prefix}: {exc}", file=sys.stderr)
        return exc.exit_code
    except (ClientError, BrokerError, AdminError) as exc:
        print(f"{error_prefix or name}: {describe_error(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`moldau topics --list | head`): stop quietly, and keep the
        # interpreter's final flush of stdout from failing again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
