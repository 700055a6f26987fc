"""``moldau transactions``: argument rules, Kafka's table layout, the find-hanging rule."""

from __future__ import annotations

import pytest

from moldau.cli.main import build_parser
from moldau.cli.transactions import check_args
from moldau.cli.transactions_format import (
    describe_row,
    hanging,
    hanging_rows,
    open_transactions,
    table,
)
from moldau.client.admin_txn import ProducerState, TransactionDescription
from moldau.client.types import TopicPartition

TP = TopicPartition("orders", 0)
MIN = 60000


def _args(*argv: str) -> object:
    return build_parser().parse_args(["transactions", "-b", "h:1", *argv])


@pytest.mark.parametrize(("argv", "problem"), [
    (["list"], None),
    (["abort", "--topic", "t", "--partition", "0"], "--start-offset"),
    (["abort", "--topic", "t", "--partition", "0", "--start-offset", "3"], None),
    (["abort", "--topic", "t", "--partition", "0", "--start-offset", "3", "--producer-id", "1"],
     "not both"),
    (["abort", "--topic", "t", "--partition", "0", "--producer-id", "1", "--producer-epoch",
      "0", "--coordinator-epoch", "2"], None),
    (["find-hanging"], "exactly one"),
    (["find-hanging", "--broker-id", "1", "--topic", "t"], "exactly one"),
    (["find-hanging", "--broker-id", "1", "--partition", "0"], "--partition needs --topic"),
    (["find-hanging", "--topic", "t", "--partition", "0"], None),
])
def test_argument_rules(argv: list[str], problem: str | None) -> None:
    found = check_args(_args(*argv))  # type: ignore[arg-type]
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found


def test_table_pads_every_cell_and_ends_it_with_a_tab() -> None:
    text = table(("ProducerId", "State"), [(7, "Ongoing"), (12345678901, "CompleteAbort")])
    assert text.splitlines() == [
        "ProducerId \tState        \t",
        "7          \tOngoing      \t",
        "12345678901\tCompleteAbort\t",
    ]


def test_describe_row_says_none_without_an_open_transaction() -> None:
    d = TransactionDescription(1, "app", 5, 2, "CompleteCommit", 60000, -1, ())
    assert describe_row(d, 10_000)[5:] == (60000, "None", "None", "")
    d = TransactionDescription(1, "app", 5, 2, "Ongoing", 60000, 4_000,
                               (TP, TopicPartition("orders", 1)))
    assert describe_row(d, 10_000)[5:] == (60000, "4000", "6000", "orders-0,orders-1")


def _producer(pid: int, epoch: int, start: int, last_ts: int) -> ProducerState:
    return ProducerState(pid, epoch, 3, last_ts, 7, start)


def test_hanging_needs_old_and_unknown_to_the_coordinator() -> None:
    now = 100 * MIN
    producers = {TP: [
        _producer(1, 0, 10, now - 20 * MIN),   # old, coordinator forgot it: hanging
        _producer(2, 0, 20, now - 20 * MIN),   # old but the coordinator still has it
        _producer(3, 0, 30, now - 1 * MIN),    # recent: not a candidate
        _producer(4, 0, -1, now - 90 * MIN),   # no open transaction
        _producer(5, 1, 40, now - 20 * MIN),   # coordinator has pid 5 at another epoch
    ]}
    candidates = open_transactions(producers, now, 15 * MIN)
    assert [c.producer.producer_id for c in candidates] == [1, 2, 5]
    described = [
        TransactionDescription(1, "b", 2, 0, "Ongoing", 60000, 0, (TP,)),
        TransactionDescription(1, "e", 5, 2, "Ongoing", 60000, 0, (TP,)),
        TransactionDescription(1, "a", 1, 0, "CompleteAbort", 60000, -1, ()),
    ]
    found = hanging(candidates, described)
    assert [c.producer.producer_id for c in found] == [1, 5]
    assert hanging_rows(found, now)[0] == ("orders", 0, 1, 0, "7", 10, now - 20 * MIN, 20)
