"""Pure parts of ``moldau groups``: argument parsing and Kafka's table layouts.

The layouts are kafka-consumer-groups.sh's: left-aligned columns at least 15 wide (wider for
long values), ``-`` for a missing value, and each table preceded by an empty line.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable, Mapping

from moldau.client import GroupListing, MemberDescription, PartitionLag, TopicPartition

from .common import CliError

MISSING = "-"

# Kafka's group states, as ListGroups filters and DescribeGroups answers spell them.
STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty", "Assigning",
          "Reconciling")
TYPES = ("classic", "consumer")


def parse_states(text: str) -> list[str]:
    """``stable,empty`` -> ["Stable", "Empty"] (case-insensitive; Kafka's error otherwise)."""
    by_lower = {s.lower(): s for s in STATES}
    states = []
    for part in text.split(","):
        state = by_lower.get(part.strip().lower())
        if state is None:
            raise CliError(f"Invalid state list '{text}'. Valid states are: "
                           + ", ".join(STATES), 2)
        states.append(state)
    return states


def parse_types(text: str) -> list[str]:
    types = [t.strip().lower() for t in text.split(",")]
    if any(t not in TYPES for t in types):
        raise CliError(f"Invalid types list '{text}'. Valid types are: " + ", ".join(TYPES), 2)
    return types


def parse_topic_arg(arg: str) -> tuple[str, list[int] | None]:
    """``topic`` -> (topic, None); ``topic:0,1,2`` -> (topic, [0, 1, 2])."""
    if ":" not in arg:
        return arg, None
    parts = arg.split(":")
    if len(parts) != 2 or not parts[0]:
        raise CliError(f"Invalid topic arg '{arg}', expected topic name and partitions", 2)
    partitions = []
    for p in parts[1].split(","):
        try:
            partitions.append(int(p))
        except ValueError:
            raise CliError(f"Invalid partition '{p}' specified in topic arg '{arg}'", 2) from None
    return parts[0], partitions


def parse_datetime(text: str) -> int:
    """Kafka's --to-datetime: ``YYYY-MM-DDTHH:mm:SS.sss`` with an optional zone (``Z``,
    ``+01:00``); without one the time is UTC, as in Kafka. Milliseconds since the epoch."""
    if "T" not in text:
        raise CliError(f"Error parsing timestamp '{text}'. It does not contain a 'T' according "
                       "to ISO8601 format (YYYY-MM-DDTHH:mm:SS.sss)", 2)
    try:
        value = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise CliError(f"Error parsing timestamp '{text}': expected YYYY-MM-DDTHH:mm:SS.sss, "
                       "optionally followed by Z or +HH:MM", 2) from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.UTC)
    return int(value.timestamp() * 1000)


_DURATION = re.compile(
    r"(?P<sign>[-+])?P(?:(?P<days>\d+)D)?"
    r"(?:T(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?",
    re.IGNORECASE,
)


def parse_duration(text: str) -> datetime.timedelta:
    """ISO-8601 ``PnDTnHnMnS`` (Java's Duration.parse), e.g. PT10M, P1DT2H30M."""
    match = _DURATION.fullmatch(text.strip())
    if not match or text.strip().upper().endswith(("P", "T")):
        raise CliError(f"Invalid --by-duration '{text}': expected ISO-8601 PnDTnHnMnS, e.g. "
                       "PT10M or P1DT2H", 2)
    delta = datetime.timedelta(
        days=int(match["days"] or 0), hours=int(match["hours"] or 0),
        minutes=int(match["minutes"] or 0), seconds=float(match["seconds"] or 0))
    return -delta if match["sign"] == "-" else delta


