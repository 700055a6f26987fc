"""The exactly-once streaming sink: each task's part of micro-batch N in one transaction.

Spark's own Kafka sink is at-least-once: a task retried after a failure, or a micro-batch
re-run after a driver crash, writes its records again. Here every write task of a stream
(``delivery.guarantee=exactly-once``, the default of ``writeStream``) does this, on its
executor:

1. ``tid = <transactional.id.prefix><queryId>-<partitionId>``. The query id survives a
   restart from the checkpoint (the run id does not), and a re-run of batch N gives each
   partition id the same rows (see "Determinism" in docs/spark.md), so a task and all its
   retries and replays share one transactional id.
2. The process's transactional producer for ``tid`` (:func:`.clients.transactional_producer_for`).
   A new one runs ``init_transactions``: that fences every earlier producer of ``tid`` — a
   zombie attempt still running somewhere — and returns only once their open transaction is
   committed or aborted.
3. The committed offset of partition 0 of the *state topic* in the one-partition simple
   group named ``tid``, read with ``require_stable`` (so an in-flight commit is waited for,
   never missed). Offset N + 1 or more means batch N of this task committed before: the
   rows are drained (Spark streams them either way) and nothing is written.
4. ``begin_transaction``; ``send_offsets_to_transaction({(state topic, 0): N + 1})``; the
   rows; ``commit_transaction``. The rows and the batch id commit atomically (KIP-98): a
   read_committed reader sees either both or neither.

The offsets go first: AddOffsetsToTxn is the transaction's first request to the
coordinator, so a cached producer that was fenced since its last task learns it before any
row is consumed, and is re-created (which fences the newer one and completes its
transaction) and the task goes on — once. A cached producer also reads the committed offset
with a short bound: a newer producer of ``tid`` that died inside a transaction keeps that
offset unstable until ``transaction.timeout.ms``, and re-creating ours ends that wait at once.

Any other error aborts the transaction (or, when the producer is fenced or in a fatal state,
drops it) and fails the task; Spark retries it and the retry fences whatever is left.
Atomicity is per task, not per micro-batch: a read_committed reader may see some tasks of
batch N before the others.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from moldau.client import Producer
from moldau.client.config import KINDS
from moldau.client.errors import BrokerError, ErrorCode, ProducerFenced
from moldau.client.group.types import OffsetAndMetadata
from moldau.client.types import TopicPartition

from .clients import (
    admin_for,
    call,
    drop_transactional_producer,
    transactional_producer_for,
)
from .options import SinkOptions
from .sink_rows import MoldauCommitMessage, check_settled, send_rows

log = logging.getLogger(__name__)

# How long a cached producer waits for a stable committed offset before it assumes a newer
# producer of its id died inside a transaction, and re-creates itself to fence it.
CACHED_STABLE_WAIT_S = 5.0
# A fresh producer has fenced everything before it: the offset is stable at once unless the
# coordinator is slow; waiting longer than the request timeout helps nobody.
FRESH_STABLE_WAIT_S = 60.0
ABORT_WAIT_S = 30.0

_FENCED_CODES = frozenset({ErrorCode.producer_fenced, ErrorCode.invalid_producer_epoch})


class _Fenced(Exception):
    """The cached producer was fenced (or may be stuck behind a dead newer one)."""


def transactional_id(prefix: str, query: str, partition: int) -> str:
    """The transactional id (and simple group id) of one write task of a query."""
    return f"{prefix}{query}-{partition}"


def is_fenced(exc: BaseException | None) -> bool:
    """True when ``exc`` (or an error it wraps) says a newer producer of the id fenced us."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, ProducerFenced):
            return True
        if isinstance(exc, BrokerError) and exc.code in _FENCED_CODES:
            return True
        exc = getattr(exc, "cause", None) or exc.__cause__
        seen += 1
    return False


def task_partition() -> int:
    """The partition id of the running Spark task."""
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        raise RuntimeError("the exactly-once sink runs only inside Spark write tasks")
    return int(context.partitionId())


def _admin_config(config: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in config.items() if k in KINDS["admin"]}


async def _committed(admin: Any, group: str, tp: TopicPartition, wait_s: float) -> int:
    """The group's stable committed offset of ``tp`` (-1 when none)."""
    found = await asyncio.wait_for(
        admin.list_group_offsets(group, [tp], require_stable=True), wait_s)
    value = found.get(tp)
    return -1 if value is None else int(value.offset)


