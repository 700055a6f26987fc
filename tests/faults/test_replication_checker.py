"""The fault suite's checker on synthetic histories: one clean history passes, and each
anomaly kind, planted alone, makes it fail and is counted under its partition and the fault
round it is charged to. Also the JSONL history's reader with a half-written last line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.faults.replication.checker import KINDS, NO_FAULT, check
from tests.faults.replication.history import History, read_history


class Builder:
    """A history written the way the workload writes it, with a clock that ticks by 1."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.t = 0.0

    def tick(self) -> float:
        self.t += 1.0
        return self.t

    def produce(self, value: str, partition: int, offset: int | None) -> None:
        self.events.append({"type": "invoke", "t": self.tick(), "value": value,
                            "partition": partition, "producer": 0, "seq": 0})
        if offset is None:
            self.events.append({"type": "fail", "t": self.tick(), "value": value,
                                "partition": partition, "error": "_MSG_TIMED_OUT"})
        else:
            self.events.append({"type": "ok", "t": self.tick(), "value": value,
                                "partition": partition, "offset": offset})

    def poll(self, partition: int, offset: int, value: str, consumer: int = 0,
             session: int = 0) -> None:
        self.events.append({"type": "poll", "t": self.tick(), "consumer": consumer,
                            "session": session, "partition": partition, "offset": offset,
                            "value": value})

    def fault(self, round_: int, kinds: list[str], phase: str) -> None:
        self.events.append({"type": "fault", "t": self.tick(), "round": round_,
                            "kinds": kinds, "phase": phase})

    def final(self, partition: int, records: list[str], complete: bool = True) -> None:
        for offset, value in enumerate(records):
            self.events.append({"type": "final", "partition": partition, "offset": offset,
                                "value": value})
        self.events.append({"type": "final_end", "partition": partition,
                            "high": len(records), "complete": complete})


def clean() -> Builder:
    """Two partitions, a fault round in the middle, a failed attempt that was not written,
    and one that failed but was written after all (both allowed)."""
    b = Builder()
    b.produce("a0", 0, 0)
    b.produce("b0", 1, 0)
    b.poll(0, 0, "a0")
    b.fault(1, ["kill-leader"], "start")
    b.produce("a1", 0, 1)
    b.produce("x", 1, None)       # timed out, never written
    b.produce("b1", 1, None)      # timed out, but written
    b.fault(1, ["kill-leader"], "stop")
    b.produce("a2", 0, 2)
    b.poll(0, 1, "a1")
    b.poll(0, 2, "a2")
    b.poll(0, 1, "a1", session=1)  # a new consumer instance may read again
    b.final(0, ["a0", "a1", "a2"])
    b.final(1, ["b0", "b1"])
    return b


def only(report: Any, kind: str) -> None:
    assert not report.valid, report.as_dict()
    assert {k for k in KINDS if report.totals[k]} == {kind}, report.totals


def test_a_clean_history_is_valid() -> None:
    report = check(clean().events)
    assert report.valid, report.as_dict()
    assert report.totals == dict.fromkeys(KINDS, 0)
    assert report.stats["acknowledged"] == 4 and report.stats["failed"] == 2
    assert report.stats["rounds"] == 1


def test_an_acknowledged_record_missing_from_the_final_read_is_lost() -> None:
    b = clean()
    b.events = [e for e in b.events if not (e["type"] == "final" and e["value"] == "a1")]
    # what is left of partition 0 must not read as divergent: rebuild it without a1
    b.events = [e for e in b.events if not (e["type"] in ("final", "final_end")
                                            and e["partition"] == 0)]
    b.events += [{"type": "final", "partition": 0, "offset": 0, "value": "a0"},
                 {"type": "final", "partition": 0, "offset": 2, "value": "a2"},
                 {"type": "final_end", "partition": 0, "high": 3, "complete": True}]
    report = check(b.events)
    assert report.totals["lost"] == 1
    # it was also seen by a consumer, so it disappeared as well
    assert report.totals["disappeared"] == 1
    assert report.per_partition[0]["lost"] == 1
    assert report.per_fault["kill-leader"]["lost"] == 1
    assert report.examples["lost"][0]["value"] == "a1"


def test_lost_alone_when_no_consumer_saw_it() -> None:
    b = Builder()
    b.produce("a0", 0, 0)
    b.produce("a1", 0, 1)
    b.final(0, ["a0"])
    report = check(b.events)
    only(report, "lost")
    assert report.per_fault[NO_FAULT]["lost"] == 1


def test_a_value_at_two_offsets_is_duplicated() -> None:
    b = Builder()
    b.produce("a0", 0, 0)
    b.produce("a1", 0, 1)
    b.final(0, ["a0", "a1", "a1"])
    only(check(b.events), "duplicated")


