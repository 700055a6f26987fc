"""The fault suite's transactional checker: a pure function from a ``txn`` run's history to
its anomalies (:func:`check_txns`).

The history of the transactional workload (:mod:`.txn_workload`) holds:

``txn_begin``     producer ``producer`` began transaction ``txn`` (unique per run);
``txn_send``      it sent ``value`` (unique) to ``partition`` inside ``txn``;
``txn_commit_ok`` ``commit_transaction`` of ``txn`` returned: it is committed;
``txn_abort_ok``  ``abort_transaction`` of ``txn`` returned: it is aborted;
``txn_unknown``   its end is unknown (a fatal error, a producer that had to be replaced; its
                  successor's ``init_transactions`` then commits or aborts it);
``poll``          a read_committed consumer (``consumer``, ``session``) read ``value`` at
                  ``offset`` of ``partition``;
``final``/``final_end`` the final read_committed read of every partition, as in
                  :mod:`.checker`;
``fault``         nemesis rounds, as in :mod:`.checker`.

What is reported (all must be 0; Kafka's promises to read_committed readers):

- **aborted_reads**: a value of an aborted transaction read by any read_committed read;
- **lost_commits**: a value of a committed transaction missing from the final read;
- **duplicates**: a value read at two or more (partition, offset)s over all reads;
- **partial**: a transaction whose values the final read holds only in part (all or none of
  a transaction's values must be visible, whatever its outcome; a committed one missing
  values is also counted in lost_commits);
- **unexpected**: a value read that no transaction sent.

A transaction with no end event (the run stopped) counts as unknown. The final read must
reach every partition's end (``final_end`` complete), or the report is invalid too. Anomalies
are charged to fault rounds as :mod:`.checker` charges records: by the time of the value's
``txn_send``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .checker import _Rounds

__all__ = ["TXN_KINDS", "TxnReport", "check_txns"]

TXN_KINDS = ("aborted_reads", "lost_commits", "duplicates", "partial", "unexpected")
EXAMPLES = 20


def _zero() -> dict[str, int]:
    return dict.fromkeys(TXN_KINDS, 0)


@dataclass
class TxnReport:
    """Counts per kind, per partition and per fault kind; examples; statistics."""

    totals: dict[str, int] = field(default_factory=_zero)
    per_partition: dict[int, dict[str, int]] = field(default_factory=dict)
    per_fault: dict[str, dict[str, int]] = field(default_factory=dict)
    examples: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    stats: dict[str, int] = field(default_factory=dict)
    incomplete_partitions: list[int] = field(default_factory=list)
    rounds_per_kind: dict[str, int] = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        return not any(self.totals.values()) and not self.incomplete_partitions

    def add(self, kind: str, partition: int, faults: tuple[str, ...], **detail: Any) -> None:
        self.totals[kind] += 1
        self.per_partition.setdefault(partition, _zero())[kind] += 1
        for fault in faults:
            self.per_fault.setdefault(fault, _zero())[kind] += 1
        kept = self.examples.setdefault(kind, [])
        if len(kept) < EXAMPLES:
            kept.append({"kind": kind, "partition": partition, "faults": list(faults),
                         **detail})

    def as_dict(self) -> dict[str, Any]:
        return {"valid": self.valid, "totals": self.totals,
                "per_partition": {str(p): c for p, c in sorted(self.per_partition.items())},
                "per_fault": dict(sorted(self.per_fault.items())),
                "incomplete_partitions": self.incomplete_partitions,
                "stats": self.stats, "rounds_per_kind": self.rounds_per_kind,
                "examples": self.examples}

    def summary_line(self) -> str:
        counts = ", ".join(f"{kind} {self.totals[kind]}" for kind in TXN_KINDS)
        return f"{'VALID' if self.valid else 'INVALID'}: {counts}"


@dataclass
class _Txn:
    producer: Any
    values: dict[str, tuple[int, float]] = field(default_factory=dict)  # value -> (p, t)
    outcome: str = "unknown"  # committed, aborted, unknown


def check_txns(events: Iterable[Mapping[str, Any]]) -> TxnReport:
    """Check one transactional run's history; see the module docstring."""
    txns: dict[str, _Txn] = {}
    owner: dict[str, str] = {}
    polls: list[Mapping[str, Any]] = []
    finals: list[Mapping[str, Any]] = []
    incomplete: set[int] = set()
    fault_events: list[Mapping[str, Any]] = []
    for event in events:
        kind = event["type"]
        if kind == "txn_begin":
            txns.setdefault(event["txn"], _Txn(event.get("producer")))
        elif kind == "txn_send":
            txn = txns.setdefault(event["txn"], _Txn(event.get("producer")))
            txn.values[event["value"]] = (event["partition"], event["t"])
            owner[event["value"]] = event["txn"]
        elif kind == "txn_commit_ok":
            txns.setdefault(event["txn"], _Txn(event.get("producer"))).outcome = "committed"
        elif kind == "txn_abort_ok":
            txns.setdefault(event["txn"], _Txn(event.get("producer"))).outcome = "aborted"
        elif kind == "txn_unknown":
            txns.setdefault(event["txn"], _Txn(event.get("producer"))).outcome = "unknown"
        elif kind == "poll":
            polls.append(event)
        elif kind == "final":
            finals.append(event)
        elif kind == "final_end" and not event.get("complete", True):
            incomplete.add(event["partition"])
        elif kind == "fault":
            fault_events.append(event)
    rounds = _Rounds(fault_events)
    report = TxnReport(incomplete_partitions=sorted(incomplete))
    outcomes = [t.outcome for t in txns.values()]
    report.stats = {
        "transactions": len(txns), "committed": outcomes.count("committed"),
        "aborted": outcomes.count("aborted"), "unknown": outcomes.count("unknown"),
        "sent": len(owner), "attempted": len(owner), "polled": len(polls),
        "final_records": len(finals),
        "rounds": len(rounds.kinds),
        # what the runner's "did anything happen" check reads
        "acknowledged": sum(len(t.values) for t in txns.values() if t.outcome == "committed"),
    }
    for kinds in rounds.kinds:
        for kind in kinds:
            report.rounds_per_kind[kind] = report.rounds_per_kind.get(kind, 0) + 1

    def charge(value: str | None) -> tuple[str, ...]:
        if value is None or value not in owner:
            return rounds.charge(None)
        return rounds.charge(txns[owner[value]].values[value][1])

    final_at: dict[str, set[tuple[int, int]]] = defaultdict(set)
    for event in finals:
        final_at[event["value"]].add((event["partition"], event["offset"]))
    read_at: dict[str, set[tuple[int, int]]] = defaultdict(set)
    for event in (*polls, *finals):
        read_at[event["value"]].add((event["partition"], event["offset"]))

    for value, places in sorted(read_at.items()):
        partition = min(places)[0]
        name = owner.get(value)
        if name is None:
            report.add("unexpected", partition, charge(None), value=value, at=sorted(places))
            continue
        if txns[name].outcome == "aborted":
            report.add("aborted_reads", partition, charge(value), value=value, txn=name,
                       at=sorted(places))
        if len(places) > 1:
            report.add("duplicates", partition, charge(value), value=value, txn=name,
                       at=sorted(places))

    for name, txn in sorted(txns.items()):
        if not txn.values:
            continue
        visible = [v for v in txn.values if v in final_at]
        if txn.outcome == "committed":
            for value, (partition, _t) in sorted(txn.values.items()):
                if value not in final_at:
                    report.add("lost_commits", partition, charge(value), value=value,
                               txn=name)
        if 0 < len(visible) < len(txn.values):
            missing = sorted(v for v in txn.values if v not in final_at)
            first = missing[0]
            report.add("partial", txn.values[first][0], charge(first), txn=name,
                       outcome=txn.outcome, visible=len(visible), sent=len(txn.values),
                       missing=missing[:5])
    return report
