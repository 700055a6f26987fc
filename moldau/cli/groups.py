"""``moldau groups``: list, describe, reset and delete consumer groups
(kafka-consumer-groups.sh).

    moldau groups -b localhost:9092 --list [--state [stable,empty]]
    moldau groups -b localhost:9092 --describe --group billing [--members [--verbose] | --state]
    moldau groups -b localhost:9092 --reset-offsets --group billing --topic orders \\
        --to-earliest --execute
    moldau groups -b localhost:9092 --delete --group billing
    moldau groups -b localhost:9092 --delete-offsets --group billing --topic orders

``--describe`` prints one row per partition the group reads or has committed: CURRENT-OFFSET
(committed), LOG-END-OFFSET (high watermark) and LAG (their difference), and which member
reads it. Offsets can only be reset while the group has no active members (stop its
consumers first); without ``--execute`` a reset only shows what it would do.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from moldau.client import AdminClient, BrokerError, GroupDescription, OffsetSpec, TopicPartition

from .common import (
    CliError,
    add_connection_options,
    add_tool_parser,
    broker_message,
    run_admin_action,
)
from .groups_format import (
    clamp,
    delete_offsets_table,
    list_table,
    members_table,
    offsets_table,
    order_lag_rows,
    parse_datetime,
    parse_duration,
    parse_reset_csv,
    parse_states,
    parse_topic_arg,
    parse_types,
    reset_csv,
    reset_table,
    state_table,
)

ACTIONS = ("list", "describe", "delete", "reset_offsets", "delete_offsets")
SCENARIOS = ("to_datetime", "by_duration", "to_earliest", "to_latest", "to_current",
             "shift_by", "from_file", "to_offset")
_INACTIVE = ("Empty", "Dead")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_tool_parser(
        subparsers, "groups", help="list, describe, reset or delete consumer groups "
                                   "(kafka-consumer-groups.sh)",
        description="List all consumer groups, describe a consumer group (members, committed "
                    "offsets and lag), reset its offsets, or delete it. Same flags and output "
                    "as Kafka's kafka-consumer-groups.sh; give exactly one action. Note: "
                    "--timeout is in seconds here (Kafka's tool takes milliseconds).",
        epilog="examples:\n"
               "  moldau groups -b localhost:9092 --list --state\n"
               "  moldau groups -b localhost:9092 --describe --group billing\n"
               "  moldau groups -b localhost:9092 --describe --group billing --members "
               "--verbose\n"
               "  moldau groups -b localhost:9092 --reset-offsets --group billing \\\n"
               "      --topic orders:0,1 --to-datetime 2024-05-01T00:00:00.000 --execute\n"
               "  moldau groups -b localhost:9092 --reset-offsets --group billing --all-topics "
               "--shift-by -10 --dry-run\n"
               "  moldau groups -b localhost:9092 --delete --group billing",
    )
    add_connection_options(parser)
    actions = parser.add_argument_group("actions (exactly one)")
    actions.add_argument("--list", action="store_true", help="list all consumer groups")
    actions.add_argument("--describe", action="store_true",
                         help="describe a group: offsets and lag (default), --members or "
                              "--state")
    actions.add_argument("--delete", action="store_true",
                         help="delete groups (only groups without active members)")
    actions.add_argument("--reset-offsets", action="store_true",
                         help="change the committed offsets of a group without active members")
    actions.add_argument("--delete-offsets", action="store_true",
                         help="delete the committed offsets of a group for some topics")
    scope = parser.add_argument_group("scope")
    scope.add_argument("--group", action="append", default=[], metavar="GROUP",
                       help="the group to act on (repeatable for --describe, --delete and "
                            "--reset-offsets)")
    scope.add_argument("--all-groups", action="store_true", help="act on every group")
    scope.add_argument("--topic", action="append", default=[], metavar="TOPIC[:P,P...]",
                       help="topic (optionally with partitions: orders:0,1,2) for "
                            "--reset-offsets and --delete-offsets; repeatable")
    scope.add_argument("--all-topics", action="store_true",
                       help="with --reset-offsets: every partition the group has committed")
    desc = parser.add_argument_group("--describe and --list options")
    desc.add_argument("--members", action="store_true", help="list the group's members")
    desc.add_argument("--offsets", action="store_true",
                      help="list partitions with committed offset and lag (the default)")
    desc.add_argument("--state", nargs="?", const="", metavar="STATES",
                      help="with --describe: the group's state and coordinator; with --list: "
                           "show states, or only groups in these (e.g. stable,empty)")
    desc.add_argument("--type", nargs="?", const="", metavar="TYPES",
                      help="with --list: show group types, or only these (classic,consumer)")
    desc.add_argument("--verbose", action="store_true",
                      help="with --members: also each member's partitions")
    reset = parser.add_argument_group("--reset-offsets: where to (exactly one)")
    reset.add_argument("--to-earliest", action="store_true", help="the earliest offset")
    reset.add_argument("--to-latest", action="store_true", help="the latest offset (end)")
    reset.add_argument("--to-current", action="store_true",
                       help="the committed offset (the end where none is committed)")
    reset.add_argument("--to-offset", type=int, metavar="N", help="offset N (kept in range)")
    reset.add_argument("--shift-by", type=int, metavar="N",
                       help="move the committed offset by N (negative: back)")
    reset.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss",
                       help="the first offset at or after this time (UTC unless a zone such "
                            "as Z or +01:00 follows)")
    reset.add_argument("--by-duration", metavar="PnDTnHnMnS",
                       help="the first offset at or after now minus this duration, e.g. PT1H")
    reset.add_argument("--from-file", metavar="CSV",
                       help="offsets from a CSV plan (as --export writes it)")
    run_opts = parser.add_argument_group("--reset-offsets: run mode")
    run_opts.add_argument("--dry-run", action="store_true",
                          help="only show the new offsets (the default)")
    run_opts.add_argument("--execute", action="store_true", help="commit the new offsets")
    run_opts.add_argument("--export", action="store_true",
                          help="print the plan as CSV (for --from-file)")
    parser.set_defaults(func=main, parser=parser)


def check_args(args: argparse.Namespace) -> str | None:
    """The first usage problem, in Kafka's words, or None."""
    chosen = [a for a in ACTIONS if getattr(args, a)]
    if len(chosen) != 1:
        return ("Command must include exactly one action: --list, --describe, --delete, "
                "--reset-offsets, --delete-offsets")
    action = chosen[0]
    groups = bool(args.group) or args.all_groups
    if args.group and args.all_groups:
        return "Option --group can't be used with option --all-groups"
    if action in ("describe", "delete", "reset_offsets") and not groups:
        return (f"Option --{action.replace('_', '-')} takes one of these options: --all-groups, "
                "--group")
    if action == "describe" and sum([args.members, args.offsets, args.state is not None]) > 1:
        return "Option --describe takes at most one of these options: --members, --offsets, " \
               "--state"
    if action == "describe" and args.state:
        return "Option --describe does not take a value for --state"
    if action == "delete" and args.topic:
        return "The consumer does not support topic-specific offset deletion from a consumer " \
               "group."
    if action == "delete_offsets" and (len(args.group) != 1 or not args.topic):
        return "Option --delete-offsets takes the following options: --group, --topic"
    if action == "reset_offsets":
        if args.dry_run and args.execute:
            return "Option --reset-offsets only accepts one of --execute and --dry-run"
        scenarios = [s for s in SCENARIOS if getattr(args, s) not in (None, False)]
        if len(scenarios) != 1:
            return ("Option --reset-offsets requires exactly one of: --to-datetime, "
                    "--by-duration, --to-earliest, --to-latest, --to-current, --shift-by, "
                    "--from-file, --to-offset")
        if not args.from_file and not args.topic and not args.all_topics:
            return "One of the reset scopes should be defined: --all-topics, --topic."
        if args.topic and args.all_topics:
            return "Option --topic can't be used with option --all-topics"
    elif args.all_topics or any(getattr(args, s) not in (None, False) for s in SCENARIOS):
        return "The reset options (--to-*, --shift-by, --by-duration, --from-file, " \
               "--all-topics) need --reset-offsets"
    if args.topic and action not in ("reset_offsets", "delete_offsets"):
        return f"Option --topic can't be used with option --{action.replace('_', '-')}"
    if action != "list" and args.type is not None:
        return "Option --type can only be used with --list"
    return None


