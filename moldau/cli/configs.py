"""``moldau configs``: describe and change topic and broker configs (kafka-configs.sh).

    moldau configs -b localhost:9092 --entity-type topics --entity-name orders --describe [--all]
    moldau configs -b localhost:9092 --entity-type topics --entity-name orders --alter \\
        --add-config retention.ms=60000,cleanup.policy=[compact,delete] --delete-config segment.ms
    moldau configs -b localhost:9092 --entity-type brokers --entity-name 1 --describe --all
    moldau configs -b localhost:9092 --entity-type brokers --entity-default --describe

``--topic T``, ``--broker N`` and ``--broker-defaults`` are short forms of the entity options.
Output is Kafka's: ``Dynamic configs for topic orders are:`` then one line per entry,
``  name=value sensitive=false synonyms={SOURCE:name=value, ...}``. Without ``--all`` only
configs set on the entity itself are listed; ``--all`` adds every default and static value.
Changes use IncrementalAlterConfigs, so keys not named stay as they are.
"""

from __future__ import annotations

import argparse
import re
import sys

from moldau.client import AdminClient, AlterConfigOp, AlterOp, ConfigEntry, ConfigResource
from moldau.client.admin_types import ConfigSource, ResourceType

from .common import (
    CliError,
    add_connection_options,
    add_tool_parser,
    admin_client,
    load_properties,
    run,
)

ERROR_PREFIX = "Error while executing config command"
ENTITY_TYPES = ("topics", "brokers")
_UNSUPPORTED = ("users", "clients", "ips", "broker-loggers", "client-metrics", "groups")
_VALID_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_tool_parser(
        subparsers, "configs", help="describe or change topic and broker configs "
                                    "(kafka-configs.sh)",
        description="Describe or change the configs of a topic or a broker, with the flags and "
                    "output of Kafka's kafka-configs.sh. Give exactly one of --describe and "
                    "--alter.",
        epilog="examples:\n"
               "  moldau configs -b localhost:9092 --entity-type topics --entity-name orders "
               "--describe\n"
               "  moldau configs -b localhost:9092 --topic orders --alter \\\n"
               "      --add-config retention.ms=60000,cleanup.policy=[compact,delete]\n"
               "  moldau configs -b localhost:9092 --topic orders --alter --delete-config "
               "retention.ms\n"
               "  moldau configs -b localhost:9092 --entity-type brokers --entity-name 1 "
               "--describe --all",
    )
    add_connection_options(parser)
    actions = parser.add_argument_group("actions (exactly one)")
    actions.add_argument("--describe", action="store_true",
                         help="list configs of the entity (all entities of the type when no "
                              "name is given)")
    actions.add_argument("--alter", action="store_true", help="change configs of the entity")
    entity = parser.add_argument_group("entity")
    entity.add_argument("--entity-type", choices=ENTITY_TYPES + _UNSUPPORTED, metavar="TYPE",
                        help="topics or brokers")
    entity.add_argument("--entity-name", metavar="NAME", help="topic name or broker id")
    entity.add_argument("--entity-default", action="store_true",
                        help="the cluster-wide default entity (brokers only)")
    entity.add_argument("--topic", metavar="TOPIC",
                        help="same as --entity-type topics --entity-name TOPIC")
    entity.add_argument("--broker", metavar="ID",
                        help="same as --entity-type brokers --entity-name ID")
    entity.add_argument("--broker-defaults", action="store_true",
                        help="same as --entity-type brokers --entity-default")
    opts = parser.add_argument_group("options")
    opts.add_argument("--all", action="store_true",
                      help="with --describe: every config, including defaults and static "
                           "broker settings, not only those set on the entity")
    opts.add_argument("--add-config", metavar="K=V[,K=V...]",
                      help="configs to set; square brackets group values that contain commas: "
                           "'k1=v1,k2=[v1,v2],k3=v3'")
    opts.add_argument("--add-config-file", metavar="FILE",
                      help="properties file of configs to set")
    opts.add_argument("--delete-config", action="append", default=[], metavar="K[,K...]",
                      help="config keys to remove (revert to the default); repeatable")
    parser.set_defaults(func=main, parser=parser)


# --- pure helpers -------------------------------------------------------------------------


def entity_of(args: argparse.Namespace) -> tuple[str, str | None]:
    """(entity type, name or None for all; "" for the default entity); usage errors raise."""
    chosen: list[tuple[str, str | None]] = []
    if args.entity_type:
        if args.entity_name is not None and args.entity_default:
            raise CliError("--entity-name and --entity-default cannot be used together", 2)
        name = "" if args.entity_default else args.entity_name
        chosen.append((args.entity_type, name))
    elif args.entity_name is not None or args.entity_default:
        raise CliError("--entity-name and --entity-default need --entity-type", 2)
    if args.topic is not None:
        chosen.append(("topics", args.topic))
    if args.broker is not None:
        chosen.append(("brokers", args.broker))
    if args.broker_defaults:
        chosen.append(("brokers", ""))
    if len(chosen) != 1:
        raise CliError("give exactly one entity: --entity-type with --entity-name or "
                       "--entity-default, or one of --topic, --broker, --broker-defaults", 2)
    kind, name = chosen[0]
    if kind in _UNSUPPORTED:
        raise CliError(f"entity type {kind} is not supported yet; use topics or brokers", 2)
    if kind == "topics":
        if name == "":
            raise CliError("--entity-default must not be specified with topics", 2)
        if name is not None and not _VALID_TOPIC.fullmatch(name):
            raise CliError(f"Topic name '{name}' is illegal, it contains a character other "
                           "than ASCII alphanumerics, '.', '_' and '-'", 2)
    if kind == "brokers" and name:
        try:
            int(name)
        except ValueError:
            raise CliError("The entity name for brokers must be a valid integer broker id, "
                           f"but it is: {name}", 2) from None
    return kind, name


