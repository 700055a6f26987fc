"""Consumer: manual assignment, positions, prefetching poll, column fast path.

``assign()`` partitions, optionally ``seek()``, then ``poll()`` (or ``async for``) returns
:class:`ConsumerRecord`s; ``poll_batches()`` returns whole batches as columns, the fast
path for bulk readers such as the PySpark source. Fetching runs in the background
(:mod:`.fetcher`), so records are usually decoded from data that is already here.

With ``group.id`` the consumer joins a consumer group: ``subscribe()`` topics (or a
pattern) and the group shares their partitions among its members (``moldau.client.group``;
the classic protocol, or KIP-848's with ``group.protocol=consumer``); ``commit()`` stores
positions in the group, synchronously or not; rebalance callbacks say what changed. The
membership plugs in through :class:`GroupMembership`: the consumer calls ``on_poll`` while
polling and ``close`` on shutdown; the membership drives the assignment and reads positions
for commits. Without subscribe(), ``group.id`` still serves commit()/committed() of
assign()ed partitions ("simple" commits, generation -1).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any, Protocol

from .cluster import Cluster
from .config import parse_config
from .decode import BatchColumns
from .errors import BrokerError, ClientError, ConfigError, KafkaTimeoutError
from .fetcher import Fetcher, take_batches
from .group.listener import Callback, RebalanceListener, make_listener
from .group.membership import CommitCallback, GroupMember
from .group.subscription import TopicSubscription
from .group.types import OffsetAndMetadata
from .leaders import list_offsets
from .retry import wait_event
from .subscription import EARLIEST, LATEST, SubscriptionState
from .types import ConsumerGroupMetadata, ConsumerRecord, TopicPartition


class GroupMembership(Protocol):
    """What the group layer provides to a Consumer (see module docstring)."""

    async def on_poll(self, consumer: Consumer) -> None:
        """Rebalance work due while polling (runs listeners; raises fatal group errors)."""

    async def commit(self, consumer: Consumer,
                     offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None,
                     asynchronous: bool = False, callback: CommitCallback | None = None
                     ) -> Any:
        """Commit ``offsets`` (default: current positions)."""

    async def close(self, consumer: Consumer) -> None:
        """Commit (auto-commit), revoke, leave the group."""


def _membership(consumer: Consumer) -> GroupMember:
    from .group import make_membership

    return make_membership(consumer)


class Consumer:
    """Asynchronous Kafka consumer (manual assignment; groups via ``moldau.client.group``)."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = parse_config("consumer", config)
        self.cluster = Cluster(self.config)
        self.subscription = SubscriptionState(self.config["auto.offset.reset"])
        self.fetcher = Fetcher(self.cluster, self.subscription, self.config)
        self.group: GroupMember | None = None
        if self.config["group.id"] is not None:
            self.group = _membership(self)
            self.fetcher.committed_lookup = self._committed_for_assigned
        self._read_committed = self.config["isolation.level"] == "read_committed"
        self._started = False
        self._closed = False
        self._rotation = 0

    # --- lifecycle ------------------------------------------------------------------------

    async def start(self) -> Consumer:
        """Connect to the cluster and start background fetching."""
        if not self._started:
            await self.cluster.start()
            self.fetcher.start()
            self._started = True
        return self

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.group is not None:
            await self.group.close(self)
        await self.fetcher.close()
        await self.cluster.close()

    async def __aenter__(self) -> Consumer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- assignment and positions ---------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Read exactly these partitions (replaces the previous assignment)."""
        if self.group is not None and self.group.subscribed:
            raise ClientError("assign() on a consumer that subscribe()d: the group decides "
                              "its partitions; call unsubscribe() first")
        self._group_assign(TopicPartition(*tp) for tp in partitions)

    def _group_assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Set the assignment (the group layer's entry; keeps positions of kept partitions)."""
        tps = [TopicPartition(*tp) for tp in partitions]
        self.subscription.assign(tps)
        self.cluster.add_topics({tp.topic for tp in tps})
        self.fetcher.wakeup()

    def assignment(self) -> set[TopicPartition]:
        return set(self.subscription.partitions)

    async def _committed_for_assigned(self, partitions: list[TopicPartition]
                                      ) -> dict[TopicPartition, int | None]:
        """Committed offsets for the fetcher to start hand-assigned partitions from; a
        subscribed group positions its partitions itself when it assigns them."""
        if self.group is None or self.group.subscribed:
            return {}
        found = await self.group.committed(partitions)
        return {tp: (None if v is None else v.offset) for tp, v in found.items()}

    def seek(self, partition: TopicPartition | tuple[str, int], offset: int) -> None:
        """Make ``offset`` the next record returned for ``partition``."""
        if offset < 0:
            raise ValueError(f"seek offset must be >= 0, not {offset}; use seek_to_end()")
        self.subscription.state(TopicPartition(*partition)).seek(offset)
        self.fetcher.wakeup()

    def seek_to_beginning(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """Move to the log start offset (resolved lazily by the next fetch or position())."""
        for tp in self._targets(partitions):
            self.subscription.state(tp).request_reset(EARLIEST)
        self.fetcher.wakeup()

    def seek_to_end(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """Move to the high watermark (or last stable offset with read_committed)."""
        for tp in self._targets(partitions):
            self.subscription.state(tp).request_reset(LATEST)
        self.fetcher.wakeup()

    def _targets(self, partitions: Iterable[TopicPartition] | None) -> list[TopicPartition]:
        if partitions is None:
            return list(self.subscription.partitions)
        return [TopicPartition(*tp) for tp in partitions]

    async def position(self, partition: TopicPartition | tuple[str, int],
                       timeout: float | None = None) -> int:
        """Offset of the next record poll() will return for ``partition``."""
        tp = TopicPartition(*partition)
        state = self.subscription.state(tp)
        deadline = time.monotonic() + (
            timeout if timeout is not None else self.config["default.api.timeout.ms"] / 1000
        )
        while state.position is None:
            if state.error is not None:
                raise state.error
            self.fetcher.wakeup()
            self.fetcher.data_ready.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                raise KafkaTimeoutError(f"position of {tp} not known within the time limit")
            try:
                async with asyncio.timeout(left):
                    await self._position_changed(state)
            except TimeoutError:
                continue
        return state.position

    async def _position_changed(self, state: Any) -> None:
        while state.position is None and state.error is None:
            await asyncio.sleep(0.005)

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop fetching these partitions (buffered records are still returned)."""
        for tp in partitions:
            self.subscription.state(TopicPartition(*tp)).paused = True

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self.subscription.state(TopicPartition(*tp)).paused = False
        self.fetcher.wakeup()

    def highwater(self, partition: TopicPartition) -> int:
        """End of what this consumer may read, as of the last fetch (-1 before any): the high
        watermark, or with read_committed the last stable offset (so lag = LSO - position,
        as the Java client computes it)."""
        state = self.subscription.state(TopicPartition(*partition))
        if self._read_committed and state.last_stable_offset >= 0:
            return state.last_stable_offset
        return state.high_watermark

    # --- offsets lookups ------------------------------------------------------------------

    async def _list(self, specs: Mapping[TopicPartition, int]) -> dict[TopicPartition, Any]:
        raw = await list_offsets(
            self.cluster, {TopicPartition(*tp): v for tp, v in specs.items()},
            isolation_level=1 if self._read_committed else 0,
            timeout_ms=self.config["default.api.timeout.ms"],
        )
        for value in raw.values():
            if isinstance(value, BrokerError):
                raise value
        return raw

    async def beginning_offsets(self, partitions: Iterable[TopicPartition]
                                ) -> dict[TopicPartition, int]:
        raw = await self._list({tp: -2 for tp in partitions})
        return {tp: v[0] for tp, v in raw.items()}

    async def end_offsets(self, partitions: Iterable[TopicPartition]
                          ) -> dict[TopicPartition, int]:
        raw = await self._list({tp: -1 for tp in partitions})
        return {tp: v[0] for tp, v in raw.items()}

    async def offsets_for_times(self, timestamps: Mapping[TopicPartition, int]
                                ) -> dict[TopicPartition, tuple[int, int] | None]:
        """First offset with timestamp >= the given one: (offset, timestamp) or None."""
        raw = await self._list(dict(timestamps))
        return {tp: (v[0], v[1]) if v[0] >= 0 else None for tp, v in raw.items()}

    # --- polling --------------------------------------------------------------------------

    async def poll_batches(
        self, timeout: float = 1.0, max_records: int | None = None
    ) -> list[tuple[TopicPartition, BatchColumns]]:
        """Records as columns per batch, up to ``max_records`` (default max.poll.records).

        Waits up to ``timeout`` seconds for data; returns [] when none arrived. Raises the
        first partition error (e.g. OffsetOutOfRangeError with auto.offset.reset=none).
        """
        if not self._started:
            raise ClientError("call await consumer.start() (or use async with) before poll()")
        limit = max_records or self.config["max.poll.records"]
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            if self.group is not None:
                # Each round, so a rebalance finishing while poll() waits applies at once.
                await self.group.on_poll(self)
            result = self._collect(limit)
            if result:
                self.fetcher.wakeup()
                return result
            left = deadline - time.monotonic()
            if left <= 0:
                return []
            self.fetcher.data_ready.clear()
            if any(s.has_data for s in self.subscription.partitions.values()):
                continue
            if not await wait_event(self.fetcher.data_ready, left):
                return []

    def _collect(self, limit: int) -> list[tuple[TopicPartition, BatchColumns]]:
        states = [s for s in self.subscription.partitions.values() if s.has_data]
        if not states:
            return []
        # Rotate the starting partition so no partition starves the others.
        self._rotation = (self._rotation + 1) % len(states)
        states = states[self._rotation:] + states[:self._rotation]
        out: list[tuple[TopicPartition, BatchColumns]] = []
        taken = 0
        for state in states:
            if state.error is not None and not state.buffer and not state.leftover:
                if out:
                    break
                error, state.error = state.error, None
                if isinstance(error, BrokerError) and state.position is None:
                    state.reset = None
                raise error
            if taken >= limit:
                break
            batches, n = take_batches(
                state, limit - taken, self.config["check.crcs"], self._read_committed
            )
            taken += n
            out.extend((state.tp, b) for b in batches)
        return out

    async def poll(self, timeout: float = 1.0, max_records: int | None = None
                   ) -> list[ConsumerRecord]:
        """Up to ``max_records`` (default max.poll.records) records; [] after ``timeout``."""
        batches = await self.poll_batches(timeout, max_records)
        records: list[ConsumerRecord] = []
        append = records.append
        new = tuple.__new__
        for tp, cols in batches:
            topic, partition, ttype = tp.topic, tp.partition, cols.timestamp_type
            headers = cols.headers
            if headers is None:
                empty: list[Any] = []
                for off, ts, k, v in zip(cols.offsets, cols.timestamps, cols.keys, cols.values,
                                         strict=True):
                    append(new(ConsumerRecord, (topic, partition, off, ts, ttype, k, v, empty)))
            else:
                for off, ts, k, v, h in zip(cols.offsets, cols.timestamps, cols.keys,
                                            cols.values, headers, strict=True):
                    append(new(ConsumerRecord, (topic, partition, off, ts, ttype, k, v, h)))
        return records

    async def __aiter__(self) -> AsyncIterator[ConsumerRecord]:
        while not self._closed:
            for record in await self.poll(1.0):
                yield record

    # --- groups ---------------------------------------------------------------------------

    def _require_group(self, what: str) -> GroupMember:
        if self.group is None:
            raise ConfigError(f"{what} needs group.id: set it in the consumer config")
        return self.group

    def subscribe(
        self,
        topics: Iterable[str] | str | re.Pattern[str],
        listener: RebalanceListener | None = None,
        *,
        on_assign: Callback | None = None,
        on_revoke: Callback | None = None,
        on_lost: Callback | None = None,
    ) -> None:
        """Join ``group.id`` and read the given topics, or the topics a pattern matches
        (``re.compile(...)``, or a name starting with ``^`` as librdkafka takes it).

        The group shares the topics' partitions among its members; the join happens in
        poll(). Rebalance callbacks (see :mod:`moldau.client.group.listener`): a
        :class:`RebalanceListener`, or ``on_assign``/``on_revoke``/``on_lost`` functions
        (plain or async) taking the set of partitions. Subscribing again replaces the
        subscription (and rebalances).
        """
        group = self._require_group("subscribe()")
        subscription = TopicSubscription.parse(topics)
        if not group.subscribed and self.subscription.partitions:
            raise ClientError("subscribe() on a consumer with assign()ed partitions; "
                              "assign([]) first")
        group.subscribe(subscription, make_listener(listener, on_assign, on_revoke, on_lost))
        self.fetcher.wakeup()

    async def unsubscribe(self) -> None:
        """Give up every partition (on_revoke, auto-commit) and leave the group."""
        if self.group is not None and self.group.subscribed:
            await self.group.unsubscribe()

    def subscription_topics(self) -> set[str]:
        """The subscribed topic names (for a pattern: those it matched at the last join)."""
        if self.group is None or self.group.subscription is None:
            return set()
        return self.group.subscribed_topics()

    async def commit(
        self,
        offsets: Mapping[TopicPartition | tuple[str, int], int | OffsetAndMetadata] | None = None,
        *,
        asynchronous: bool = False,
        callback: CommitCallback | None = None,
    ) -> Any:
        """Commit offsets to the group: by default the current positions (the offsets after
        the records poll() returned), else ``{partition: offset or OffsetAndMetadata}``
        (offset = the next record to read; metadata strings are stored with it).

        Synchronous (default): returns ``{partition: OffsetAndMetadata}`` once the group has
        them; raises CommitFailedError when the group rebalanced and this member lost its
        partitions, RebalanceInProgressError during a rebalance (poll(), then retry).
        ``asynchronous=True`` returns at once with a task; ``callback(offsets, error)`` runs
        when it completes. close() waits for commits in flight.
        """
        group = self._require_group("commit()")
        given = None if offsets is None else {TopicPartition(*tp): v for tp, v in offsets.items()}
        return await group.commit(self, given, asynchronous, callback)

    async def committed(self, partitions: Iterable[TopicPartition | tuple[str, int]]
                        ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets of ``partitions`` (None where nothing is committed)."""
        group = self._require_group("committed()")
        return await group.committed([TopicPartition(*tp) for tp in partitions])

    def group_metadata(self) -> ConsumerGroupMetadata:
        """The membership a transactional producer's send_offsets_to_transaction() needs
        (KIP-447): the group refuses offsets of a member that is no longer current."""
        group = self._require_group("group_metadata()")
        generation = getattr(group, "generation", getattr(group, "epoch", -1))
        if not group.subscribed:
            return ConsumerGroupMetadata(group.group_id, -1, "", group.instance_id)
        return ConsumerGroupMetadata(group.group_id, generation, group.member_id,
                                     group.instance_id)

    @property
    def member_id(self) -> str:
        """This consumer's member id in its group ("" before it joined)."""
        return self.group.member_id if self.group is not None else ""