async def _begin(producer: Producer) -> None:
    producer.begin_transaction()  # state of the client loop: change it there


def _drain(batches: Iterator[pa.RecordBatch]) -> None:
    for _ in batches:  # Spark streams the rows to the task whatever it does with them
        pass


def _first_rows(batches: Iterator[pa.RecordBatch]) -> pa.RecordBatch | None:
    for batch in batches:
        if batch.num_rows:
            return batch
    return None


def _chain(first: pa.RecordBatch, rest: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield first
    yield from rest


def _abandon(producer: Producer, config: dict[str, str], exc: BaseException) -> None:
    """After a failed transaction: abort it, or drop the producer if that is all we can do."""
    if not is_fenced(exc):
        try:
            call(asyncio.wait_for(producer.abort_transaction(), ABORT_WAIT_S))
            return
        except Exception as abort_exc:  # fatal state, broker gone: the next task starts afresh
            log.warning("could not abort transaction of %s: %s", config["transactional.id"],
                        abort_exc)
    drop_transactional_producer(config)


def _fenced_hint(tid: str, config: dict[str, str]) -> str:
    timeout = config.get("transaction.timeout.ms", "60000")
    return (f"the transaction of {tid} was fenced: a newer attempt of the same task took "
            f"over, or the transaction coordinator aborted it because the task ran longer than "
            f"kafka.transaction.timeout.ms={timeout}. Spark retries the task; if this repeats, "
            "make micro-batches smaller (maxOffsetsPerTrigger) or raise "
            "kafka.transaction.timeout.ms (at most the brokers' transaction.max.timeout.ms)")


def write_transactionally(batches: Iterator[pa.RecordBatch], options: SinkOptions,
                          query: str, batch_id: int) -> MoldauCommitMessage:
    """Write one task's rows of micro-batch ``batch_id`` exactly once (module docstring)."""
    first = _first_rows(batches)
    if first is None:
        # Nothing to write now, nothing on a replay either: no transaction needed.
        return MoldauCommitMessage(0, query, batch_id)
    tid = transactional_id(options.transactional_id_prefix, query, task_partition())
    config = {**options.producer_config(), "transactional.id": tid}
    assert options.state_topic is not None, "checked by parse_sink_options"
    state = TopicPartition(options.state_topic, 0)
    admin = admin_for(_admin_config(config))
    rows = _chain(first, batches)
    for attempt in (1, 2):
        producer, fresh = transactional_producer_for(config)
        try:
            return _write(producer, fresh, admin, tid, state, rows, options, query, batch_id)
        except _Fenced as exc:
            drop_transactional_producer(config)
            if attempt == 2:
                raise RuntimeError(_fenced_hint(tid, config)) from exc.__cause__
            log.info("cached producer of %s was fenced or blocked (%s); re-creating it",
                     tid, exc.__cause__)
        except BaseException as exc:
            _abandon(producer, config, exc)
            if is_fenced(exc):
                raise RuntimeError(_fenced_hint(tid, config)) from exc
            raise
    raise AssertionError("unreachable")


def _write(producer: Producer, fresh: bool, admin: Any, tid: str, state: TopicPartition,
           rows: Iterator[pa.RecordBatch], options: SinkOptions, query: str,
           batch_id: int) -> MoldauCommitMessage:
    wait = FRESH_STABLE_WAIT_S if fresh else CACHED_STABLE_WAIT_S
    try:
        committed = call(_committed(admin, tid, state, wait))
    except TimeoutError as exc:
        if fresh:
            raise
        raise _Fenced("committed offset stayed unstable") from exc
    if committed >= batch_id + 1:
        _drain(rows)
        log.info("micro-batch %d of query %s was committed by %s before; not writing it again",
                 batch_id, query, tid)
        return MoldauCommitMessage(0, query, batch_id, skipped=True)
    call(_begin(producer))
    metadata = json.dumps({"query": query, "batch": batch_id})
    try:
        # A group id alone: the one-partition simple group (generation -1, no member).
        call(producer.send_offsets_to_transaction(
            {state: OffsetAndMetadata(batch_id + 1, metadata)}, tid))
    except Exception as exc:
        if is_fenced(exc) and not fresh:
            raise _Fenced("fenced at AddOffsetsToTxn") from exc
        raise
    futures = send_rows(producer, rows, options)
    call(producer.commit_transaction())
    return MoldauCommitMessage(check_settled(futures), query, batch_id)
