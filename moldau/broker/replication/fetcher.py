"""Followers: the replica fetcher manager and its fetcher tasks (Kafka's
``ReplicaFetcherManager`` / ``ReplicaFetcherThread``, as asyncio tasks).

A broker follows a partition when the metadata image names it among the partition's replicas
and another broker as leader (:meth:`ReplicaFetcherManager.sync` runs after every change the
replica manager applies, and after the fence is set or lifted). Its partitions are grouped by
leader and spread by a hash of the partition over ``num.replica.fetchers`` fetchers per leader;
each fetcher is one task with one connection (:mod:`moldau.wire`) to the leader's endpoint on
``inter.broker.listener.name``, and a fetcher whose last partition leaves stops.

A partition taken on under a new leader epoch first truncates (KIP-101 / KIP-279): the
follower asks the leader (OffsetsForLeaderEpoch) where its own latest epoch ends in the
leader's log, and removes what lies beyond, so no two replicas keep different records at the
same offset. Only then does it fetch, from its log end offset, with Fetch as Kafka's followers
send it (replica id, ``replica.fetch.*`` limits, a long poll of ``replica.fetch.wait.max.ms``).
The batches come back as the leader stored them and are appended as they are
(:meth:`~moldau.broker.partition.Partition.append_as_follower`); the follower's high watermark
is min(the leader's, its own log end offset).

Errors: a partition the leader refuses (not the leader any more, an epoch one side does not
know yet) waits ``replica.fetch.backoff.ms`` and tries again, by which time the metadata has
usually moved it to the right leader; a lost connection backs the whole fetcher off as long.
A fetch offset the leader does not have (OFFSET_OUT_OF_RANGE) is below its log start (the
follower restarts its log there) or past its end (only after an unclean election: the follower
truncates again).
"""

from __future__ import annotations

import asyncio
import logging
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, KafkaError
from ...storage.errors import KafkaStorageError
from ...wire.connection import BrokerConnection
from ...wire.errors import ClientError
from ..metadata.image import MetadataImage
from ..partition import Partition
from ..peers import peer_endpoint

log = logging.getLogger(__name__)

# Errors after which a partition's fetch position may be wrong: truncate again first.
_RETRUNCATE = {ErrorCode.fenced_leader_epoch, ErrorCode.unknown_leader_epoch}


@dataclass(frozen=True)
class FetcherSettings:
    """The ``replica.fetch.*`` keys a fetcher uses (milliseconds, bytes)."""

    num_fetchers: int = 1
    max_bytes: int = 1048576
    response_max_bytes: int = 10485760
    wait_max_ms: int = 500
    min_bytes: int = 1
    backoff_ms: int = 1000
    socket_timeout_ms: int = 30000

    @classmethod
    def from_config(cls, config: Any) -> FetcherSettings:
        return cls(config["num.replica.fetchers"], config["replica.fetch.max.bytes"],
                   config["replica.fetch.response.max.bytes"],
                   config["replica.fetch.wait.max.ms"], config["replica.fetch.min.bytes"],
                   config["replica.fetch.backoff.ms"], config["replica.socket.timeout.ms"])


@dataclass
class FollowerState:
    """One partition a fetcher replicates: the leader epoch it follows in, whether it must
    truncate before fetching, and until when it backs off (monotonic seconds)."""

    partition: Partition
    leader_epoch: int
    truncating: bool = True
    delayed_until: float = 0.0

    @property
    def key(self) -> tuple[str, int]:
        return self.partition.key