def parse_reset_csv(text: str, groups: list[str]) -> dict[str, dict[TopicPartition, int]]:
    """A --from-file plan: ``topic,partition,offset`` lines (one group) or
    ``group,topic,partition,offset`` lines, as --export writes them."""
    plan: dict[str, dict[TopicPartition, int]] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split(",")]
        try:
            if len(cells) == 3 and len(groups) == 1:
                group, topic, partition, offset = groups[0], cells[0], int(cells[1]), int(cells[2])
            elif len(cells) == 4:
                group, topic, partition, offset = cells[0], cells[1], int(cells[2]), int(cells[3])
            else:
                raise ValueError
        except ValueError:
            raise CliError(f"--from-file line {number} {line!r}: expected topic,partition,offset "
                           "or group,topic,partition,offset", 2) from None
        plan.setdefault(group, {})[TopicPartition(topic, partition)] = offset
    return plan


def clamp(requested: Mapping[TopicPartition, int], starts: Mapping[TopicPartition, int],
          ends: Mapping[TopicPartition, int]) -> tuple[dict[TopicPartition, int], list[str]]:
    """Kafka's checkOffsetsRange: keep offsets inside [log start, log end], with warnings."""
    result: dict[TopicPartition, int] = {}
    warnings: list[str] = []
    for tp, offset in requested.items():
        end, start = ends.get(tp), starts.get(tp)
        if end is not None and offset > end:
            warnings.append(f"New offset ({offset}) is higher than latest offset for topic "
                            f"partition {tp}. Value will be set to {end}")
            offset = end
        elif start is not None and offset < start:
            warnings.append(f"New offset ({offset}) is lower than earliest offset for topic "
                            f"partition {tp}. Value will be set to {start}")
            offset = start
        result[tp] = offset
    return result, warnings


# --- tables -------------------------------------------------------------------------------


def _row(widths: list[int], values: Iterable[object]) -> str:
    cells = [str(v) for v in values]
    return " ".join(c.ljust(w) for c, w in zip(cells[:-1], widths, strict=False)) + (
        " " + cells[-1] if len(cells) > len(widths) else "")


def list_table(listings: list[GroupListing], with_type: bool, with_state: bool) -> str:
    """--list with --state/--type: GROUP [TYPE] [STATE] columns."""
    width = max([15] + [len(g.group_id) for g in listings]) + 10
    header = ["GROUP".ljust(width)]
    if with_type:
        header.append("TYPE".ljust(20))
    if with_state:
        header.append("STATE".ljust(20))
    lines = [" ".join(header)]
    for g in listings:
        cells = [g.group_id.ljust(width)]
        if with_type:
            cells.append((g.type or "Unknown").ljust(20))
        if with_state:
            cells.append((g.state or "Unknown").ljust(20))
        lines.append(" ".join(cells))
    return "\n".join(lines) + "\n"


def order_lag_rows(rows: list[PartitionLag]) -> list[PartitionLag]:
    """Kafka's order: members with the most partitions first, each member's partitions in
    order, then partitions nobody reads now."""
    counts: dict[str, int] = {}
    for r in rows:
        if r.member_id:
            counts[r.member_id] = counts.get(r.member_id, 0) + 1
    return sorted(rows, key=lambda r: (
        0 if r.member_id else 1, -counts.get(r.member_id, 0), r.member_id, r.topic,
        r.partition))


def offsets_table(group: str, rows: list[PartitionLag]) -> str:
    """--describe (--offsets): GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG
    CONSUMER-ID HOST CLIENT-ID."""
    def text(value: object) -> str:
        return MISSING if value is None or value == "" else str(value)

    data = [(group, r.topic, r.partition, text(r.committed),
             text(r.log_end_offset if r.log_end_offset >= 0 else None), text(r.lag),
             text(r.member_id), text(r.host), text(r.client_id)) for r in rows]
    widths = [max([15, len(group)]), max([15] + [len(d[1]) for d in data]), 10, 15, 15, 15,
              max([15] + [len(d[6]) for d in data]), max([15] + [len(d[7]) for d in data])]
    header = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
              "CONSUMER-ID", "HOST", "CLIENT-ID")
    return "\n" + "\n".join(_row(widths, line) for line in [header, *data]) + "\n"


