"""Producer: batching, compression, acks, retries and idempotence.

``send()`` returns at once with a future of :class:`RecordMetadata`; a background sender
drains ready batches (see :mod:`.accumulator`) into one Produce request per broker, at most
``max.in.flight.requests.per.connection`` unanswered per broker. Idempotence (on by default,
as in the Java client) gets a producer id from InitProducerId and numbers every partition's
batches; a retried batch is resent byte for byte with its sequence, so the broker drops
duplicates. Errors that mean stale metadata trigger a refresh before the retry. With
``transactional.id`` the producer is transactional: :mod:`.transactions` holds the logic,
this module only calls its hooks (send, drain, failures, close).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode

from .accumulator import ProducerBatch, RecordAccumulator, estimate_size
from .cluster import STALE_METADATA_ERRORS, Cluster
from .config import parse_config
from .errors import BrokerError, ClientError, ConfigError, KafkaTimeoutError, ProducerFenced
from .partitioner import StickyPartitioner, partition_for_key
from .retry import backoff_ms, call_with_retries, wait_event
from .tasks import spawn
from .transactions import TransactionManager
from .types import ConsumerGroupMetadata, Header, RecordMetadata, TopicPartition

log = logging.getLogger(__name__)

_FATAL_PRODUCER_ERRORS = frozenset({
    ErrorCode.invalid_producer_epoch, ErrorCode.producer_fenced,
    ErrorCode.transactional_id_authorization_failed, ErrorCode.cluster_authorization_failed,
})
_RESET_PRODUCER_ERRORS = frozenset({
    ErrorCode.unknown_producer_id, ErrorCode.out_of_order_sequence_number,
})


def _as_bytes(value: bytes | bytearray | memoryview | str | None, what: str) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise TypeError(f"record {what} must be bytes, str or None, not {type(value).__name__}")


class Producer:
    """Asynchronous Kafka producer. ``config`` uses the Java client's key names."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        given = dict(config)
        self.config = parse_config("producer", given)
        c = self.config
        explicit_idempotence = "enable.idempotence" in given
        tid = c["transactional.id"]
        if tid is not None:
            if explicit_idempotence and not c["enable.idempotence"]:
                raise ConfigError(f"transactional.id={tid!r} needs enable.idempotence=true; "
                                  "remove enable.idempotence=false")
            explicit_idempotence = True  # Java: a transactional producer is idempotent
        if c["enable.idempotence"]:
            conflicts = []
            if c["acks"] != -1:
                conflicts.append("acks must be all")
            if c["max.in.flight.requests.per.connection"] > 5:
                conflicts.append("max.in.flight.requests.per.connection must be at most 5")
            if c["retries"] == 0:
                conflicts.append("retries must be greater than 0")
            if conflicts:
                if explicit_idempotence:
                    raise ConfigError(
                        ("transactional.id" if tid is not None else "enable.idempotence=true")
                        + " needs " + ", ".join(conflicts)
                        + "; change those settings or set enable.idempotence=false"
                    )
                c["enable.idempotence"] = False  # Java's rule: implicit default yields
        self.idempotent: bool = c["enable.idempotence"]
        self.cluster = Cluster({**c, "default.api.timeout.ms": c["max.block.ms"]})
        self.accumulator = RecordAccumulator(
            c["batch.size"], c["linger.ms"],
            guarantee_order=self.idempotent or c["max.in.flight.requests.per.connection"] == 1,
        )
        self.partitioner = StickyPartitioner(c["batch.size"])
        self.producer_id = -1
        self.producer_epoch = -1
        self._sequences: dict[TopicPartition, int] = {}
        self._in_flight_per_node: dict[int, int] = {}
        self._wakeup = asyncio.Event()
        self._sender: asyncio.Task[None] | None = None
        # Records sent but not yet resolved; flush() waits for zero. A counter, not a set of
        # futures with done-callbacks: callbacks cost a loop iteration per record.
        self._unresolved = 0
        self._all_resolved = asyncio.Event()
        self._all_resolved.set()
        self._tasks: set[asyncio.Task[Any]] = set()
        # Records of topics whose metadata is not known yet, in send order, per topic.
        self._awaiting_metadata: dict[str, list[tuple[
            int | None, bytes | None, bytes | None, list[Header], int,
            asyncio.Future[RecordMetadata]]]] = {}
        self._closed = False
        self._fatal: BaseException | None = None
        self._started = False
        self._refreshing = False
        self.txn = None if tid is None else TransactionManager(self, tid)

    # --- lifecycle ------------------------------------------------------------------------

    async def start(self) -> Producer:
        """Connect, load metadata and (with idempotence) obtain a producer id."""
        if self._started:
            return self
        await self.cluster.start()
        if self.idempotent and self.txn is None:
            await self._init_producer_id()
        self._sender = asyncio.create_task(self._run_sender(), name="moldau-producer-sender")
        self._started = True
        return self

    async def __aenter__(self) -> Producer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def flush(self, timeout: float | None = None) -> None:
        """Send everything buffered now (ignoring linger.ms) and wait for every answer."""
        self.accumulator.flushing += 1
        self._wakeup.set()
        try:
            async with asyncio.timeout(timeout):
                await self._all_resolved.wait()
        finally:
            self.accumulator.flushing -= 1

    async def close(self, timeout: float | None = None) -> None:
        """Flush, stop the sender and close connections."""
        if self._closed:
            return
        try:
            if self._started:
                await self.flush(timeout)
        finally:
            self._closed = True
            if self.txn is not None:
                self.txn.close()
            if self._sender is not None:
                self._sender.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._sender
            for task in list(self._tasks):
                task.cancel()
            for batch in list(self.accumulator.batches()):
                batch.fail(ClientError("producer closed before the record was sent"))
            self._all_resolved.set()
            await self.cluster.close()

    # --- sending --------------------------------------------------------------------------

    def send(
        self,
        topic: str,
        value: bytes | str | None,
        key: bytes | str | None = None,
        headers: Sequence[Header] | Mapping[str, bytes | None] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> asyncio.Future[RecordMetadata]:
        """Queue one record; the returned future resolves to its RecordMetadata.

        The record is batched per partition and sent after ``linger.ms`` or when its batch
        is full. Without ``partition``, keyed records go to murmur2(key) % partitions and
        unkeyed ones to the sticky partition. Strings are encoded as UTF-8.
        """
        if self._closed:
            raise ClientError("send() on a closed producer")
        if not self._started:
            raise ClientError("call await producer.start() (or use async with) before send()")
        if self._fatal is not None:
            raise self._fatal
        if self.txn is not None:
            self.txn.check_send()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[RecordMetadata] = loop.create_future()
        key_b = _as_bytes(key, "key")
        value_b = _as_bytes(value, "value")
        if headers is None:
            hdrs: list[Header] = []
        elif isinstance(headers, Mapping):
            hdrs = [(k, _as_bytes(v, "header value")) for k, v in headers.items()]
        else:
            hdrs = [(k, _as_bytes(v, "header value")) for k, v in headers]
        ts = timestamp_ms if timestamp_ms is not None else int(time.time() * 1000)
        self._unresolved += 1
        self._all_resolved.clear()
        waiting = self._awaiting_metadata.get(topic)
        if waiting is not None:
            # Records before this one still wait for the topic's metadata: queue behind
            # them, or this record would be appended (and get an offset) ahead of them.
            waiting.append((partition, key_b, value_b, hdrs, ts, future))
        elif topic in self.cluster.topics and self.cluster.topics[topic].partitions:
            self._append(topic, partition, key_b, value_b, hdrs, ts, future)
        else:
            self._awaiting_metadata[topic] = [(partition, key_b, value_b, hdrs, ts, future)]
            spawn(self._tasks, self._append_after_metadata(topic))
        return future

    async def send_and_wait(self, topic: str, value: bytes | str | None,
                            **kwargs: Any) -> RecordMetadata:
        """``await send(...)`` in one call."""
        return await self.send(topic, value, **kwargs)

    async def _append_after_metadata(self, topic: str) -> None:
        """Wait for ``topic``'s metadata, then append every record queued for it, in order.

        The queue is emptied without an await in between, so a send() that comes after
        finds the topic known and no queue, and appends behind these records.
        """
        error: BaseException | None = None
        try:
            await self.cluster.wait_for_topics([topic], self.config["max.block.ms"])
        except Exception as exc:
            error = exc
        except asyncio.CancelledError:
            error = ClientError("producer closed before the topic's metadata arrived")
            raise
        finally:
            waiting = self._awaiting_metadata.pop(topic, [])
            for partition, key, value, headers, ts, future in waiting:
                if future.done():
                    continue
                if error is None:
                    try:
                        self._append(topic, partition, key, value, headers, ts, future)
                        continue
                    except Exception as exc:  # keep going: later records need an answer
                        error = exc
                future.set_exception(error)
                self._resolved(1)

    def _resolved(self, count: int) -> None:
        self._unresolved -= count
        if self._unresolved <= 0:
            self._unresolved = 0
            self._all_resolved.set()

    def _append(
        self, topic: str, partition: int | None, key: bytes | None, value: bytes | None,
        headers: list[Header], ts: int, future: asyncio.Future[RecordMetadata],
    ) -> None:
        info = self.cluster.topics[topic]
        count = len(info.partitions)
        sticky = False
        if partition is None:
            if key is not None and not self.config["partitioner.ignore.keys"]:
                partition = partition_for_key(key, count)
            else:
                available = [p for p, i in info.partitions.items() if i.leader >= 0]
                partition = self.partitioner.partition(topic, available, count)
                sticky = True
        elif not 0 <= partition < count:
            future.set_exception(BrokerError(
                ErrorCode.unknown_topic_or_partition,
                f"topic {topic!r} has {count} partitions", f"send to {topic}-{partition}",
            ))
            self._resolved(1)
            return
        tp = TopicPartition(topic, partition)
        batch, full = self.accumulator.append(
            tp, key, value, headers, ts, future, time.monotonic()
        )
        if sticky:
            available = [p for p, i in info.partitions.items() if i.leader >= 0]
            self.partitioner.on_append(
                topic, partition, estimate_size(key, value, headers), available, count)
        if full or len(self.accumulator.queues[tp]) > 1 or self.accumulator.linger == 0:
            self._wakeup.set()
        elif len(batch.records) == 1:
            self._wakeup.set()  # the sender must learn the new linger deadline

    # --- idempotence ----------------------------------------------------------------------

    async def _init_producer_id(self) -> None:
        async def attempt() -> Any:
            conn = await self.cluster.any_connection()
            response = await conn.request(ApiKey.INIT_PRODUCER_ID, {
                "transactional_id": None,
                "transaction_timeout": self.config["transaction.timeout.ms"],
                "producer_id": -1,
                "producer_epoch": -1,
            })
            if response.error_code:
                raise BrokerError(response.error_code, context="InitProducerId")
            return response

        response = await call_with_retries(
            attempt, timeout_ms=self.config["max.block.ms"],
            initial_ms=self.config["retry.backoff.ms"],
            max_ms=self.config["retry.backoff.max.ms"], what="InitProducerId",
        )
        self.set_producer_id(response.producer_id, response.producer_epoch)

    def set_producer_id(self, producer_id: int, epoch: int) -> None:
        """A new producer id or epoch: sequences restart at 0 on every partition."""
        self.producer_id, self.producer_epoch = producer_id, epoch
        self._sequences.clear()

    def _assign_sequence(self, batch: ProducerBatch) -> None:
        if not self.idempotent or batch.encoded is not None:
            return
        seq = self._sequences.get(batch.tp, 0)
        batch.producer_id = self.producer_id
        batch.producer_epoch = self.producer_epoch
        batch.base_sequence = seq
        batch.transactional = self.txn is not None
        self._sequences[batch.tp] = (seq + len(batch.records)) & 0x7FFFFFFF

    # --- sender ---------------------------------------------------------------------------

    async def _run_sender(self) -> None:
        try:
            while True:
                now = time.monotonic()
                if self.cluster.metadata_stale() and not self._refreshing:
                    self._refreshing = True
                    spawn(self._tasks, self._refresh_metadata())
                self._expire(now)
                ready, next_time = self.accumulator.ready(now)
                sent_any = self._drain(ready)
                if sent_any:
                    await asyncio.sleep(0)
                    continue
                self._wakeup.clear()
                timeout = None if next_time is None else max(0.0, next_time - time.monotonic())
                if ready and timeout is None:
                    timeout = 0.05  # ready but blocked (no leader / in-flight limit)
                await wait_event(self._wakeup, timeout)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug: fail everything rather than hang forever
            log.exception("producer sender crashed")
            self._fatal = ClientError(f"producer sender crashed: {exc}")
            for batch in list(self.accumulator.batches()):
                batch.fail(self._fatal)
            self._all_resolved.set()

    def _expire(self, now: float) -> None:
        limit = self.config["delivery.timeout.ms"] / 1000
        for tp, queue in self.accumulator.queues.items():
            while queue and now - queue[0].created > limit and tp not in (
                self.accumulator.in_flight
            ):
                batch = queue.popleft()
                self._done(batch)
                batch.fail(exc := KafkaTimeoutError(
                    f"{len(batch.records)} record(s) for {tp} expired: not acknowledged "
                    f"within delivery.timeout.ms={self.config['delivery.timeout.ms']}"))
                if self.txn is not None:  # the transaction lost records: abort only
                    self.txn.on_batch_error(exc)

    def _drain(self, ready: list[TopicPartition]) -> bool:
        """Group ready batches by leader and start one Produce request per broker."""
        if not ready:
            return False
        max_in_flight = self.config["max.in.flight.requests.per.connection"]
        max_size = self.config["max.request.size"]
        by_node: dict[int, list[TopicPartition]] = {}
        refresh = False
        if self.txn is not None:  # partitions not yet in the transaction wait for the add
            ready = [tp for tp in ready if self.txn.may_send(tp)]
        for tp in ready:
            leader = self.cluster.leader_for(tp)
            if leader < 0:
                refresh = True
                continue
            by_node.setdefault(leader, []).append(tp)
        if refresh:
            spawn(self._tasks, self._refresh_metadata())
        sent = False
        for node, tps in by_node.items():
            if self._in_flight_per_node.get(node, 0) >= max_in_flight:
                continue
            batches: list[ProducerBatch] = []
            total = 0
            for tp in tps:
                head = self.accumulator.queues[tp][0]
                if batches and total + head.size > max_size:
                    break
                batch = self.accumulator.pop(tp)
                self._assign_sequence(batch)
                batch.encode(self.config["compression.type"])
                total += len(batch.encoded or b"")
                batches.append(batch)
                if self.accumulator.guarantee_order:
                    self.accumulator.in_flight.add(tp)
            if batches:
                self._in_flight_per_node[node] = self._in_flight_per_node.get(node, 0) + 1
                spawn(self._tasks, self._send_request(node, batches))
                sent = True
        return sent

    async def _refresh_metadata(self) -> None:
        try:
            await self.cluster.refresh()
        except Exception as exc:
            log.debug("metadata refresh failed: %s", exc)
        finally:
            self._refreshing = False
        self._wakeup.set()

    async def _send_request(self, node: int, batches: list[ProducerBatch]) -> None:
        acks = self.config["acks"]
        try:
            try:
                conn = await self.cluster.connection(node)
                version = conn.versions.require(ApiKey.PRODUCE, 3, what="Produce")
                topics: dict[str, list[ProducerBatch]] = {}
                for b in batches:
                    topics.setdefault(b.tp.topic, []).append(b)
                body = {
                    "transactional_id": self.txn.transactional_id if self.txn else None,
                    "acks": acks,
                    "timeout": self.config["request.timeout.ms"],
                    "topic_data": [{
                        "name": topic,
                        "topic_id": self.cluster.topic_id(topic),
                        "partition_data": [
                            {"index": b.tp.partition, "records": b.encoded} for b in bs
                        ],
                    } for topic, bs in topics.items()],
                }
                response = await conn.request(ApiKey.PRODUCE, body, version=version,
                                              expect_response=acks != 0)
            except Exception as exc:
                self._handle_failure(batches, exc)
                return
            if response is None:  # acks=0
                for b in batches:
                    self._done(b)
                    b.complete(-1)
                return
            self._handle_response(batches, response)
        finally:
            self._in_flight_per_node[node] -= 1
            self._wakeup.set()

    def _done(self, batch: ProducerBatch) -> None:
        self.accumulator.in_flight.discard(batch.tp)
        self.accumulator.release(batch)
        self._resolved(len(batch.records))

    def _handle_response(self, batches: list[ProducerBatch], response: Any) -> None:
        by_tp = {b.tp: b for b in batches}
        names = self.cluster.topic_names
        answered: set[TopicPartition] = set()
        for t in response.responses:
            name = t.name if getattr(t, "name", None) else names.get(getattr(t, "topic_id", None))
            for p in t.partition_responses:
                tp = TopicPartition(name, p.index)
                batch = by_tp.get(tp)
                if batch is None:
                    continue
                answered.add(tp)
                code = ErrorCode(p.error_code)
                if code in (ErrorCode.none, ErrorCode.duplicate_sequence_number):
                    append_time = getattr(p, "log_append_time", None)
                    la = -1
                    if append_time is not None and not isinstance(append_time, int):
                        la = int(append_time.timestamp() * 1000)
                    elif isinstance(append_time, int):
                        la = append_time
                    self._done(batch)
                    batch.complete(p.base_offset, la)
                    continue
                message = getattr(p, "error_message", None) or ""
                errors = getattr(p, "record_errors", ())
                if errors:
                    message += " " + "; ".join(
                        f"record {e.batch_index}: {e.batch_index_error_message}" for e in errors
                    )
                self._handle_failure([batch], BrokerError(code, message.strip(),
                                                          f"produce to {tp}"))
        missing = [b for tp, b in by_tp.items() if tp not in answered]
        if missing:
            self._handle_failure(missing, BrokerError(
                ErrorCode.unknown_server_error, "the broker did not answer for this partition",
                "produce",
            ))

    def _handle_failure(self, batches: list[ProducerBatch], exc: BaseException) -> None:
        code = exc.code if isinstance(exc, BrokerError) else None
        if code in _FATAL_PRODUCER_ERRORS or (self.txn and code in _RESET_PRODUCER_ERRORS):
            # In a transaction a reset error is abortable; the abort bumps the epoch.
            fatal = ProducerFenced(code, "", "producer") if code in (
                ErrorCode.producer_fenced, ErrorCode.invalid_producer_epoch) else exc
            if code in _FATAL_PRODUCER_ERRORS:
                self._fatal = fatal
            for b in batches:
                self._done(b)
                b.fail(fatal)
            if self.txn is not None:
                self.txn.on_batch_error(fatal)
            return
        now = time.monotonic()
        deadline = self.config["delivery.timeout.ms"] / 1000
        reset = code in _RESET_PRODUCER_ERRORS and self.idempotent
        retriable = reset or bool(getattr(exc, "retriable", False))
        if code in STALE_METADATA_ERRORS or not isinstance(exc, BrokerError):
            spawn(self._tasks, self._refresh_metadata())
        if reset:
            spawn(self._tasks, self._reset_producer_id())
        for b in batches:
            b.attempts += 1
            if (
                retriable and b.attempts <= self.config["retries"]
                and now - b.created < deadline and not self._closed
            ):
                b.retry_after = now + backoff_ms(
                    b.attempts - 1, self.config["retry.backoff.ms"],
                    self.config["retry.backoff.max.ms"]) / 1000
                if reset:
                    b.reset_producer()
                self.accumulator.in_flight.discard(b.tp)
                self.accumulator.requeue(b)
                log.debug("retrying %s after %s (attempt %d)", b.tp, exc, b.attempts)
            else:
                self._done(b)
                b.fail(exc)
                if self.txn is not None:
                    self.txn.on_batch_error(exc)

    def _abort_undrained(self, exc: BaseException) -> None:
        """Fail every batch never sent (a retried one keeps its sequence and is awaited)."""
        for queue in self.accumulator.queues.values():
            for batch in [b for b in queue if b.encoded is None]:
                queue.remove(batch)
                self._done(batch)
                batch.fail(exc)

    # --- transactions (logic in .transactions) --------------------------------------------

    def _transactional(self) -> TransactionManager:
        if self.txn is None:
            raise ConfigError("transactions need transactional.id in the producer config")
        return self.txn

    async def init_transactions(self) -> None:
        """Register transactional.id with its coordinator, fencing earlier producers."""
        await self._transactional().init_transactions()

    def begin_transaction(self) -> None:
        """Start a transaction: records sent until commit/abort belong to it."""
        self._transactional().begin_transaction()

    async def send_offsets_to_transaction(
        self, offsets: Mapping[TopicPartition, Any],
        group_metadata: ConsumerGroupMetadata | str,
    ) -> None:
        """Commit consumer offsets to the group atomically with the transaction."""
        await self._transactional().send_offsets_to_transaction(offsets, group_metadata)

    async def commit_transaction(self) -> None:
        """Flush and commit the transaction."""
        await self._transactional().commit_transaction()

    async def abort_transaction(self) -> None:
        """Drop unsent records and abort the transaction."""
        await self._transactional().abort_transaction()

    async def _reset_producer_id(self) -> None:
        """The broker lost our producer state: take a new id and renumber queued batches."""
        try:
            await self._init_producer_id()
        except Exception as exc:
            self._fatal = exc
        for batch in self.accumulator.batches():
            batch.reset_producer()
        self._wakeup.set()

    # --- introspection --------------------------------------------------------------------

    def partitions_for(self, topic: str) -> list[int]:
        """Partition numbers of ``topic`` as currently known."""
        return self.cluster.partitions_for(topic)

    @property
    def buffered_bytes(self) -> int:
        return self.accumulator.buffered_bytes


__all__ = ["Producer", "RecordMetadata"]