@dataclass
class ReplicaFetcher:
    """One fetcher task: the partitions this broker follows from ``leader_id`` that hash to
    ``fetcher_id``."""

    node_id: int
    leader_id: int
    fetcher_id: int
    image: MetadataImage
    listener: str
    settings: FetcherSettings
    states: dict[tuple[str, int], FollowerState] = field(default_factory=dict)
    task: asyncio.Task[None] | None = None
    _conn: BrokerConnection | None = None
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _round: int = 0

    def start(self) -> None:
        self.task = asyncio.ensure_future(self._run())

    def add(self, state: FollowerState) -> None:
        self.states[state.key] = state
        self._wake.set()

    def remove(self, key: tuple[str, int]) -> None:
        self.states.pop(key, None)

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # --- the loop --------------------------------------------------------------------------
    async def _run(self) -> None:
        backoff_s = self.settings.backoff_ms / 1000
        while True:
            try:
                ready = self._ready()
                if not ready:
                    await self._idle()
                    continue
                conn = await self._connection()
                truncating = [s for s in ready if s.truncating]
                if truncating:
                    await self._truncate(conn, truncating)
                    continue
                await self._fetch(conn, ready)
            except asyncio.CancelledError:
                raise
            except (ClientError, KafkaError, OSError) as exc:
                log.warning("replica fetcher %d of broker %d from broker %d: %s; retrying in "
                            "%d ms (replica.fetch.backoff.ms)", self.fetcher_id, self.node_id,
                            self.leader_id, exc, self.settings.backoff_ms)
                self._drop_connection()
                await asyncio.sleep(backoff_s)
            except Exception:
                log.exception("replica fetcher %d of broker %d from broker %d failed; "
                              "retrying in %d ms", self.fetcher_id, self.node_id,
                              self.leader_id, self.settings.backoff_ms)
                self._drop_connection()
                await asyncio.sleep(backoff_s)

    def _ready(self) -> list[FollowerState]:
        """The partitions to fetch now, in an order that rotates every round: only the first
        partition with data is sure to get a batch larger than its share of the response
        (KIP-74), so no partition may stay last."""
        now = time.monotonic()
        ready = [s for s in self.states.values() if s.delayed_until <= now]
        if len(ready) > 1:
            self._round += 1
            turn = self._round % len(ready)
            ready = ready[turn:] + ready[:turn]
        return ready

    async def _idle(self) -> None:
        """Nothing to fetch now: wait for a new partition or the end of the nearest delay."""
        self._wake.clear()
        now = time.monotonic()
        delays = [s.delayed_until - now for s in self.states.values()]
        timeout = max(min(delays), 0.0) if delays else None
        try:
            async with asyncio.timeout(timeout):
                await self._wake.wait()
        except TimeoutError:
            pass

    def _delay(self, state: FollowerState) -> None:
        state.delayed_until = time.monotonic() + self.settings.backoff_ms / 1000

    def _current(self, state: FollowerState) -> bool:
        """Whether ``state`` is still this fetcher's (the metadata may have moved it while a
        request was in flight)."""
        return self.states.get(state.key) is state

    # --- connection ------------------------------------------------------------------------
    async def _connection(self) -> BrokerConnection:
        if self._conn is not None and self._conn.connected:
            return self._conn
        self._drop_connection()
        peer = peer_endpoint(self.image, self.leader_id, self.listener, role="leader broker")
        conn = BrokerConnection(
            peer.host, peer.port, broker=peer,
            client_id=f"broker-{self.node_id}-fetcher-{self.fetcher_id}",
            request_timeout_ms=self.settings.socket_timeout_ms + self.settings.wait_max_ms,
            connect_timeout_ms=self.settings.socket_timeout_ms)
        await conn.connect()
        self._conn = conn
        return conn

    def _drop_connection(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # --- truncation (KIP-101 / KIP-279) ----------------------------------------------------
    async def _truncate(self, conn: BrokerConnection, states: list[FollowerState]) -> None:
        asking: list[tuple[FollowerState, int]] = []
        for state in states:
            latest = state.partition.log.latest_epoch()
            if latest is None:
                # No epochs (an empty log, or only what came before epochs were kept): the
                # committed part is all that is known to be the leader's.
                _truncate_to(state, state.partition.log.high_watermark, "no leader epochs")
                state.truncating = False
            else:
                asking.append((state, latest))
        if not asking:
            return
        by_topic: dict[str, list[dict[str, int]]] = {}
        for state, latest in asking:
            by_topic.setdefault(state.partition.topic, []).append({
                "partition": state.partition.index, "current_leader_epoch": state.leader_epoch,
                "leader_epoch": latest})
        body = {"replica_id": self.node_id, "topics": [
            {"topic": topic, "partitions": parts} for topic, parts in by_topic.items()]}
        response = await conn.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, body)
        answers = {(t.topic, p.partition): p for t in response.topics for p in t.partitions}
        for state, latest in asking:
            answer = answers.get(state.key)
            if not self._current(state):
                continue
            if answer is None or answer.error_code != ErrorCode.none:
                code = ErrorCode(answer.error_code) if answer is not None else None
                log.info("cannot truncate %s-%d yet: broker %d answered %s; retrying in %d ms",
                         *state.key, self.leader_id, code.name if code else "nothing",
                         self.settings.backoff_ms)
                self._delay(state)
                continue
            plog = state.partition.log
            target = truncation_offset(
                latest, answer.leader_epoch, answer.end_offset,
                log_end_offset=plog.log_end_offset, high_watermark=plog.high_watermark,
                own_end_for=lambda epoch, plog=plog: plog.end_offset_for_epoch(epoch)[1])
            if answer.leader_epoch < 0 or answer.end_offset < 0:
                why = f"the leader knows no epoch up to {latest}"
            else:
                why = (f"epoch {answer.leader_epoch} ends at {answer.end_offset} on leader "
                       f"broker {self.leader_id}")
            _truncate_to(state, target, why)
            state.truncating = False

    # --- fetch -----------------------------------------------------------------------------
    async def _fetch(self, conn: BrokerConnection, ready: list[FollowerState]) -> None:
        settings = self.settings
        version = conn.versions.require(ApiKey.FETCH)
        by_id = version >= 13
        topics: dict[Any, list[dict[str, Any]]] = {}
        sent: dict[tuple[Any, int], FollowerState] = {}
        for state in ready:
            partition = state.partition
            key: Any = partition.topic_id if by_id else partition.topic
            plog = partition.log
            topics.setdefault(key, []).append({
                "partition": partition.index, "current_leader_epoch": state.leader_epoch,
                "fetch_offset": plog.log_end_offset,
                "last_fetched_epoch": plog.latest_epoch() if plog.latest_epoch() is not None
                else -1,
                "log_start_offset": plog.log_start_offset,
                "partition_max_bytes": settings.max_bytes, "replica_directory_id": None})
            sent[(key, partition.index)] = state
        body: dict[str, Any] = {
            "replica_id": self.node_id,
            "replica_state": {"replica_id": self.node_id, "replica_epoch": -1},
            "max_wait": settings.wait_max_ms, "min_bytes": settings.min_bytes,
            "max_bytes": settings.response_max_bytes, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [],
            "rack_id": "", "cluster_id": None,
            "topics": [{"topic": key if not by_id else "",
                        "topic_id": key if by_id else None, "partitions": parts}
                       for key, parts in topics.items()]}
        response = await conn.request(ApiKey.FETCH, body, version=version)
        if response.error_code != ErrorCode.none:
            raise KafkaError(ErrorCode(response.error_code),
                             f"fetch answered {ErrorCode(response.error_code).name}")
        for topic in response.responses:
            key = topic.topic_id if by_id else topic.topic
            for answer in topic.partitions:
                state = sent.get((key, answer.partition_index))
                if state is not None and self._current(state):
                    self._apply(state, answer)

    def _apply(self, state: FollowerState, answer: Any) -> None:
        partition = state.partition
        code = ErrorCode(answer.error_code)
        if code == ErrorCode.none:
            records = answer.records
            try:
                partition.append_as_follower(bytes(records) if records else b"",
                                             answer.high_watermark)
                _follow_log_start(partition, answer.log_start_offset)
            except (KafkaError, KafkaStorageError, ValueError) as exc:
                log.error("appending what broker %d sent for %s-%d failed: %s; truncating "
                          "again in %d ms", self.leader_id, *state.key, exc,
                          self.settings.backoff_ms)
                state.truncating = True
                self._delay(state)
            return
        if code == ErrorCode.offset_out_of_range:
            plog = partition.log
            if 0 <= plog.log_end_offset < answer.log_start_offset:
                log.warning("%s-%d: the leader's log starts at %d, past this replica's end %d: "
                            "restarting the log there", *state.key, answer.log_start_offset,
                            plog.log_end_offset)
                plog.truncate_fully_and_start_at(answer.log_start_offset)
            else:
                state.truncating = True
            return
        if code in _RETRUNCATE:
            state.truncating = True
        log.info("broker %d refused the fetch of %s-%d: %s; retrying in %d ms", self.leader_id,
                 *state.key, code.name, self.settings.backoff_ms)
        self._delay(state)


