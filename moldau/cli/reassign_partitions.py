"""``moldau reassign-partitions``: move partitions to other brokers (kafka-reassign-partitions.sh).

Same flags, JSON files and output texts as Kafka's tool::

    moldau reassign-partitions -b HOST:PORT --generate \\
        --topics-to-move-json-file topics.json --broker-list 2,3,4
    moldau reassign-partitions -b HOST:PORT --execute --reassignment-json-file plan.json
    moldau reassign-partitions -b HOST:PORT --verify --reassignment-json-file plan.json
    moldau reassign-partitions -b HOST:PORT --cancel --reassignment-json-file plan.json

``topics.json`` is ``{"topics":[{"topic":"orders"}],"version":1}``; a plan is
``{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[2,3,4]}]}`` (each
partition may carry ``"log_dirs"``, which must be ``"any"``: moving replicas between log dirs
is not supported). ``--generate`` prints the current assignment and a proposal (Kafka's
rack-unaware placement over ``--broker-list``) and changes nothing; ``--execute`` prints the
current assignment (save it to roll back) and starts the reassignment
(AlterPartitionReassignments); ``--verify`` says for each partition whether its reassignment
"is completed" or "is still in progress" (ListPartitionReassignments); ``--cancel`` cancels
those still in progress; ``--list`` lists every reassignment in progress. Left out:
``--throttle`` (Moldau has no replication throttles yet), ``--reassignment-json-file`` log
dirs other than ``any``, and racks in ``--generate``'s proposal (it is Kafka's rack-unaware
placement, as with ``--disable-rack-aware``).
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Mapping, Sequence
from typing import Any

from moldau.client import AdminClient, TopicPartition

from .common import CliError, add_connection_options, add_tool_parser, run_admin_action
from .log_dirs import parse_brokers

Assignment = dict[TopicPartition, list[int]]


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_tool_parser(
        subparsers, "reassign-partitions",
        help="move partitions to other brokers (kafka-reassign-partitions.sh)",
        description="Generate, execute, verify or cancel partition reassignments. Same flags, "
                    "JSON files and output as Kafka's kafka-reassign-partitions.sh.",
        epilog="examples:\n"
               "  moldau reassign-partitions -b localhost:9092 --generate "
               "--topics-to-move-json-file topics.json --broker-list 2,3,4\n"
               "  moldau reassign-partitions -b localhost:9092 --execute "
               "--reassignment-json-file plan.json\n"
               "  moldau reassign-partitions -b localhost:9092 --verify "
               "--reassignment-json-file plan.json",
    )
    add_connection_options(parser)
    actions = parser.add_mutually_exclusive_group(required=True)
    actions.add_argument("--generate", action="store_true",
                         help="propose an assignment of the topics of "
                              "--topics-to-move-json-file over --broker-list (changes nothing)")
    actions.add_argument("--execute", action="store_true",
                         help="start the reassignment of --reassignment-json-file")
    actions.add_argument("--verify", action="store_true",
                         help="whether the reassignment of --reassignment-json-file is done")
    actions.add_argument("--cancel", action="store_true",
                         help="cancel the reassignments of --reassignment-json-file in progress")
    actions.add_argument("--list", action="store_true",
                         help="list the reassignments in progress")
    parser.add_argument("--topics-to-move-json-file", metavar="FILE",
                        help='topics to move, e.g. {"topics":[{"topic":"orders"}],"version":1}')
    parser.add_argument("--broker-list", metavar="ID,ID,...",
                        help="the brokers to assign the topics to (with --generate)")
    parser.add_argument("--reassignment-json-file", metavar="FILE",
                        help='the plan: {"version":1,"partitions":[{"topic":"orders",'
                             '"partition":0,"replicas":[2,3,4]}]}')
    parser.add_argument("--disable-rack-aware", action="store_true",
                        help="with --generate: ignore racks (the proposal ignores them anyway)")
    parser.add_argument("--additional", action="store_true",
                        help="with --execute: start although other reassignments are in "
                             "progress")
    parser.set_defaults(func=main, parser=parser)


# --- files ------------------------------------------------------------------------------------

def _load_json(path: str, flag: str) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as exc:
        raise CliError(f"{flag} {path}: cannot read it: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise CliError(f"{flag} {path}: not valid JSON: {exc}") from exc


def parse_topics_to_move(doc: Any, path: str = "") -> list[str]:
    """The topic names of a ``--topics-to-move-json-file`` document."""
    where = f"--topics-to-move-json-file {path}".rstrip()
    topics = doc.get("topics") if isinstance(doc, dict) else None
    if not isinstance(topics, list) or not all(
            isinstance(t, dict) and isinstance(t.get("topic"), str) for t in topics):
        raise CliError(f'{where}: expected {{"topics":[{{"topic":"NAME"}}, ...],"version":1}}')
    names = list(dict.fromkeys(t["topic"] for t in topics))
    if not names:
        raise CliError(f"{where}: the list of topics to move is empty")
    return names


def parse_reassignment(doc: Any, path: str = "") -> Assignment:
    """The target replicas of a ``--reassignment-json-file`` document, with Kafka's checks."""
    where = f"--reassignment-json-file {path}".rstrip()
    parts = doc.get("partitions") if isinstance(doc, dict) else None
    if not isinstance(parts, list):
        raise CliError(f'{where}: expected {{"version":1,"partitions":[{{"topic":"NAME",'
                       f'"partition":0,"replicas":[1,2]}}, ...]}}')
    out: Assignment = {}
    for entry in parts:
        ok = (isinstance(entry, dict) and isinstance(entry.get("topic"), str)
              and isinstance(entry.get("partition"), int)
              and isinstance(entry.get("replicas"), list)
              and all(isinstance(r, int) for r in entry["replicas"]))
        if not ok:
            raise CliError(f"{where}: each partition needs \"topic\" (string), \"partition\" "
                           f"(integer) and \"replicas\" (integers); got {entry!r}")
        tp = TopicPartition(entry["topic"], entry["partition"])
        dirs = entry.get("log_dirs")
        if dirs is not None and any(d != "any" for d in dirs):
            raise CliError(f"{where}: log_dirs of {tp.topic}-{tp.partition} must be \"any\": "
                           f"moving replicas between log dirs is not supported")
        if tp in out:
            raise CliError(f"Partition reassignment contains duplicate topic partitions: "
                           f"{tp.topic}-{tp.partition}")
        replicas = entry["replicas"]
        if not replicas:
            raise CliError(f"Partition replica list for {tp.topic}-{tp.partition} cannot be "
                           f"empty")
        if len(set(replicas)) != len(replicas):
            raise CliError(f"Partition replica lists may not contain duplicate entries: "
                           f"{tp.topic}-{tp.partition} has {replicas}")
        out[tp] = list(replicas)
    if not out:
        raise CliError("Partition reassignment list cannot be empty")
    return out


