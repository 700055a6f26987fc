"""The fault suite's checker: a pure function from a run's history to its anomalies.

The history (:mod:`.history`) is a list of events, each a dict with a ``type``:

``invoke``   a producer is about to send ``value`` to ``partition`` (every attempt, first);
``ok``       the broker acknowledged ``value`` at ``offset`` of ``partition``;
``fail``     the producer gave ``value`` up (``error``): it may or may not have been written;
``poll``     consumer ``consumer`` (instance ``session``) got ``value`` at ``offset``;
``final``    the final full read, after every fault healed, found ``value`` at ``offset``;
``final_end`` the final read of ``partition`` stopped at ``high`` (``complete`` false when
             it could not reach the partition's end);
``fault``    round ``round`` of the nemesis, fault kinds ``kinds``, ``phase`` start/stop.

Every event but ``final*`` carries its wall-clock time ``t``. Values are unique per attempt
(producer id + sequence), which is what makes every check below decidable.

What is reported, per partition and per fault kind (the Jepsen Kafka checks, as issue 13's
fault suite states them):

- **lost**: acknowledged, but not in the final read;
- **duplicated**: one value read at two or more offsets (by any reads together);
- **divergent**: one offset read, or acknowledged, with two different values;
- **non_monotonic**: a consumer instance's successive records of a partition whose offsets
  do not increase;
- **disappeared**: a value a consumer saw (consumers only read below the high watermark)
  that the final read no longer holds;
- **unexpected**: a value read that no producer ever attempted.

An anomaly is charged to the first fault round that had not yet stopped when its record was
produced (the earliest fault the record lived through: a record written while round r was
on, or in the quiet time before it, could be hurt by round r), and to ``no-fault`` when it
was written after the last round stopped. A round of several kinds charges each of them.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FAILING", "KINDS", "NO_FAULT", "Anomaly", "Report", "check"]

#: Every anomaly kind, in report order.
KINDS = ("lost", "duplicated", "divergent", "non_monotonic", "disappeared", "unexpected")
#: The kinds that make a run fail (all of them: each is a broken promise of Kafka's).
FAILING = KINDS
NO_FAULT = "no-fault"
#: How many examples of each anomaly kind the report keeps (the counts are complete).
EXAMPLES = 20


@dataclass(frozen=True)
class Anomaly:
    """One anomaly: its kind, partition, the value(s) and offset(s) concerned, and the fault
    kinds it is charged to."""

    kind: str
    partition: int
    detail: Mapping[str, Any]
    faults: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "partition": self.partition, "faults": list(self.faults),
                **self.detail}


def _zero() -> dict[str, int]:
    return dict.fromkeys(KINDS, 0)


@dataclass
class Report:
    """Counts per kind overall, per partition and per fault kind; examples; run statistics."""

    totals: dict[str, int] = field(default_factory=_zero)
    per_partition: dict[int, dict[str, int]] = field(default_factory=dict)
    per_fault: dict[str, dict[str, int]] = field(default_factory=dict)
    examples: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    stats: dict[str, int] = field(default_factory=dict)
    incomplete_partitions: list[int] = field(default_factory=list)
    #: how many fault rounds included each fault kind
    rounds_per_kind: dict[str, int] = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        """No anomaly of a failing kind, and a final read that reached every partition's end
        (a read that could not would hide losses)."""
        return (not any(self.totals[kind] for kind in FAILING)
                and not self.incomplete_partitions)

    def add(self, anomaly: Anomaly) -> None:
        self.totals[anomaly.kind] += 1
        self.per_partition.setdefault(anomaly.partition, _zero())[anomaly.kind] += 1
        for fault in anomaly.faults:
            self.per_fault.setdefault(fault, _zero())[anomaly.kind] += 1
        kept = self.examples.setdefault(anomaly.kind, [])
        if len(kept) < EXAMPLES:
            kept.append(anomaly.as_dict())

    def as_dict(self) -> dict[str, Any]:
        return {"valid": self.valid, "totals": self.totals,
                "per_partition": {str(p): c for p, c in sorted(self.per_partition.items())},
                "per_fault": dict(sorted(self.per_fault.items())),
                "incomplete_partitions": self.incomplete_partitions,
                "stats": self.stats, "rounds_per_kind": self.rounds_per_kind,
                "examples": self.examples}

    def summary_line(self) -> str:
        counts = ", ".join(f"{kind} {self.totals[kind]}" for kind in KINDS)
        return f"{'VALID' if self.valid else 'INVALID'}: {counts}"


class _Rounds:
    """Fault rounds in time order; which round a record's time is charged to."""

    def __init__(self, events: Iterable[Mapping[str, Any]]) -> None:
        starts: dict[int, tuple[float, tuple[str, ...]]] = {}
        stops: dict[int, float] = {}
        for event in events:
            if event["phase"] == "start":
                starts[event["round"]] = (event["t"], tuple(event["kinds"]))
            else:
                stops[event["round"]] = event["t"]
        ordered = sorted(starts.items(), key=lambda item: item[1][0])
        # a round that never stopped (the run was cut short) lasts for ever
        self.stops = [stops.get(r, float("inf")) for r, _start in ordered]
        self.kinds = [kinds for _r, (_t, kinds) in ordered]

    def charge(self, t: float | None) -> tuple[str, ...]:
        if t is None or not self.stops:
            return (NO_FAULT,)
        index = bisect_left(self.stops, t)
        return self.kinds[index] if index < len(self.kinds) else (NO_FAULT,)