def _split_outside_brackets(text: str, sep: str) -> list[str]:
    parts = [""]
    depth = 0
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        if ch == sep and depth == 0:
            parts.append("")
        else:
            parts[-1] += ch
    return parts


def parse_add_config(text: str) -> dict[str, str]:
    """Kafka's --add-config syntax: ``k1=v1,k2=[v1,v2]``; commas and '=' inside [...] belong
    to the value, and the brackets themselves are dropped."""
    result: dict[str, str] = {}
    for pair in _split_outside_brackets(text, ","):
        if not pair.strip():
            continue
        parts = _split_outside_brackets(pair, "=")
        if len(parts) != 2:
            raise CliError('Invalid entity config: all configs to be added must be in the '
                           'format "key=val".', 2)
        key = parts[0].strip()
        if not re.fullmatch(r"[a-zA-Z0-9._-]+", key):
            raise CliError(f"Invalid character found for config key: {key}", 2)
        result[key] = parts[1].replace("[", "").replace("]", "").strip()
    return result


def parse_delete_config(items: list[str]) -> list[str]:
    """Repeated, comma-separated --delete-config values to a list of keys."""
    return [k.strip() for item in items for k in item.split(",") if k.strip()]


def entry_line(entry: ConfigEntry) -> str:
    """``  name=value sensitive=false synonyms={SOURCE:name=value, ...}`` as Kafka prints."""
    synonyms = ", ".join(f"{_source(src)}:{name}={_value(value)}"
                         for name, value, src in entry.synonyms)
    return (f"  {entry.name}={_value(entry.value)} "
            f"sensitive={str(entry.is_sensitive).lower()} synonyms={{{synonyms}}}")


def _value(value: str | None) -> str:
    return "null" if value is None else value


def _source(source: int) -> str:
    try:
        return ConfigSource(source).name
    except ValueError:
        return "UNKNOWN"


def dynamic_source(kind: str, name: str) -> ConfigSource:
    """The source of configs set on this very entity (what --describe lists without --all)."""
    if kind == "topics":
        return ConfigSource.DYNAMIC_TOPIC_CONFIG
    return (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG if name == ""
            else ConfigSource.DYNAMIC_BROKER_CONFIG)


def _resource(kind: str, name: str) -> ConfigResource:
    return ConfigResource(ResourceType.TOPIC if kind == "topics" else ResourceType.BROKER, name)


# --- actions ------------------------------------------------------------------------------


async def _describe(admin: AdminClient, args: argparse.Namespace, kind: str,
                    name: str | None) -> int:
    if name is not None:
        names = [name]
    elif kind == "topics":
        names = list(await admin.list_topics(include_internal=True))
    else:
        names = [str(b.node_id) for b in (await admin.describe_cluster()).brokers] + [""]
    for entity in names:
        resource = _resource(kind, entity)
        configs = (await admin.describe_configs([resource], include_synonyms=True))[resource]
        if entity == "":
            print(f"Default configs for {kind} in the cluster are:")
        else:
            print(f"{'All' if args.all else 'Dynamic'} configs for {kind[:-1]} {entity} are:")
        wanted = dynamic_source(kind, entity)
        for key in sorted(configs):
            entry = configs[key]
            if args.all or entry.source == wanted:
                print(entry_line(entry))
    return 0


async def _alter(admin: AdminClient, args: argparse.Namespace, kind: str, name: str) -> int:
    to_set: dict[str, str] = {}
    if args.add_config_file:
        to_set.update(load_properties(args.add_config_file, "--add-config-file"))
    if args.add_config:
        to_set.update(parse_add_config(args.add_config))
    to_delete = parse_delete_config(args.delete_config)
    if not to_set and not to_delete:
        raise CliError("At least one of --add-config, --add-config-file, or --delete-config "
                       "must be specified with --alter", 2)
    resource = _resource(kind, name)
    current = (await admin.describe_configs([resource]))[resource]
    wanted = dynamic_source(kind, name)
    missing = [k for k in to_delete
               if k not in current or current[k].source != wanted]
    if missing:
        raise CliError(f"Invalid config(s): {','.join(missing)}")
    ops = [AlterConfigOp(k, v, AlterOp.SET) for k, v in to_set.items()]
    ops += [AlterConfigOp(k, None, AlterOp.DELETE) for k in to_delete]
    await admin.incremental_alter_configs({resource: ops})
    if name:
        print(f"Completed updating config for {kind[:-1]} {name}.")
    else:
        print(f"Completed updating default config for {kind} in the cluster.")
    return 0


def main(args: argparse.Namespace) -> int:
    if args.describe == args.alter:
        args.parser.error("Command must include exactly one action: --describe, --alter")
    if args.describe and (args.add_config or args.add_config_file or args.delete_config):
        args.parser.error("--add-config, --add-config-file and --delete-config can only be "
                          "used with --alter")
    if args.all and not args.describe:
        args.parser.error("--all can only be used with --describe")

    async def go() -> int:
        kind, name = entity_of(args)
        if args.alter and name is None:
            raise CliError("--entity-name or --entity-default must be specified with each "
                           "--entity-type for --alter", 2)
        async with admin_client(args, "moldau-configs") as admin:
            if args.describe:
                return await _describe(admin, args, kind, name)
            assert name is not None
            return await _alter(admin, args, kind, name)

    code = run(go, "moldau configs", ERROR_PREFIX)
    sys.stdout.flush()
    return code