def test_a_duplicate_seen_only_by_consumers_counts_too() -> None:
    b = Builder()
    b.produce("a0", 0, 0)
    b.poll(0, 0, "a0")
    b.poll(0, 1, "a0")
    b.final(0, ["a0"])
    report = check(b.events)
    # the consumer's offset 1 also differs from the final read's end: nothing else to read
    assert report.totals["duplicated"] == 1 and not report.valid


def test_an_offset_with_two_values_is_divergent() -> None:
    b = Builder()
    b.produce("a0", 0, 0)
    b.produce("a1", 0, 1)
    b.produce("z", 0, None)
    b.poll(0, 1, "z")   # a consumer saw z at offset 1; the end state has a1 there
    b.final(0, ["a0", "a1"])
    report = check(b.events)
    assert report.totals["divergent"] == 1
    assert report.examples["divergent"][0]["values"] == ["a1", "z"]
    assert report.totals["disappeared"] == 1  # z was seen and is gone
    assert not report.valid


def test_an_acknowledged_offset_holding_another_value_is_divergent() -> None:
    b = Builder()
    b.produce("a0", 0, 0)
    b.produce("a1", 0, 0)  # acknowledged at an offset another value got
    b.final(0, ["a0", "a1"])
    only(check(b.events), "divergent")


def test_acks_without_an_offset_are_not_divergent() -> None:
    b = Builder()
    b.produce("a0", 0, -1)  # acks=0: acknowledged without an offset
    b.produce("a1", 0, -1)
    b.final(0, ["a0", "a1"])
    assert check(b.events).valid


def test_offsets_going_back_within_one_consumer_are_non_monotonic() -> None:
    b = Builder()
    for i in range(3):
        b.produce(f"a{i}", 0, i)
    b.poll(0, 0, "a0")
    b.poll(0, 2, "a2")
    b.poll(0, 1, "a1")
    b.final(0, ["a0", "a1", "a2"])
    report = check(b.events)
    only(report, "non_monotonic")
    assert report.examples["non_monotonic"][0]["previous"] == 2


def test_seen_by_a_consumer_then_gone_disappeared() -> None:
    b = Builder()
    b.produce("a0", 0, 0)
    b.produce("a1", 0, None)  # not acknowledged (so not lost), but a consumer saw it
    b.poll(0, 1, "a1")
    b.final(0, ["a0"])
    only(check(b.events), "disappeared")


def test_a_value_nobody_attempted_is_unexpected() -> None:
    b = Builder()
    b.produce("a0", 0, 0)
    b.final(0, ["a0", "ghost"])
    only(check(b.events), "unexpected")


def test_a_final_read_that_stopped_short_is_not_valid() -> None:
    b = Builder()
    b.produce("a0", 0, 0)
    b.final(0, ["a0"], complete=False)
    report = check(b.events)
    assert report.totals == dict.fromkeys(KINDS, 0)
    assert not report.valid and report.incomplete_partitions == [0]


def test_anomalies_are_charged_to_the_first_round_not_yet_stopped() -> None:
    b = Builder()
    b.produce("before", 0, 0)                  # before round 1 stopped: round 1
    b.fault(1, ["kill-zookeeper"], "start")
    b.fault(1, ["kill-zookeeper"], "stop")
    b.produce("quiet", 0, 1)                    # between rounds: round 2
    b.fault(2, ["kill-controller", "pause-leader"], "start")
    b.fault(2, ["kill-controller", "pause-leader"], "stop")
    b.produce("after", 0, 2)                    # after the last round: no fault
    b.final(0, [])
    report = check(b.events)
    assert report.totals["lost"] == 3
    assert report.per_fault["kill-zookeeper"]["lost"] == 1
    assert report.per_fault["kill-controller"]["lost"] == 1
    assert report.per_fault["pause-leader"]["lost"] == 1
    assert report.per_fault[NO_FAULT]["lost"] == 1
    # every round counts once for each of its kinds
    assert report.rounds_per_kind == {"kill-zookeeper": 1, "kill-controller": 1,
                                      "pause-leader": 1}


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_makes_the_run_fail(kind: str) -> None:
    plants = {
        "lost": test_lost_alone_when_no_consumer_saw_it,
        "duplicated": test_a_value_at_two_offsets_is_duplicated,
        "divergent": test_an_acknowledged_offset_holding_another_value_is_divergent,
        "non_monotonic": test_offsets_going_back_within_one_consumer_are_non_monotonic,
        "disappeared": test_seen_by_a_consumer_then_gone_disappeared,
        "unexpected": test_a_value_nobody_attempted_is_unexpected,
    }
    plants[kind]()  # each asserts `only(report, kind)` or an equivalent


def test_history_file_round_trip_and_a_half_written_last_line(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    with History(path) as history:
        history.record("invoke", value="p0-1", partition=0, producer=0, seq=1)
        history.record("ok", value="p0-1", partition=0, offset=0)
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps({"type": "poll", "value": "p0-1"})[:12])  # a writer mid-line
    events = read_history(path)
    assert [e["type"] for e in events] == ["invoke", "ok"]
    assert check(events).stats["acknowledged"] == 1