def _assignment_text(assignment: Iterable[TopicPartition]) -> str:
    by_topic: dict[str, list[int]] = {}
    for tp in assignment:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    if not by_topic:
        return MISSING
    return ", ".join(f"{t}({','.join(str(p) for p in sorted(ps))})"
                     for t, ps in sorted(by_topic.items()))


def members_table(group: str, members: Iterable[MemberDescription], verbose: bool) -> str:
    """--describe --members: GROUP CONSUMER-ID [GROUP-INSTANCE-ID] HOST CLIENT-ID
    #PARTITIONS [ASSIGNMENT with --verbose]."""
    members = sorted(members, key=lambda m: (-len(m.assignment), m.member_id))
    static = any(m.group_instance_id for m in members)
    header = ["GROUP", "CONSUMER-ID"] + (["GROUP-INSTANCE-ID"] if static else []) + [
        "HOST", "CLIENT-ID", "#PARTITIONS"]
    data = []
    for m in members:
        row = [group, m.member_id] + ([m.group_instance_id or ""] if static else []) + [
            m.host, m.client_id, str(len(m.assignment))]
        data.append(row)
    widths = []
    for index, name in enumerate(header[:-1]):
        least = 17 if name == "GROUP-INSTANCE-ID" else 15
        widths.append(max([least] + [len(r[index]) for r in data]))
    widths.append(15)

    def line(cells: list[str], extra: str) -> str:
        return " ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " " + extra

    out = ["", line(header, "ASSIGNMENT" if verbose else "").rstrip()]
    for m, row in zip(members, data, strict=True):
        out.append(line(row, _assignment_text(m.assignment) if verbose else "").rstrip())
    return "\n".join(out) + "\n"


def state_table(group: str, coordinator: str, strategy: str, state: str, members: int) -> str:
    """--describe --state: GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE #MEMBERS."""
    width = max(25, len(coordinator))
    fmt = f"{{:<{width}}} {{:<25}} {{:<20}} {{:<15}} {{}}"
    return ("\n" + fmt.format("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE",
                              "#MEMBERS")
            + "\n" + fmt.format(group, coordinator, strategy, state, members) + "\n")


def reset_table(plan: Mapping[str, Mapping[TopicPartition, int]]) -> str:
    """--reset-offsets result: GROUP TOPIC PARTITION NEW-OFFSET."""
    lines = []
    if any(plan.values()):
        lines.append(f"{'GROUP':<30} {'TOPIC':<30} {'PARTITION':<10} {'NEW-OFFSET':<15}")
    for group, offsets in plan.items():
        for tp in sorted(offsets):
            lines.append(f"{group:<30} {tp.topic:<30} {tp.partition:<10} {offsets[tp]:<15}")
    return "\n" + "\n".join(lines) + "\n" if lines else "\n"


def reset_csv(plan: Mapping[str, Mapping[TopicPartition, int]], single_group: bool) -> str:
    """--export: ``topic,partition,offset`` (one group) or with the group first."""
    lines = []
    for group, offsets in plan.items():
        for tp in sorted(offsets):
            prefix = "" if single_group else f"{group},"
            lines.append(f"{prefix}{tp.topic},{tp.partition},{offsets[tp]}")
    return "\n".join(lines) + "\n"


def delete_offsets_table(results: Mapping[TopicPartition, str | None]) -> str:
    """--delete-offsets result: TOPIC PARTITION STATUS."""
    lines = [f"{'TOPIC':<30} {'PARTITION':<15} {'STATUS':<15}"]
    for tp in sorted(results):
        error = results[tp]
        partition = str(tp.partition) if tp.partition >= 0 else "Not Provided"
        status = "Successful" if error is None else f"Error: {error}"
        lines.append(f"{tp.topic:<30} {partition:<15} {status:<15}")
    return "\n" + "\n".join(lines) + "\n"