# --- actions ------------------------------------------------------------------------------


async def _group_ids(admin: AdminClient, args: argparse.Namespace) -> list[str]:
    if args.all_groups:
        return [g.group_id for g in await admin.list_groups()]
    return list(dict.fromkeys(args.group))


async def _list(admin: AdminClient, args: argparse.Namespace) -> int:
    states = parse_states(args.state) if args.state else None
    types = parse_types(args.type) if args.type else None
    listings = await admin.list_groups(states=states, types=types)
    if args.state is None and args.type is None:
        if listings:
            print("\n".join(g.group_id for g in listings))
        return 0
    sys.stdout.write(list_table(listings, args.type is not None, args.state is not None))
    return 0


def _should_print(group: str, description: GroupDescription | BrokerError, rows: int) -> bool:
    """Kafka's checks before a describe table: unknown groups are errors, empty groups are
    noted on stderr, rebalancing ones get a warning."""
    if isinstance(description, BrokerError):
        print(f"\nError: {broker_message(description)} (group '{group}')", file=sys.stderr)
        return False
    state = description.state
    if state == "Dead":
        print(f"\nError: Consumer group '{group}' does not exist.", file=sys.stderr)
        return False
    if state == "Empty":
        print(f"\nConsumer group '{group}' has no active members.", file=sys.stderr)
    elif state in ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"):
        print(f"\nWarning: Consumer group '{group}' is rebalancing.", file=sys.stderr)
    return rows > 0