def check(events: Iterable[Mapping[str, Any]]) -> Report:
    """Check one run's history; see the module docstring for what is reported."""
    invoked: dict[str, tuple[int, float]] = {}
    acked: dict[str, tuple[int, int, float]] = {}
    failed = 0
    polls: list[Mapping[str, Any]] = []
    finals: list[Mapping[str, Any]] = []
    incomplete: set[int] = set()
    fault_events: list[Mapping[str, Any]] = []
    for event in events:
        kind = event["type"]
        if kind == "invoke":
            invoked[event["value"]] = (event["partition"], event["t"])
        elif kind == "ok":
            acked[event["value"]] = (event["partition"], event["offset"], event["t"])
        elif kind == "fail":
            failed += 1
        elif kind == "poll":
            polls.append(event)
        elif kind == "final":
            finals.append(event)
        elif kind == "final_end" and not event.get("complete", True):
            incomplete.add(event["partition"])
        elif kind == "fault":
            fault_events.append(event)
    rounds = _Rounds(fault_events)
    report = Report(incomplete_partitions=sorted(incomplete))
    report.stats = {"attempted": len(invoked), "acknowledged": len(acked), "failed": failed,
                    "polled": len(polls), "final_records": len(finals),
                    "rounds": len(rounds.kinds)}
    for kinds in rounds.kinds:
        for kind in kinds:
            report.rounds_per_kind[kind] = report.rounds_per_kind.get(kind, 0) + 1

    def when(value: str) -> float | None:
        """The time a value was produced: its acknowledgement, else its attempt."""
        if value in acked:
            return acked[value][2]
        return invoked[value][1] if value in invoked else None

    def emit(kind: str, partition: int, value: str | None, **detail: Any) -> None:
        t = when(value) if value is not None else detail.pop("t", None)
        payload = {"value": value, **detail} if value is not None else detail
        report.add(Anomaly(kind, partition, payload, rounds.charge(t)))

    final_values: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for event in finals:
        final_values[event["value"]].append((event["partition"], event["offset"]))

    # lost: acknowledged, absent from the final read
    for value, (partition, offset, _t) in acked.items():
        if value not in final_values:
            emit("lost", partition, value, acked_offset=offset)

    # duplicated: one value at several offsets, over every read
    read_at: dict[str, set[tuple[int, int]]] = defaultdict(set)
    for event in (*polls, *finals):
        read_at[event["value"]].add((event["partition"], event["offset"]))
    for value, places in read_at.items():
        if len(places) > 1:
            partition = min(places)[0]
            emit("duplicated", partition, value, at=sorted(places))

    # divergent: one offset, several values, over reads and acknowledgements
    seen: dict[tuple[int, int], set[str]] = defaultdict(set)
    for event in (*polls, *finals):
        seen[(event["partition"], event["offset"])].add(event["value"])
    for value, (partition, offset, _t) in acked.items():
        if offset is not None and offset >= 0:  # acks=0 reports no offset (-1)
            seen[(partition, offset)].add(value)
    for (partition, offset), values in sorted(seen.items()):
        if len(values) > 1:
            ordered = sorted(values)
            times = [t for t in (when(v) for v in ordered) if t is not None]
            emit("divergent", partition, None, offset=offset, values=ordered,
                 t=min(times) if times else None)

    # non-monotonic: per consumer instance and partition, offsets must increase
    last: dict[tuple[Any, Any, int], tuple[int, str]] = {}
    for event in polls:
        key = (event["consumer"], event.get("session"), event["partition"])
        previous = last.get(key)
        if previous is not None and event["offset"] <= previous[0]:
            emit("non_monotonic", event["partition"], event["value"],
                 consumer=event["consumer"], offset=event["offset"], previous=previous[0],
                 previous_value=previous[1])
        last[key] = (event["offset"], event["value"])

    # disappeared: seen by a consumer (so below the high watermark), gone at the end
    reported: set[str] = set()
    for event in polls:
        value = event["value"]
        if value not in final_values and value not in reported:
            reported.add(value)
            emit("disappeared", event["partition"], value, offset=event["offset"],
                 consumer=event["consumer"])

    # unexpected: read, never attempted
    for value, places in read_at.items():
        if value not in invoked:
            emit("unexpected", min(places)[0], value, at=sorted(places))
    return report
