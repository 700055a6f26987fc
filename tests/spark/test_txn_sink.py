"""The exactly-once sink's per-task protocol, against a scripted producer and admin (no Spark
session, no broker): skip a committed batch, offsets first, re-create a fenced cached producer
once, abort on other errors. The real thing runs in test_exactly_once.py."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

from moldau.client.errors import BrokerError, ErrorCode, ProducerFenced
from moldau.client.group.types import OffsetAndMetadata
from moldau.client.types import TopicPartition
from moldau.spark import txn_sink
from moldau.spark.options import parse_sink_options

OPTIONS = parse_sink_options({"kafka.bootstrap.servers": "127.0.0.1:9", "topic": "out"},
                             streaming=True)
STATE = TopicPartition("out", 0)


class FakeProducer:
    """Records what the task did; ``fail`` maps a method name to the error it raises."""

    def __init__(self, name: str, fail: dict[str, BaseException] | None = None) -> None:
        self.name = name
        self.fail = fail or {}
        self.calls: list[str] = []
        self.sent: list[Any] = []
        self.offsets: Any = None
        self.buffered_bytes = 0

    def _maybe_fail(self, what: str) -> None:
        self.calls.append(what)
        if what in self.fail:
            raise self.fail.pop(what)

    def begin_transaction(self) -> None:
        self._maybe_fail("begin")

    async def send_offsets_to_transaction(self, offsets: Any, group: Any) -> None:
        self._maybe_fail("send_offsets")
        self.offsets = (offsets, group)

    def send(self, topic: str, value: Any, **kw: Any) -> asyncio.Future[Any]:
        self.sent.append(value)
        future = asyncio.get_running_loop().create_future()
        future.set_result(None)
        return future

    async def flush(self) -> None:
        pass

    async def commit_transaction(self) -> None:
        self._maybe_fail("commit")

    async def abort_transaction(self) -> None:
        self._maybe_fail("abort")


class FakeAdmin:
    def __init__(self, committed: int | None, hang: bool = False) -> None:
        self.committed, self.hang = committed, hang
        self.asked: list[tuple[str, bool]] = []

    async def list_group_offsets(self, group: str, partitions: Any, *,
                                 require_stable: bool = False) -> dict[Any, Any]:
        self.asked.append((group, require_stable))
        if self.hang:
            self.hang = False
            await asyncio.sleep(3600)
        value = None if self.committed is None else OffsetAndMetadata(self.committed)
        return {tp: value for tp in partitions}


@pytest.fixture
def task(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Wires fakes into txn_sink; ``task(producers, admin)`` with the producers handed out in
    order (the first is 'cached' unless ``fresh_first``)."""

    def make(producers: list[FakeProducer], admin: FakeAdmin,
             fresh_first: bool = True) -> dict[str, Any]:
        state: dict[str, Any] = {"dropped": 0, "handed": 0}

        def producer_for(config: dict[str, str]) -> tuple[FakeProducer, bool]:
            assert config["transactional.id"] == "moldau-spark-q1-3"
            n = state["handed"]
            state["handed"] += 1
            return producers[n], (fresh_first or n > 0)

        def drop(config: dict[str, str]) -> None:
            state["dropped"] += 1

        monkeypatch.setattr(txn_sink, "transactional_producer_for", producer_for)
        monkeypatch.setattr(txn_sink, "drop_transactional_producer", drop)
        monkeypatch.setattr(txn_sink, "admin_for", lambda config: admin)
        monkeypatch.setattr(txn_sink, "task_partition", lambda: 3)
        monkeypatch.setattr(txn_sink, "CACHED_STABLE_WAIT_S", 0.2)
        return state

    return make


def rows(n: int) -> Iterator[pa.RecordBatch]:
    yield pa.record_batch({"value": [f"v{i}" for i in range(n)]})


def test_writes_rows_and_batch_id_in_one_transaction(task: Any) -> None:
    producer, admin = FakeProducer("p"), FakeAdmin(7)  # batches up to 6 committed
    task([producer], admin)
    message = txn_sink.write_transactionally(rows(5), OPTIONS, "q1", 7)
    assert message.records == 5 and not message.skipped
    assert producer.calls == ["begin", "send_offsets", "commit"], "offsets go first"
    offsets, group = producer.offsets
    assert offsets[STATE].offset == 8 and group == "moldau-spark-q1-3"
    assert admin.asked == [("moldau-spark-q1-3", True)], "read with require_stable"


def test_a_committed_batch_is_drained_not_written(task: Any) -> None:
    producer, admin = FakeProducer("p"), FakeAdmin(8)
    task([producer], admin)
    consumed = []

    def tracked() -> Iterator[pa.RecordBatch]:
        for batch in rows(4):
            consumed.append(batch.num_rows)
            yield batch
        consumed.append("end")

    message = txn_sink.write_transactionally(tracked(), OPTIONS, "q1", 7)
    assert message.skipped and message.records == 0
    assert producer.calls == [] and consumed == [4, "end"]


def test_an_empty_task_needs_no_transaction(task: Any) -> None:
    state = task([], FakeAdmin(None))
    message = txn_sink.write_transactionally(iter([]), OPTIONS, "q1", 0)
    assert message.records == 0 and state["handed"] == 0


@pytest.mark.parametrize("error", [ProducerFenced(ErrorCode.producer_fenced),
                                   BrokerError(ErrorCode.invalid_producer_epoch)])
def test_a_fenced_cached_producer_is_recreated_once(task: Any, error: BaseException) -> None:
    stale, fresh = FakeProducer("stale", {"send_offsets": error}), FakeProducer("fresh")
    state = task([stale, fresh], FakeAdmin(None), fresh_first=False)
    message = txn_sink.write_transactionally(rows(3), OPTIONS, "q1", 0)
    assert message.records == 3 and state["dropped"] == 1
    assert stale.sent == [] and len(fresh.sent) == 3, "no row went through the fenced one"


def test_a_cached_producer_stuck_on_an_unstable_offset_is_recreated(task: Any) -> None:
    admin = FakeAdmin(None, hang=True)
    fresh = FakeProducer("fresh")
    state = task([FakeProducer("stale"), fresh], admin, fresh_first=False)
    assert txn_sink.write_transactionally(rows(2), OPTIONS, "q1", 0).records == 2
    assert state["dropped"] == 1 and len(admin.asked) == 2


def test_other_errors_abort_and_fail_the_task(task: Any) -> None:
    producer = FakeProducer("p", {"commit": BrokerError(ErrorCode.invalid_txn_state)})
    state = task([producer], FakeAdmin(None))
    with pytest.raises(BrokerError, match="INVALID_TXN_STATE"):
        txn_sink.write_transactionally(rows(2), OPTIONS, "q1", 0)
    assert producer.calls[-1] == "abort" and state["dropped"] == 0


def test_fenced_while_writing_fails_with_the_reason(task: Any) -> None:
    producer = FakeProducer("p", {"commit": ProducerFenced(ErrorCode.producer_fenced)})
    state = task([producer], FakeAdmin(None))
    with pytest.raises(RuntimeError, match=r"fenced.*kafka.transaction.timeout.ms=60000"):
        txn_sink.write_transactionally(rows(2), OPTIONS, "q1", 0)
    assert "abort" not in producer.calls and state["dropped"] == 1