async def _describe(admin: AdminClient, args: argparse.Namespace) -> int:
    groups = await _group_ids(admin, args)
    described = await admin.describe_groups(groups, raise_errors=False)
    missing = False
    for group in sorted(described):
        description = described[group]
        missing |= isinstance(description, BrokerError) or description.state == "Dead"
        if args.state is not None:
            if _should_print(group, description, 1):
                assert isinstance(description, GroupDescription)
                c = description.coordinator
                where = f"{c.host}:{c.port}  ({c.node_id})" if c else "-"
                sys.stdout.write(state_table(group, where, description.protocol or "",
                                             description.state, len(description.members)))
        elif args.members:
            members = [] if isinstance(description, BrokerError) else description.members
            if _should_print(group, description, 1):
                sys.stdout.write(members_table(group, members, args.verbose))
        else:
            rows = [] if isinstance(description, BrokerError) or description.state == "Dead" \
                else await admin.describe_group_lag(group)
            if _should_print(group, description, len(rows)):
                sys.stdout.write(offsets_table(group, order_lag_rows(rows)))
    return 1 if missing else 0


async def _delete(admin: AdminClient, args: argparse.Namespace) -> int:
    groups = await _group_ids(admin, args)
    results = await admin.delete_groups(groups, raise_errors=False)
    ok = [g for g in groups if results.get(g) is None]
    failed = {g: e for g, e in results.items() if e is not None}
    if not failed:
        print(f"Deletion of requested consumer groups ('{', '.join(ok)}') was successful.")
        return 0
    print("\nError: Deletion of some consumer groups failed:", file=sys.stderr)
    for group, error in failed.items():
        print(f"* Group '{group}' could not be deleted due to: {broker_message(error)}",
              file=sys.stderr)
    if ok:
        print(f"\nThese consumer groups were deleted successfully: '{', '.join(ok)}'")
    return 1


async def _delete_offsets(admin: AdminClient, args: argparse.Namespace) -> int:
    group = args.group[0]
    partitions, errors = await _partitions(admin, args.topic)
    results: dict[TopicPartition, str | None] = dict(errors)
    if partitions:
        answer = await admin.delete_group_offsets(group, partitions, raise_errors=False)
        results.update({tp: None if e is None else broker_message(e)
                        for tp, e in answer.items()})
    if all(e is None for e in results.values()):
        print(f"Request succeed for deleting offsets with topic {', '.join(args.topic)} "
              f"group {group}")
        code = 0
    else:
        print("\nError: Encounter some partition level error, see the follow-up details:",
              file=sys.stderr)
        code = 1
    sys.stdout.write(delete_offsets_table(results))
    return code


async def _partitions(admin: AdminClient, topic_args: list[str]) -> tuple[
        list[TopicPartition], dict[TopicPartition, str]]:
    """--topic values to partitions; unknown topics as errors keyed by (topic, -1)."""
    partitions: list[TopicPartition] = []
    whole: list[str] = []
    for arg in topic_args:
        topic, numbers = parse_topic_arg(arg)
        if numbers is None:
            whole.append(topic)
        else:
            partitions.extend(TopicPartition(topic, p) for p in numbers)
    errors: dict[TopicPartition, str] = {}
    if whole:
        known = await admin.list_topics(include_internal=True)
        for topic in whole:
            if topic in known:
                partitions.extend(TopicPartition(topic, p) for p in sorted(known[topic].partitions))
            else:
                errors[TopicPartition(topic, -1)] = (
                    "This server does not host this topic-partition.")
    return list(dict.fromkeys(partitions)), errors


