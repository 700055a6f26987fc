"""A coordinator on a manual clock and an in-memory log, for unit tests."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable
from dataclasses import replace
from typing import Any

from moldau.broker.group.classic import ClassicGroup, JoinResult, SyncResult
from moldau.broker.group.classic_protocol import JoinRequest
from moldau.broker.group.config import GroupConfig
from moldau.broker.group.consumer_group import member_records
from moldau.broker.group.coordinator import GroupCoordinator
from moldau.broker.group.offsets_log import MemoryOffsetsLog
from moldau.broker.group.partitioning import OFFSETS_TOPIC
from moldau.broker.group.timer import ManualTimer
from moldau.broker.metadata.image import MetadataImage
from moldau.broker.metadata.records import PartitionRecord, TopicRecord

PARTITIONS = 3
BASE_CONFIG = GroupConfig(offsets_topic_num_partitions=PARTITIONS,
                          initial_rebalance_delay_ms=0, min_session_timeout_ms=1000)


class World:
    """Image + log + timer + coordinator with every offsets partition loaded."""

    def __init__(self, config: GroupConfig = BASE_CONFIG, *,
                 log: MemoryOffsetsLog | None = None, timer: ManualTimer | None = None,
                 image: MetadataImage | None = None) -> None:
        self.config = config
        self.log = log or MemoryOffsetsLog()
        self.timer = timer or ManualTimer()
        self.image = image or MetadataImage()
        self._offset = 0
        if OFFSETS_TOPIC not in self.image.topics_by_name:
            self.add_topic(OFFSETS_TOPIC, config.offsets_topic_num_partitions)
        self.coordinator = GroupCoordinator(config, self.log, self.timer, node_id=1,
                                            image=lambda: self.image)

    def add_topic(self, name: str, partitions: int) -> uuid.UUID:
        topic_id = uuid.uuid4()
        self._replay(TopicRecord(name, topic_id))
        for p in range(partitions):
            self._replay(PartitionRecord(topic_id, p, [1], [1], 1))
        return topic_id

    def add_partitions(self, name: str, total: int) -> None:
        topic = self.image.topics_by_name[name]
        for p in range(len(topic.partitions), total):
            self._replay(PartitionRecord(topic.topic_id, p, [1], [1], 1))

    def _replay(self, record: Any) -> None:
        self._offset += 1
        self.image.replay(record, self._offset)

    def topic_id(self, name: str) -> uuid.UUID:
        return self.image.topics_by_name[name].topic_id

    async def start(self) -> World:
        for p in range(self.config.offsets_topic_num_partitions):
            await self.coordinator.load(p)
        return self

    def restarted(self) -> World:
        """A new coordinator over the same log (a broker restart)."""
        return World(self.config, log=self.log, timer=self.timer, image=self.image)

    def shard(self, group_id: str) -> Any:
        return self.coordinator.shard_of_group(group_id)

    async def advance(self, ms: int) -> None:
        """Move the clock and let callbacks and background writes run."""
        self.timer.advance(ms)
        await settle()

    # --- classic shortcuts -------------------------------------------------------------
    def join(self, group: str, member_id: str = "", *, instance: str | None = None,
             protocols: list[tuple[str, bytes]] | None = None, session: int = 10_000,
             rebalance: int = 30_000, protocol_type: str = "consumer",
             client: str = "client", version: int = 5) -> Any:
        req = JoinRequest(group, member_id, instance, session, rebalance, protocol_type,
                          protocols if protocols is not None else [("range", b"meta")],
                          client, "/127.0.0.1", require_known_member_id=version >= 4)
        return self.coordinator.classic.join(self.shard(group), req)

    def sync(self, group: str, generation: int, member_id: str,
             assignments: dict[str, bytes] | None = None, *, instance: str | None = None,
             protocol_type: str | None = None, protocol_name: str | None = None) -> Any:
        return self.coordinator.classic.sync(self.shard(group), group, generation, member_id,
                                             instance, protocol_type, protocol_name,
                                             assignments or {})

    def heartbeat(self, group: str, generation: int, member_id: str,
                  instance: str | None = None) -> int:
        return self.coordinator.classic.heartbeat(self.shard(group), group, generation,
                                                  member_id, instance)

    async def join_member(self, group: str, **kwargs: Any) -> str:
        """KIP-394 first join: returns the member id handed out."""
        first = self.join(group, **kwargs)
        assert isinstance(first, JoinResult) and first.error == 79, first
        return first.member_id


class GatedLog(MemoryOffsetsLog):
    """A log whose appends wait (in order) while :attr:`gate` is closed: a write in flight.
    With ``after_append`` the batch is in the log first and the wait is for the ISR (as
    ``PartitionOffsetsLog`` waits for the high watermark)."""

    def __init__(self, *, after_append: bool = False) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.gate.set()
        self.waiting = 0
        self.after_append = after_append

    async def append(self, partition: int, batch: bytes, *,
                     verification_guard: object | None = None) -> int:
        guard = verification_guard
        base = await super().append(partition, batch, verification_guard=guard) \
            if self.after_append else 0
        self.waiting += 1
        try:
            await self.gate.wait()
        finally:
            self.waiting -= 1
        if self.after_append:
            return base
        return await super().append(partition, batch, verification_guard=guard)


async def reloaded(world: World) -> World:
    """What a restarted coordinator loads from the same log (on its own clock, so its timers
    do not replace the running coordinator's)."""
    return await World(world.config, log=world.log, image=world.image).start()


def persisted(world: World, group_id: str) -> Any:
    """What a group's records say about it, read from the coordinator's memory: equal for a
    running coordinator and one loaded from the same log when memory follows the log.

    Left out: what Kafka keeps in memory only (a classic rebalance in progress, timers, a
    KIP-848 target assignment), state timestamps, and the epoch a KIP-848 group with members
    starts when it is loaded (``epoch_dirty``: counted back to the written one)."""
    shard = world.shard(group_id)
    offsets = {tp: (c.offset, c.leader_epoch, c.metadata, c.commit_timestamp,
                    c.expire_timestamp) for tp, c in shard.offsets.of(group_id).items()}
    group = shard.groups.get(group_id)
    if group is None:
        return None, offsets
    if isinstance(group, ClassicGroup):
        return ("classic", group.state.value,
                replace(group.to_record(), current_state_timestamp=0), offsets)
    members = {m: member_records(group_id, None, member)
               for m, member in sorted(group.members.items())}
    return ("consumer", group.group_epoch - int(group.epoch_dirty), members, offsets)


async def settle(rounds: int = 20) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)


async def result(answer: Any, world: World | None = None, advance_ms: int = 0) -> Any:
    """The value of a JoinGroup/SyncGroup answer (advancing the clock if needed)."""
    if isinstance(answer, (JoinResult, SyncResult)):
        return answer
    if world is not None and advance_ms:
        await world.advance(advance_ms)
    await settle()
    assert answer.done(), "the answer is still parked"
    return answer.result()


def run(coro: Awaitable[Any]) -> Any:
    return asyncio.run(coro)  # type: ignore[arg-type]


def cfg(**changes: Any) -> GroupConfig:
    return replace(BASE_CONFIG, **changes)
