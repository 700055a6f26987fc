"""The registry's store: the ``_schemas`` topic, read into a :class:`RegistryState`.

Like Confluent's ``KafkaStore``:

1. Start-up creates the topic when it is missing: compacted, one partition, replication
   factor ``kafkastore.topic.replication.factor`` (3) capped at the live brokers with a
   warning. An existing topic with more than one partition or without
   ``cleanup.policy=compact`` is refused (the registry's order and history depend on both).
2. A reader task consumes the topic from offset 0 for the registry's lifetime and replays
   every record into the state (:meth:`RegistryState.replay`).
3. :meth:`KafkaStore.sync` waits until the reader reached the end offset the topic had when
   it was called (one ListOffsets, on the admin client's connection, shared by the calls that
   arrive before it is sent); reads call it so they see every write acknowledged before
   them, wherever it was made.
4. :meth:`KafkaStore.write` produces with ``acks=all`` and an idempotent producer, then waits
   until the reader has replayed the records, and reports whether each was applied (a SCHEMA
   record whose id another schema took is ignored by the replay).

Both waits are bounded by ``kafkastore.timeout.ms`` (50002 when exceeded); start-up by
``kafkastore.init.timeout.ms``. :class:`MemoryStore` is the same seam without Kafka, for
unit tests of the service.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import time
from collections.abc import Sequence
from typing import Any, Protocol

from moldau.client import (
    AdminClient,
    AdminError,
    ClientError,
    ConfigResource,
    Consumer,
    NewTopic,
    OffsetSpec,
    Producer,
    TopicPartition,
)

from . import errors
from .config import RegistryConfig
from .records import (
    RecordError,
    RecordKey,
    RecordValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from .state import RegistryState

log = logging.getLogger("moldau.registry.store")

#: bytes a record may take in a produce request besides its key and value
_RECORD_OVERHEAD = 512


class Store(Protocol):
    """What the service needs of a store."""

    state: RegistryState

    async def sync(self) -> None:
        """Return once the state reflects every write acknowledged before the call."""

    async def write(self, records: Sequence[tuple[RecordKey, RecordValue | None]]
                    ) -> list[bool]:
        """Append the records in order, wait until they are replayed; per record whether
        the replay applied it."""


class MemoryStore:
    """A store without Kafka: records are replayed as they are written (unit tests)."""

    def __init__(self, state: RegistryState | None = None) -> None:
        self.state = state if state is not None else RegistryState()
        self.log: list[tuple[bytes, bytes | None]] = []

    async def sync(self) -> None:
        return None

    async def write(self, records: Sequence[tuple[RecordKey, RecordValue | None]]
                    ) -> list[bool]:
        applied = []
        for key, value in records:
            self.log.append((encode_key(key), encode_value(value)))
            raw_key, raw_value = self.log[-1]
            decoded = decode_key(raw_key)
            applied.append(self.state.replay(decoded, decode_value(decoded, raw_value)))
        return applied


class _Probe:
    """One ListOffsets for the end of the topic, shared by the syncs that join it before
    it is sent."""

    def __init__(self, future: asyncio.Future[int]) -> None:
        self.future = future
        self.sent = False


class KafkaStore:
    """The ``_schemas`` topic through :mod:`moldau.client` (see the module docstring)."""

    def __init__(self, config: RegistryConfig, state: RegistryState | None = None) -> None:
        self.config = config
        self.state = state if state is not None else RegistryState()
        self.topic: str = config["kafkastore.topic"]
        self.tp = TopicPartition(self.topic, 0)
        self.timeout = config["kafkastore.timeout.ms"] / 1000
        self.position = 0
        self.ready = asyncio.Event()  # set once the reader reached the end seen at start
        self.skipped = 0  # records that were not Confluent's format
        self._client = dict(config.client)
        self._admin: AdminClient | None = None
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None
        self._reader: asyncio.Task[None] | None = None
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()
        self._probe: _Probe | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._write_lock = asyncio.Lock()
        self._results: dict[int, bool] | None = None
        self._max_record = 1048576 - _RECORD_OVERHEAD

    # --- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Create or check the topic, start the reader and read the topic to its end;
        StoreError-like RegistryError (50001/50002) when that fails within
        ``kafkastore.init.timeout.ms``."""
        limit = self.config["kafkastore.init.timeout.ms"] / 1000
        deadline = time.monotonic() + limit
        try:
            async with asyncio.timeout(limit):
                await self._prepare_topic(deadline)
                self._producer = await Producer({
                    **self._client, "acks": "all", "enable.idempotence": True,
                    "linger.ms": 0, "max.block.ms": int(limit * 1000)}).start()
                self._max_record = (self._producer.config["max.request.size"]
                                    - _RECORD_OVERHEAD)
                self._consumer = await Consumer({
                    **self._client, "auto.offset.reset": "earliest",
                    "enable.auto.commit": False}).start()
                self._consumer.assign([self.tp])
                self._consumer.seek(self.tp, 0)
                self._reader = asyncio.create_task(self._read(), name="schemas-reader")
                end = await self._end_offset()
                await self._wait_position(end, None)
        except TimeoutError:
            await self.stop()
            raise errors.timeout(f"the registry could not read {self.topic} to its end within "
                                 f"kafkastore.init.timeout.ms={int(limit * 1000)}") from None
        except BaseException:
            await self.stop()
            raise
        self.ready.set()
        log.info("read %s to its end (offset %d): %d subject(s), %d schema id(s)",
                 self.topic, self.position, len(self.state.subjects), len(self.state.ids))

    async def _prepare_topic(self, deadline: float) -> None:
        while True:
            try:
                if self._admin is None:
                    self._admin = await AdminClient(
                        {**self._client, "default.api.timeout.ms": 15000}).start()
                await self._ensure_topic(self._admin)
                return
            except (ClientError, OSError) as exc:
                if isinstance(exc, errors.RegistryError) or time.monotonic() > deadline - 1:
                    raise
                log.warning("waiting for the Kafka cluster to create/check %s: %s",
                            self.topic, exc)
                await asyncio.sleep(1)

    async def _ensure_topic(self, admin: AdminClient) -> None:
        try:
            info = (await admin.describe_topics([self.topic]))[self.topic]
        except AdminError:
            info = None
        if info is None:
            wanted = self.config["kafkastore.topic.replication.factor"]
            live = len(await admin.describe_brokers())
            factor = min(wanted, max(live, 1))
            if factor < wanted:
                log.warning("creating %s with replication factor %d: "
                            "kafkastore.topic.replication.factor=%d but only %d broker(s) "
                            "are live", self.topic, factor, wanted, live)
            result = await admin.create_topics(
                [NewTopic(self.topic, 1, factor, {"cleanup.policy": "compact"})],
                raise_errors=False)
            error = result.get(self.topic)
            if error is not None and "TOPIC_ALREADY_EXISTS" not in str(error).upper():
                raise errors.store_error(f"cannot create {self.topic}: {error}")
            if error is None:
                log.info("created %s (compacted, 1 partition, replication factor %d)",
                         self.topic, factor)
            return
        if len(info.partitions) != 1:
            raise errors.store_error(
                f"the schema topic {self.topic} must have exactly 1 partition, it has "
                f"{len(info.partitions)}")
        resource = ConfigResource.topic(self.topic)
        entries = (await admin.describe_configs([resource], keys=["cleanup.policy"]))[resource]
        policy = entries.get("cleanup.policy")
        if policy is not None and policy.value != "compact":
            raise errors.store_error(
                f"the schema topic {self.topic} has cleanup.policy={policy.value}; it must "
                "be compact (retention would delete schemas)")

    async def stop(self) -> None:
        """Stop the reader and close the clients."""
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
        for task in list(self._tasks):
            task.cancel()
        for _, _, waiter in self._waiters:
            if not waiter.done():
                waiter.set_exception(errors.store_error("the registry is shutting down"))
        self._waiters.clear()
        for client in (self._producer, self._consumer, self._admin):
            if client is not None:
                try:
                    await client.close()
                except Exception as exc:  # closing: nothing left to do with the error
                    log.debug("closing %s: %s", type(client).__name__, exc)
        self._producer = self._consumer = self._admin = None

    # --- the reader ------------------------------------------------------------------------

    async def _read(self) -> None:
        assert self._consumer is not None
        consumer = self._consumer
        while True:
            try:
                batches = await consumer.poll_batches(timeout=1.0)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.error("reading %s failed (retrying in 1 s): %s", self.topic, exc)
                await asyncio.sleep(1)
                continue
            for _tp, cols in batches:
                for offset, key, value in zip(cols.offsets, cols.keys, cols.values,
                                              strict=True):
                    self._apply(offset, key, value)
            position = consumer.subscription.state(self.tp).position
            if position is not None and position > self.position:
                self.position = position
            self._wake()

    def _apply(self, offset: int, key: bytes | None, value: bytes | None) -> None:
        applied = False
        try:
            if key is None:
                raise RecordError("record without a key")
            decoded = decode_key(key)
            applied = self.state.replay(decoded, decode_value(decoded, value))
        except RecordError as exc:
            self.skipped += 1
            log.error("skipping %s offset %d: %s", self.topic, offset, exc)
        if self._results is not None:
            self._results[offset] = applied
        self.position = max(self.position, offset + 1)

    def _wake(self) -> None:
        while self._waiters and self._waiters[0][0] <= self.position:
            _, _, waiter = heapq.heappop(self._waiters)
            if not waiter.done():
                waiter.set_result(None)

    async def _wait_position(self, target: int, timeout: float | None) -> None:
        if self.position >= target:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (target, next(self._seq), waiter))
        async with asyncio.timeout(timeout):
            await waiter

    # --- the two waits ---------------------------------------------------------------------

    def _end_offset(self) -> asyncio.Future[int]:
        probe = self._probe
        if probe is None or probe.sent:
            probe = _Probe(asyncio.get_running_loop().create_future())
            self._probe = probe
            task = asyncio.create_task(self._send_probe(probe))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return asyncio.shield(probe.future)

    async def _send_probe(self, probe: _Probe) -> None:
        # Through the admin client's connection: the consumer's has a long-polling Fetch in
        # front, and a broker answers a connection's requests in order.
        probe.sent = True
        try:
            assert self._admin is not None
            ends = await self._admin.list_offsets({self.tp: OffsetSpec.LATEST})
            probe.future.set_result(ends[self.tp].offset)  # type: ignore[union-attr]
        except Exception as exc:
            probe.future.set_exception(exc)
            probe.future.exception()  # retrieved: a probe nobody awaits any more is fine

    async def sync(self) -> None:
        """Wait until the reader reached the topic's end as of now (50002 after
        ``kafkastore.timeout.ms``, 50001 when the end cannot be learned)."""
        try:
            async with asyncio.timeout(self.timeout):
                end = await self._end_offset()
                await self._wait_position(end, None)
        except TimeoutError:
            raise errors.timeout(f"the registry did not catch up with {self.topic} within "
                                 f"kafkastore.timeout.ms") from None
        except ClientError as exc:
            raise errors.store_error(f"cannot read the end of {self.topic}: {exc}") from exc

    async def write(self, records: Sequence[tuple[RecordKey, RecordValue | None]]
                    ) -> list[bool]:
        """Produce ``records`` in order and wait until the reader replayed them."""
        if self._producer is None:
            raise errors.store_error("the registry's store is not started")
        encoded = [(encode_key(k), encode_value(v)) for k, v in records]
        for key, value in encoded:
            if len(key) + len(value or b"") > self._max_record:
                raise errors.RegistryError(errors.SCHEMA_TOO_LARGE,
                                           "Write failed because schema is too large")
        async with self._write_lock:
            self._results = {}
            try:
                return await self._write(encoded)
            finally:
                self._results = None

    async def _write(self, encoded: list[tuple[bytes, bytes | None]]) -> list[bool]:
        assert self._producer is not None
        try:
            async with asyncio.timeout(self.timeout):
                futures = [self._producer.send(self.topic, value, key=key, partition=0)
                           for key, value in encoded]
                offsets = [(await future).offset for future in futures]
        except TimeoutError:
            raise errors.timeout(f"write to {self.topic} timed out after "
                                 "kafkastore.timeout.ms") from None
        except ClientError as exc:
            raise errors.store_error(f"write to {self.topic} failed: {exc}") from exc
        try:
            await self._wait_position(offsets[-1] + 1, self.timeout)
        except TimeoutError:
            raise errors.timeout(f"the registry did not read back its write to {self.topic} "
                                 "within kafkastore.timeout.ms") from None
        results = self._results or {}
        return [results.get(offset, False) for offset in offsets]