async def _offsets(admin: AdminClient, tps: list[TopicPartition], spec: int
                   ) -> dict[TopicPartition, int]:
    if not tps:
        return {}
    answers = await admin.list_offsets({tp: spec for tp in tps})
    return {tp: r.offset for tp, r in answers.items()}  # type: ignore[union-attr]


async def _plan(admin: AdminClient, args: argparse.Namespace, group: str,
                file_plan: dict[str, dict[TopicPartition, int]] | None
                ) -> dict[TopicPartition, int]:
    """New offsets for one group (Kafka's prepareOffsetsToReset)."""
    if file_plan is not None:
        if group not in file_plan:
            print(f"\nError: No reset plan for group {group} found", file=sys.stderr)
            return {}
        requested = file_plan[group]
        tps = list(requested)
    else:
        if args.all_topics:
            tps = sorted(await admin.list_group_offsets(group))
        else:
            tps, errors = await _partitions(admin, args.topic)
            if errors:
                raise CliError("; ".join(f"topic '{tp.topic}': {e}" for tp, e in errors.items()))
        requested = {}
    if args.to_earliest:
        return await _offsets(admin, tps, OffsetSpec.EARLIEST)
    if args.to_latest:
        return await _offsets(admin, tps, OffsetSpec.LATEST)
    if args.to_datetime or args.by_duration:
        stamp = parse_datetime(args.to_datetime) if args.to_datetime else int(
            (time.time() - parse_duration(args.by_duration).total_seconds()) * 1000)
        found = await _offsets(admin, tps, max(0, stamp))
        ends = await _offsets(admin, [tp for tp, o in found.items() if o < 0], OffsetSpec.LATEST)
        for tp in ends:
            print(f"\nWarn: Partition {tp.partition} from topic {tp.topic} is empty. Falling "
                  "back to latest known offset.", file=sys.stderr)
        return {**found, **ends}
    committed = await admin.list_group_offsets(group, tps) if tps else {}
    if args.to_current:
        current = {tp: v.offset for tp, v in committed.items() if v is not None}
        ends = await _offsets(admin, [tp for tp in tps if tp not in current], OffsetSpec.LATEST)
        return {**current, **ends}
    if args.shift_by is not None:
        for tp in tps:
            if committed.get(tp) is None:
                raise CliError(f"Cannot shift offset for partition {tp} since there is no "
                               "current committed offset", 2)
        requested = {tp: committed[tp].offset + args.shift_by for tp in tps}  # type: ignore
    elif args.to_offset is not None:
        requested = {tp: args.to_offset for tp in tps}
    starts = await _offsets(admin, list(requested), OffsetSpec.EARLIEST)
    ends = await _offsets(admin, list(requested), OffsetSpec.LATEST)
    result, warnings = clamp(requested, starts, ends)
    for warning in warnings:
        print(f"WARN: {warning}", file=sys.stderr)
    return result


async def _reset_offsets(admin: AdminClient, args: argparse.Namespace) -> int:
    if not args.dry_run and not args.execute:
        print("WARN: No action will be performed as the --execute option is missing. Add "
              "--dry-run to keep this behaviour explicitly, or --execute to reset.",
              file=sys.stderr)
    file_plan = None
    if args.from_file:
        try:
            with open(args.from_file, encoding="utf-8") as f:
                file_plan = parse_reset_csv(f.read(), args.group)
        except OSError as exc:
            raise CliError(f"cannot read --from-file {args.from_file}: {exc.strerror}",
                           2) from None
    groups = await _group_ids(admin, args)
    described = await admin.describe_groups(groups)
    plan: dict[str, dict[TopicPartition, int]] = {}
    code = 0
    for group in groups:
        description: Any = described[group]
        if description.state not in _INACTIVE:
            print(f"\nError: Assignments can only be reset if the group '{group}' is inactive, "
                  f"but the current state is {description.state}.", file=sys.stderr)
            plan[group] = {}
            code = 1
            continue
        offsets = await _plan(admin, args, group, file_plan)
        if args.execute and offsets:
            await admin.alter_group_offsets(group, offsets)
        plan[group] = offsets
    if args.export:
        sys.stdout.write(reset_csv(plan, len(args.group) == 1))
    else:
        sys.stdout.write(reset_table(plan))
    return code


def main(args: argparse.Namespace) -> int:
    problem = check_args(args)
    if problem:
        args.parser.error(problem)
    return run_admin_action(
        args, {"list": _list, "describe": _describe, "delete": _delete,
               "reset_offsets": _reset_offsets, "delete_offsets": _delete_offsets},
        client_id="moldau-groups", name="moldau groups",
        error_prefix="Error: Executing consumer group command failed due to")