def truncation_offset(follower_epoch: int, leader_epoch: int, leader_end_offset: int, *,
                      log_end_offset: int, high_watermark: int,
                      own_end_for: Callable[[int], int]) -> int:
    """Where a follower whose latest epoch is ``follower_epoch`` cuts its log, given the
    leader's OffsetsForLeaderEpoch answer (KIP-279): the leader's largest epoch at or below
    ours, ``leader_epoch``, ends at ``leader_end_offset`` there. Same epoch: keep up to that
    end. An older one: the leader never had our later epochs, so cut where that epoch ends on
    the leader or here (``own_end_for``), whichever is first. No epoch known to the leader
    (-1): fall back to the high watermark, all that is known to be committed. Never past the
    log end (nothing to cut)."""
    if leader_epoch < 0 or leader_end_offset < 0:
        return min(high_watermark, log_end_offset)
    target = min(leader_end_offset, log_end_offset)
    if leader_epoch != follower_epoch:
        target = min(target, own_end_for(leader_epoch))
    return target


def _follow_log_start(partition: Partition, leader_log_start: int) -> None:
    """Raise the follower's log start offset to the leader's (records deleted there, by
    DeleteRecords or retention, go here too), as far as this replica's high watermark."""
    plog = partition.log
    target = min(leader_log_start, plog.high_watermark)
    if target > plog.log_start_offset:
        plog.delete_records_before(target)


