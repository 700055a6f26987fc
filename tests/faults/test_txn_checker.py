"""The transactional checker on synthetic histories: a clean history passes (committed,
aborted and unknown transactions, all or nothing), and each anomaly kind, planted alone,
makes it fail and is counted under its partition and the fault round it is charged to."""

from __future__ import annotations

from typing import Any

from tests.faults.replication.checker import NO_FAULT
from tests.faults.replication.txn_checker import TXN_KINDS, check_txns


class Builder:
    """A transactional history written as the workload writes it; the clock ticks by 1."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.t = 0.0
        self.finals: dict[int, list[str]] = {0: [], 1: []}

    def ev(self, type_: str, **fields: Any) -> None:
        self.t += 1.0
        self.events.append({"type": type_, "t": self.t, **fields})

    def txn(self, name: str, values: dict[str, int], outcome: str | None,
            visible: bool | None = None) -> None:
        """A transaction sending ``values`` (value -> partition) and ending in ``outcome``;
        its values go to the final read when ``visible`` (default: committed)."""
        self.ev("txn_begin", producer=0, txn=name)
        for value, partition in values.items():
            self.ev("txn_send", producer=0, txn=name, value=value, partition=partition)
        if outcome is not None:
            self.ev(f"txn_{outcome}", producer=0, txn=name)
        if visible if visible is not None else outcome == "commit_ok":
            for value, partition in values.items():
                self.finals[partition].append(value)

    def poll(self, partition: int, offset: int, value: str) -> None:
        self.ev("poll", consumer=0, session=0, partition=partition, offset=offset,
                value=value)

    def fault(self, round_: int, phase: str) -> None:
        self.ev("fault", round=round_, kinds=["kill"], phase=phase)

    def history(self, complete: bool = True) -> list[dict[str, Any]]:
        out = list(self.events)
        for partition, values in self.finals.items():
            # markers take offsets too: committed values sit at every other offset
            for i, value in enumerate(values):
                out.append({"type": "final", "partition": partition, "offset": 2 * i,
                            "value": value})
            out.append({"type": "final_end", "partition": partition,
                        "high": 2 * len(values), "complete": complete})
        return out


def clean() -> Builder:
    b = Builder()
    b.txn("t1", {"t1-0": 0, "t1-1": 1}, "commit_ok")
    b.poll(0, 0, "t1-0")
    b.txn("t2", {"t2-0": 0, "t2-1": 1}, "abort_ok")
    b.fault(1, "start")
    b.txn("t3", {"t3-0": 0, "t3-1": 1}, "unknown", visible=True)   # committed after all
    b.txn("t4", {"t4-0": 0}, "unknown", visible=False)             # aborted after all
    b.txn("t5", {"t5-0": 1}, None, visible=False)                  # the run stopped
    b.fault(1, "stop")
    b.txn("t6", {"t6-0": 0, "t6-1": 0}, "commit_ok")
    return b


def test_clean_history_is_valid() -> None:
    report = check_txns(clean().history())
    assert report.valid, report.as_dict()
    assert report.totals == dict.fromkeys(TXN_KINDS, 0)
    assert report.stats["transactions"] == 6
    assert (report.stats["committed"], report.stats["aborted"], report.stats["unknown"]) \
        == (2, 1, 3)
    assert report.stats["acknowledged"] == 4
    assert report.summary_line().startswith("VALID")


def test_an_aborted_value_read_by_a_consumer_is_an_aborted_read() -> None:
    b = clean()
    b.poll(0, 3, "t2-0")
    report = check_txns(b.history())
    assert not report.valid
    assert report.totals["aborted_reads"] == 1
    assert report.examples["aborted_reads"][0]["txn"] == "t2"
    assert sum(report.totals.values()) == 1


def test_an_aborted_transaction_in_the_final_read_is_aborted_reads_per_value() -> None:
    b = Builder()
    b.txn("t1", {"a": 0, "b": 1}, "abort_ok", visible=True)
    report = check_txns(b.history())
    assert report.totals["aborted_reads"] == 2
    assert report.per_partition[0]["aborted_reads"] == 1
    assert report.per_partition[1]["aborted_reads"] == 1


def test_a_committed_value_missing_at_the_end_is_a_lost_commit_and_partial() -> None:
    b = Builder()
    b.fault(1, "start")
    b.txn("t1", {"a": 0, "b": 1}, "commit_ok", visible=False)
    b.finals[0].append("a")  # only half of it survived
    b.fault(1, "stop")
    report = check_txns(b.history())
    assert report.totals["lost_commits"] == 1
    assert report.totals["partial"] == 1
    assert report.per_fault["kill"]["lost_commits"] == 1
    assert report.examples["lost_commits"][0]["value"] == "b"
    assert report.examples["partial"][0]["visible"] == 1


def test_a_whole_committed_transaction_missing_is_lost_not_partial() -> None:
    b = Builder()
    b.txn("t1", {"a": 0, "b": 1}, "commit_ok", visible=False)
    report = check_txns(b.history())
    assert (report.totals["lost_commits"], report.totals["partial"]) == (2, 0)
    assert report.per_fault[NO_FAULT]["lost_commits"] == 2


def test_an_unknown_transaction_seen_in_part_is_partial() -> None:
    b = Builder()
    b.txn("t1", {"a": 0, "b": 0, "c": 1}, "unknown", visible=False)
    b.finals[0] += ["a", "b"]
    report = check_txns(b.history())
    assert report.totals == {**dict.fromkeys(TXN_KINDS, 0), "partial": 1}
    assert report.examples["partial"][0]["missing"] == ["c"]


def test_a_value_at_two_offsets_is_a_duplicate() -> None:
    b = clean()
    b.poll(0, 7, "t1-0")  # also read at offset 0 (poll and final)
    report = check_txns(b.history())
    assert report.totals == {**dict.fromkeys(TXN_KINDS, 0), "duplicates": 1}
    assert [tuple(place) for place in report.examples["duplicates"][0]["at"]] == \
        [(0, 0), (0, 7)]


def test_a_value_nobody_sent_is_unexpected() -> None:
    b = clean()
    b.finals[1].append("ghost")
    report = check_txns(b.history())
    assert report.totals == {**dict.fromkeys(TXN_KINDS, 0), "unexpected": 1}


def test_an_incomplete_final_read_is_invalid() -> None:
    report = check_txns(clean().history(complete=False))
    assert report.incomplete_partitions == [0, 1]
    assert not report.valid


def test_report_dict_lists_every_kind() -> None:
    assert list(check_txns(clean().history()).as_dict()["totals"]) == list(TXN_KINDS)