def assignment_json(assignment: Mapping[TopicPartition, Sequence[int]]) -> str:
    """Kafka's JSON form of an assignment (one line, partitions sorted)."""
    return json.dumps({"version": 1, "partitions": [
        {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas),
         "log_dirs": ["any"] * len(replicas)}
        for tp, replicas in sorted(assignment.items())]}, separators=(",", ":"))


def _name(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


def _names(tps: Sequence[TopicPartition]) -> str:
    return ",".join(_name(tp) for tp in sorted(tps))


# --- generate -------------------------------------------------------------------------------

def assign_rack_unaware(brokers: Sequence[int], partitions: int, factor: int,
                        rng: random.Random) -> list[list[int]]:
    """Kafka's rack-unaware placement (``assignReplicasToBrokersRackUnaware``): leaders round
    robin from a random broker, followers shifted by a random amount that grows every lap."""
    n = len(brokers)
    if factor > n:
        raise CliError(f"Replication factor: {factor} larger than available brokers: {n}.")
    start, shift = rng.randrange(n), rng.randrange(n)
    out = []
    for p in range(partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        replicas = [brokers[first]]
        for j in range(factor - 1):
            replicas.append(brokers[(first + 1 + (shift + j) % (n - 1)) % n])
        out.append(replicas)
    return out


def propose(current: Assignment, brokers: Sequence[int],
            rng: random.Random | None = None) -> Assignment:
    """A new assignment of the topics in ``current`` over ``brokers``, each topic keeping its
    partition count and replication factor."""
    rng = rng or random.Random()
    by_topic: dict[str, list[TopicPartition]] = {}
    for tp in sorted(current):
        by_topic.setdefault(tp.topic, []).append(tp)
    out: Assignment = {}
    for tps in by_topic.values():
        factor = len(current[tps[0]])
        for tp, replicas in zip(tps, assign_rack_unaware(sorted(brokers), len(tps), factor,
                                                         rng), strict=True):
            out[tp] = replicas
    return out


# --- actions --------------------------------------------------------------------------------

async def _current(admin: AdminClient, topics: Sequence[str]) -> Assignment:
    described = await admin.describe_topics(topics)
    return {TopicPartition(name, p): list(info.replicas)
            for name, topic in described.items() for p, info in topic.partitions.items()}


async def _current_of(admin: AdminClient, plan: Assignment) -> Assignment:
    current = await _current(admin, sorted({tp.topic for tp in plan}))
    missing = [tp for tp in plan if tp not in current]
    if missing:
        raise CliError(f"Unable to find partition: {_names(missing)}")
    return {tp: current[tp] for tp in plan}


async def _generate(admin: AdminClient, args: argparse.Namespace) -> int:
    if not args.topics_to_move_json_file or not args.broker_list:
        raise CliError("--generate needs --topics-to-move-json-file and --broker-list", 2)
    topics = parse_topics_to_move(_load_json(args.topics_to_move_json_file,
                                             "--topics-to-move-json-file"),
                                  args.topics_to_move_json_file)
    brokers = sorted(parse_brokers(args.broker_list))
    known = set((await admin.describe_brokers()).keys())
    unknown = [b for b in brokers if b not in known]
    if unknown:
        raise CliError(f"Unknown broker id(s) {','.join(map(str, unknown))} in --broker-list; "
                       f"the cluster has brokers {','.join(map(str, sorted(known)))}")
    current = await _current(admin, topics)
    print("Current partition replica assignment")
    print(assignment_json(current))
    print()
    print("Proposed partition reassignment configuration")
    print(assignment_json(propose(current, brokers)))
    return 0


def _plan(args: argparse.Namespace) -> Assignment:
    if not args.reassignment_json_file:
        action = next(a for a in ("execute", "verify", "cancel") if getattr(args, a))
        raise CliError(f"--{action} needs --reassignment-json-file", 2)
    return parse_reassignment(_load_json(args.reassignment_json_file,
                                         "--reassignment-json-file"),
                              args.reassignment_json_file)


async def _execute(admin: AdminClient, args: argparse.Namespace) -> int:
    plan = _plan(args)
    known = set((await admin.describe_brokers()).keys())
    unknown = sorted({b for replicas in plan.values() for b in replicas} - known)
    if unknown:
        raise CliError(f"Unknown broker id {','.join(map(str, unknown))}")
    current = await _current_of(admin, plan)
    if not args.additional and await admin.list_partition_reassignments():
        raise CliError("Cannot execute because there is an existing partition assignment.  "
                       "Use --additional to override this and create a new partition "
                       "assignment in addition to the existing one.")
    print("Current partition replica assignment")
    print()
    print(assignment_json(current))
    print()
    print("Save this to use as the --reassignment-json-file option during rollback")
    results = await admin.alter_partition_reassignments(plan, raise_errors=False)
    failed = {tp: e for tp, e in results.items() if e is not None}
    if failed:
        lines = ["Error reassigning partition(s):"] + [
            f"{_name(tp)}: {error}" for tp, error in sorted(failed.items())]
        raise CliError("\n".join(lines))
    s = "" if len(plan) == 1 else "s"
    print(f"Successfully started partition reassignment{s} for {_names(list(plan))}")
    return 0


async def _verify(admin: AdminClient, args: argparse.Namespace) -> int:
    plan = _plan(args)
    ongoing = await admin.list_partition_reassignments(list(plan))
    current = await _current_of(admin, plan)
    print("Status of partition reassignment:")
    for tp in sorted(plan):
        if tp in ongoing:
            print(f"Reassignment of partition {_name(tp)} is still in progress.")
        elif current[tp] == plan[tp]:
            print(f"Reassignment of partition {_name(tp)} is completed.")
        else:
            print(f"There is no active reassignment of partition {_name(tp)}, but replica set "
                  f"is {','.join(map(str, current[tp]))} rather than "
                  f"{','.join(map(str, plan[tp]))}.")
    return 0


async def _cancel(admin: AdminClient, args: argparse.Namespace) -> int:
    plan = _plan(args)
    ongoing = await admin.list_partition_reassignments(list(plan))
    active = sorted(tp for tp in plan if tp in ongoing)
    if not active:
        print("None of the specified partition reassignments are active.")
        return 0
    results = await admin.alter_partition_reassignments(
        dict.fromkeys(active), raise_errors=False)
    failed = {tp: e for tp, e in results.items() if e is not None}
    if failed:
        raise CliError("Error cancelling partition reassignment(s):\n" + "\n".join(
            f"{_name(tp)}: {error}" for tp, error in sorted(failed.items())))
    s = "" if len(active) == 1 else "s"
    print(f"Successfully cancelled partition reassignment{s} for: {_names(active)}")
    return 0


def reassignments_text(ongoing: Mapping[TopicPartition, Any]) -> str:
    """kafka-reassign-partitions.sh's ``--list`` text."""
    if not ongoing:
        return "No partition reassignments found."
    lines = ["Current partition reassignments:"]
    for tp in sorted(ongoing):
        move = ongoing[tp]
        line = f"{_name(tp)}: replicas: {','.join(map(str, move.replicas))}."
        if move.adding_replicas:
            line += f" adding: {','.join(map(str, move.adding_replicas))}."
        if move.removing_replicas:
            line += f" removing: {','.join(map(str, move.removing_replicas))}."
        lines.append(line)
    return "\n".join(lines)


async def _list(admin: AdminClient, args: argparse.Namespace) -> int:
    print(reassignments_text(await admin.list_partition_reassignments()))
    return 0


def main(args: argparse.Namespace) -> int:
    return run_admin_action(
        args, {"generate": _generate, "execute": _execute, "verify": _verify,
               "cancel": _cancel, "list": _list},
        client_id="reassign-partitions-tool", name="moldau reassign-partitions",
        error_prefix="moldau reassign-partitions")