def _truncate_to(state: FollowerState, target: int, why: str) -> None:
    plog = state.partition.log
    end = plog.log_end_offset
    if target < end:
        plog.truncate_to(target)
        # After an unclean election this is the exact range of the records lost here (those
        # that had been acknowledged are lost for good; the new leader logged from where).
        log.warning("truncated %s-%d from %d to %d (%s): offsets %d..%d are not the leader's "
                    "and are dropped", *state.key, end, plog.log_end_offset, why, target,
                    end - 1)


class ReplicaFetcherManager:
    """Keeps one :class:`ReplicaFetcher` per (leader, fetcher id) for the partitions this
    broker follows, in line with the partitions' applied state."""

    def __init__(self, *, node_id: int, image: MetadataImage,
                 partitions: Callable[[], dict[tuple[str, int], Partition]],
                 listener: str, settings: FetcherSettings) -> None:
        self.node_id = node_id
        self.image = image
        self.partitions = partitions
        self.listener = listener
        self.settings = settings
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        # partition -> (leader, leader epoch, the fetcher's key) it is fetched under now
        self._assigned: dict[tuple[str, int], tuple[int, int, tuple[int, int]]] = {}
        self._closed = False
        self._stopping: set[asyncio.Future[None]] = set()

    def fetcher_id(self, key: tuple[str, int]) -> int:
        """Kafka's ``getFetcherId``: a stable hash of the partition, modulo the fetchers."""
        return zlib.crc32(f"{key[0]}-{key[1]}".encode()) % max(self.settings.num_fetchers, 1)

    def desired(self) -> dict[tuple[str, int], tuple[int, int, Partition]]:
        """The partitions to follow now: (leader, leader epoch, partition)."""
        out = {}
        for key, partition in self.partitions().items():
            if partition.is_leader or partition.leader < 0 or partition.leader == self.node_id:
                continue
            out[key] = (partition.leader, partition.leader_epoch, partition)
        return out

    def sync(self) -> None:
        """Start, move or stop following partitions as their applied state says."""
        if self._closed:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return  # applied again once the node runs (start-up replays before the loop)
        desired = self.desired()
        for key in list(self._assigned):
            leader, epoch, fkey = self._assigned[key]
            want = desired.get(key)
            if want is None or (want[0], want[1]) != (leader, epoch) \
                    or want[2] is not self._fetcher_partition(fkey, key):
                self._assigned.pop(key)
                fetcher = self.fetchers.get(fkey)
                if fetcher is not None:
                    fetcher.remove(key)
        for key, (leader, epoch, partition) in desired.items():
            if key in self._assigned:
                continue
            fkey = (leader, self.fetcher_id(key))
            fetcher = self.fetchers.get(fkey)
            if fetcher is None:
                fetcher = ReplicaFetcher(self.node_id, leader, fkey[1], self.image,
                                         self.listener, self.settings)
                self.fetchers[fkey] = fetcher
                fetcher.start()
                log.info("started replica fetcher %d from broker %d", fkey[1], leader)
            fetcher.add(FollowerState(partition, epoch))
            self._assigned[key] = (leader, epoch, fkey)
            log.info("following %s-%d from broker %d in leader epoch %d (log end %d)",
                     *key, leader, epoch, partition.log.log_end_offset)
        for fkey in [k for k, f in self.fetchers.items() if not f.states]:
            fetcher = self.fetchers.pop(fkey)
            stopping = asyncio.ensure_future(fetcher.stop())
            self._stopping.add(stopping)
            stopping.add_done_callback(self._stopping.discard)
            log.info("stopped replica fetcher %d from broker %d: it has no partitions left",
                     fkey[1], fkey[0])

    def _fetcher_partition(self, fkey: tuple[int, int], key: tuple[str, int]) -> Any:
        fetcher = self.fetchers.get(fkey)
        state = fetcher.states.get(key) if fetcher is not None else None
        return state.partition if state is not None else None

    async def close(self) -> None:
        """Stop every fetcher (before the logs close)."""
        self._closed = True
        fetchers, self.fetchers = list(self.fetchers.values()), {}
        self._assigned.clear()
        await asyncio.gather(*(f.stop() for f in fetchers), *self._stopping,
                             return_exceptions=True)

