"""Background fetching for the consumer: one Fetch in flight per broker, prefetching.

A manager task looks at the assigned partitions, resolves missing positions (the group's
committed offset when the consumer has a ``group.id`` and assigned partitions by hand, else
ListOffsets by ``auto.offset.reset``), and keeps one Fetch request in flight per leader broker
for the partitions whose prefetch buffer has room. Brokers are independent: a slow or
long-polling broker never holds back partitions led by another. Answers land, undecoded, in
each partition's buffer; :func:`take_batches` decodes them when the application polls.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections.abc import Awaitable, Callable
from typing import Any

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.records import batch as B

from .cluster import STALE_METADATA_ERRORS, Cluster
from .decode import BatchColumns, RecordDecodeError, batch_payload, decode_columns
from .errors import BrokerError, OffsetOutOfRangeError, RecordCorruptError
from .leaders import list_offsets
from .retry import backoff_ms, wait_event
from .subscription import EARLIEST, FetchedData, PartitionState, SubscriptionState
from .tasks import cancel_and_wait, spawn
from .types import TopicPartition

log = logging.getLogger(__name__)

_CONTROL_KEY = struct.Struct(">hh")
_ABORT = 0

CommittedLookup = Callable[[list[TopicPartition]], Awaitable[dict[TopicPartition, int | None]]]


class Fetcher:
    """Keeps prefetch buffers of assigned partitions filled."""

    def __init__(self, cluster: Cluster, subs: SubscriptionState, config: dict[str, Any]):
        self.cluster = cluster
        self.subs = subs
        self.config = config
        self.isolation = 1 if config["isolation.level"] == "read_committed" else 0
        # Prefetch up to two fetches' worth per partition before pausing it.
        self.max_buffered = 2 * config["max.partition.fetch.bytes"]
        self.data_ready = asyncio.Event()
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._busy_nodes: set[int] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._resetting = False
        self._refreshing = False
        self._attempts: dict[TopicPartition, int] = {}
        # Set by a consumer with group.id and manual assignment: committed offsets come
        # before auto.offset.reset for partitions that have no position yet.
        self.committed_lookup: CommittedLookup | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="moldau-fetcher")

    def wakeup(self) -> None:
        self._wakeup.set()

    async def close(self) -> None:
        await cancel_and_wait([self._task, *self._tasks])

    # --- manager --------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            self._wakeup.clear()
            next_check = self._schedule()
            await wait_event(self._wakeup, next_check)

    def _schedule(self) -> float:
        """Start resets and fetches that can run now; return seconds until the next look."""
        if self.subs.needs_position() and not self._resetting:
            self._resetting = True
            spawn(self._tasks, self._reset_positions())
        now = time.monotonic()
        by_node: dict[int, list[PartitionState]] = {}
        unknown_leader = False
        retry_in = 1.0
        for state in self.subs.partitions.values():
            if not state.fetchable(now, self.max_buffered):
                if state.retry_after > now:
                    retry_in = min(retry_in, state.retry_after - now)
                continue
            leader = self.cluster.leader_for(state.tp)
            if leader < 0:
                unknown_leader = True
                continue
            node = self._read_replica(state, leader, now)
            if node not in self._busy_nodes:
                by_node.setdefault(node, []).append(state)
        if unknown_leader or (self.cluster.metadata_stale() and not self._refreshing):
            self.cluster.add_topics(self.subs.topics())
            self._refreshing = True
            spawn(self._tasks, self._refresh())
            retry_in = min(retry_in, self.config["retry.backoff.ms"] / 1000)
        for node, states in by_node.items():
            self._busy_nodes.add(node)
            for s in states:
                s.in_flight = True
            spawn(self._tasks,
                  self._fetch(node, [(s, s.generation, s.fetch_offset) for s in states]))
        return retry_in

    def _read_replica(self, state: PartitionState, leader: int, now: float) -> int:
        """The broker to fetch ``state`` from: the preferred read replica the leader named
        (KIP-392) while it is fresh and known to the metadata, else the leader."""
        preferred = state.preferred_replica
        if preferred < 0:
            return leader
        if now >= state.preferred_until or preferred not in self.cluster.brokers:
            state.preferred_replica = -1
            return leader
        return preferred

    @staticmethod
    def _forget_replica(state: PartitionState) -> bool:
        """Go back to the leader (an error from the preferred replica); True if one was set."""
        had = state.preferred_replica >= 0
        state.preferred_replica = -1
        return had

    async def _refresh(self) -> None:
        try:
            await self.cluster.refresh()
        except Exception as exc:
            log.debug("metadata refresh failed: %s", exc)
        finally:
            self._refreshing = False
        await asyncio.sleep(self.config["retry.backoff.ms"] / 1000)
        self.wakeup()

    async def _reset_positions(self) -> None:
        try:
            pending = {s.tp: s for s in self.subs.needs_position()}
            if not pending:
                return
            generations = {tp: s.generation for tp, s in pending.items()}
            if not await self._apply_committed(pending):
                return
            # A seek() (or a new assignment) while the committed offsets were looked up
            # wins: those partitions are no longer this reset's to position.
            pending = {tp: s for tp, s in pending.items()
                       if s.generation == generations[tp] and s.position is None
                       and self.subs.partitions.get(tp) is s}
            for s in pending.values():
                if s.reset is None:
                    s.reset = self.subs.default_reset
            none = [s.tp for s in pending.values() if s.reset == "none"]
            for tp in none:
                state = pending.pop(tp)
                state.error = BrokerError(
                    ErrorCode.offset_out_of_range,
                    "no position and auto.offset.reset=none: seek() first",
                    f"consumer {tp}",
                )
                self.data_ready.set()
            if not pending:
                return
            specs = {tp: (-2 if s.reset == EARLIEST else -1) for tp, s in pending.items()}
            try:
                results = await list_offsets(
                    self.cluster, specs, isolation_level=self.isolation,
                    timeout_ms=self.config["default.api.timeout.ms"],
                )
            except Exception as exc:
                log.warning("offset reset failed, will retry: %s", exc)
                await asyncio.sleep(self.config["retry.backoff.ms"] / 1000)
                return
            for tp, result in results.items():
                state = self.subs.partitions.get(tp)
                if state is None or state.generation != generations[tp]:
                    continue
                if isinstance(result, BrokerError):
                    state.error = result
                    self.data_ready.set()
                else:
                    state.seek(result[0])
        finally:
            self._resetting = False
            self.wakeup()

    async def _apply_committed(self, pending: dict[TopicPartition, PartitionState]) -> bool:
        """Position partitions without an explicit reset at the group's committed offset
        (removing them from ``pending``). False when the lookup failed (retried later)."""
        implicit = [tp for tp, s in pending.items() if s.reset is None]
        if not implicit or self.committed_lookup is None:
            return True
        generations = {tp: pending[tp].generation for tp in implicit}
        try:
            committed = await self.committed_lookup(implicit)
        except Exception as exc:
            log.warning("fetching committed offsets failed, will retry: %s", exc)
            await asyncio.sleep(self.config["retry.backoff.ms"] / 1000)
            return False
        for tp, offset in committed.items():
            state = pending.get(tp)
            if offset is None or state is None:
                continue
            del pending[tp]
            if state.generation == generations[tp] and self.subs.partitions.get(tp) is state:
                state.seek(offset)
        return True

    # --- fetch ----------------------------------------------------------------------------

    async def _fetch(self, node: int,
                     planned: list[tuple[PartitionState, int, int | None]]) -> None:
        # Offsets and generations as scheduled: a seek before this task runs makes them stale.
        states = [s for s, _g, _o in planned]
        generations = {s.tp: g for s, g, _o in planned}
        offsets = {s.tp: o for s, _g, o in planned}
        try:
            conn = await self.cluster.connection(node)
            version = conn.versions.require(ApiKey.FETCH, 4, what="Fetch")
            if version >= 13 and any(self.cluster.topic_id(s.tp.topic) is None for s in states):
                version = 12  # the broker gave no topic ids; name topics instead
                conn.versions.require(ApiKey.FETCH, 12, what="Fetch by topic name")
            topics: dict[str, list[dict[str, Any]]] = {}
            for s in states:
                if s.generation != generations[s.tp] or offsets[s.tp] is None:
                    continue
                info = self.cluster.partition_info(s.tp)
                topics.setdefault(s.tp.topic, []).append({
                    "partition": s.tp.partition,
                    "current_leader_epoch": info.leader_epoch if info else -1,
                    "fetch_offset": offsets[s.tp],
                    "last_fetched_epoch": -1,
                    "log_start_offset": -1,
                    "partition_max_bytes": self.config["max.partition.fetch.bytes"],
                })
            if not topics:
                return
            max_wait = self.config["fetch.max.wait.ms"]
            response = await conn.request(ApiKey.FETCH, {
                "replica_id": -1,
                "max_wait": max_wait,
                "min_bytes": self.config["fetch.min.bytes"],
                "max_bytes": self.config["fetch.max.bytes"],
                "isolation_level": self.isolation,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [{
                    "topic": name, "topic_id": self.cluster.topic_id(name), "partitions": ps,
                } for name, ps in topics.items()],
                "forgotten_topics_data": [],
                "rack_id": self.config["client.rack"],
            }, version=version, timeout_ms=self.config["request.timeout.ms"] + max_wait)
            if response.error_code:
                raise BrokerError(response.error_code, context=f"Fetch from broker {node}")
            self._handle_response(response, generations, offsets)
        except Exception as exc:
            retriable = getattr(exc, "retriable", False)
            if not retriable:
                log.warning("fetch from broker %s failed: %s", node, exc)
            for s in states:
                self._forget_replica(s)
            self._backoff([s.tp for s in states], exc, refresh=True)
            if not retriable:
                for s in states:
                    if s.generation == generations[s.tp]:
                        s.error = exc
                self.data_ready.set()
        finally:
            for s in states:
                s.in_flight = False
            self._busy_nodes.discard(node)
            self.wakeup()

    def _backoff(self, tps: list[TopicPartition], exc: BaseException, refresh: bool) -> None:
        now = time.monotonic()
        for tp in tps:
            state = self.subs.partitions.get(tp)
            if state is None:
                continue
            attempt = self._attempts.get(tp, 0)
            self._attempts[tp] = attempt + 1
            state.retry_after = now + backoff_ms(
                attempt, self.config["retry.backoff.ms"], self.config["retry.backoff.max.ms"]
            ) / 1000
        if refresh:
            spawn(self._tasks, self._refresh())
        log.debug("fetch of %s backs off after %s", tps, exc)

    def _handle_response(self, response: Any, generations: dict[TopicPartition, int],
                         offsets: dict[TopicPartition, int | None]) -> None:
        names = self.cluster.topic_names
        got_data = False
        for t in response.responses:
            name = getattr(t, "topic", None) or names.get(getattr(t, "topic_id", None))
            if name is None:
                continue
            for p in t.partitions:
                tp = TopicPartition(name, p.partition_index)
                state = self.subs.partitions.get(tp)
                if state is None or state.generation != generations.get(tp):
                    continue  # unassigned or seeked while the fetch was in flight
                code = p.error_code
                preferred = getattr(p, "preferred_read_replica", -1)
                if code == ErrorCode.none and preferred >= 0:
                    # The leader names a replica to read from (client.rack): no records.
                    state.preferred_replica = preferred
                    state.preferred_until = (time.monotonic()
                                             + self.config["metadata.max.age.ms"] / 1000)
                    continue
                if code != ErrorCode.none and self._forget_replica(state) \
                        and code == ErrorCode.offset_out_of_range:
                    continue  # a follower behind the offset: ask the leader (KIP-392)
                if code == ErrorCode.none:
                    state.high_watermark = p.high_watermark
                    state.last_stable_offset = getattr(p, "last_stable_offset", -1)
                    state.log_start_offset = getattr(p, "log_start_offset", -1)
                    self._attempts.pop(tp, None)
                    records = p.records
                    if records:
                        next_offset = _next_offset(records)
                        if next_offset is None:
                            state.error = RecordCorruptError(
                                f"{tp}: fetch at offset {offsets[tp]} returned "
                                f"{len(records)} bytes without one complete batch; raise "
                                "max.partition.fetch.bytes above the largest batch"
                            )
                        else:
                            aborted = [
                                (a.first_offset, a.producer_id)
                                for a in (getattr(p, "aborted_transactions", None) or ())
                            ]
                            aborted.sort()
                            state.buffer.append(
                                FetchedData(tp, state.generation, bytes(records), 0, aborted)
                            )
                            state.buffered_bytes += len(records)
                            state.fetch_offset = max(next_offset, state.fetch_offset or 0)
                        got_data = True
                elif code == ErrorCode.offset_out_of_range:
                    reset = self.config["auto.offset.reset"]
                    if reset == "none":
                        state.error = OffsetOutOfRangeError({tuple(tp): offsets[tp] or -1})
                        got_data = True
                    else:
                        log.info("%s: offset %s out of range, resetting to %s",
                                 tp, offsets[tp], reset)
                        state.request_reset(reset)
                elif code in STALE_METADATA_ERRORS or ErrorCode(code).retriable:
                    self._backoff([tp], BrokerError(code), refresh=True)
                else:
                    state.error = BrokerError(code, context=f"fetch {tp}")
                    got_data = True
        if got_data:
            self.data_ready.set()


def _next_offset(records: bytes) -> int | None:
    """Offset after the last complete batch of a fetched blob (None if none is complete)."""
    last = None
    for _pos, header in B.iter_batches(records):
        last = header
    return last.next_offset if last is not None else None


def take_batches(
    state: PartitionState, max_records: int, check_crcs: bool, read_committed: bool
) -> tuple[list[BatchColumns], int]:
    """Decode buffered data of one partition: up to ``max_records`` records as columns.

    Advances ``state.position``. Skips control batches, records below the position and,
    with read_committed, batches of aborted transactions. Raises RecordCorruptError.
    """
    out: list[BatchColumns] = []
    taken = 0
    tp = state.tp
    if state.leftover is not None:
        cols = state.leftover
        state.leftover = None
        taken += _emit(state, cols, max_records - taken, out)
    while taken < max_records and state.buffer:
        data = state.buffer[0]
        buf = data.records
        end = len(buf)
        if data.pos >= end or end - data.pos < B.HEADER_SIZE:
            state.buffer.popleft()
            state.buffered_bytes -= len(buf)
            continue
        header = B.read_header(buf, data.pos)
        pos = data.pos
        if header.batch_length < B.HEADER_SIZE - B.LOG_OVERHEAD or pos + header.size > end:
            data.pos = end  # partial trailing batch: fetched again next time
            continue
        data.pos = pos + header.size
        if header.magic != 2:
            raise RecordCorruptError(
                f"{tp}: batch at offset {header.base_offset} has magic {header.magic}; "
                "only record batch v2 (magic 2) is supported"
            )
        if check_crcs and not B.check_crc(buf, pos, header):
            raise RecordCorruptError(
                f"{tp}: CRC-32C mismatch in batch at offset {header.base_offset} "
                "(check.crcs=true); the data is corrupt on the broker or in transit"
            )
        if state.position is not None and header.next_offset <= state.position:
            continue
        if read_committed:
            while data.aborted and data.aborted[0][0] <= header.last_offset:
                state.aborted_pids.add(data.aborted.pop(0)[1])
        if header.is_control:
            if read_committed and header.producer_id in state.aborted_pids:
                payload = batch_payload(buf, pos, header)
                cols = decode_columns(payload, header)
                key = cols.keys[0] if cols.keys else None
                if key is not None and len(key) >= 4 and _CONTROL_KEY.unpack_from(key)[1] == _ABORT:
                    state.aborted_pids.discard(header.producer_id)
            state.position = header.next_offset
            continue
        if read_committed and header.is_transactional and header.producer_id in (
            state.aborted_pids
        ):
            state.position = header.next_offset
            continue
        try:
            cols = decode_columns(batch_payload(buf, pos, header), header)
        except (RecordDecodeError, ValueError) as exc:
            raise RecordCorruptError(f"{tp}: {exc}") from None
        if state.position is not None:
            cols = cols.slice_from(state.position)
        taken += _emit(state, cols, max_records - taken, out, header.next_offset)
    return out, taken


def _emit(state: PartitionState, cols: BatchColumns, room: int, out: list[BatchColumns],
          next_offset: int | None = None) -> int:
    """Hand out up to ``room`` records of ``cols``; keep the rest as leftover."""
    n = len(cols)
    if n <= room:
        if n:
            out.append(cols)
        state.position = next_offset if next_offset is not None else cols.last_offset + 1
        return n
    head = BatchColumns(
        cols.base_offset, cols.last_offset, cols.timestamp_type, cols.offsets[:room],
        cols.timestamps[:room], cols.keys[:room], cols.values[:room],
        cols.headers[:room] if cols.headers is not None else None,
        cols.producer_id, cols.is_transactional,
    )
    out.append(head)
    state.leftover = BatchColumns(
        cols.base_offset, cols.last_offset, cols.timestamp_type, cols.offsets[room:],
        cols.timestamps[room:], cols.keys[room:], cols.values[room:],
        cols.headers[room:] if cols.headers is not None else None,
        cols.producer_id, cols.is_transactional,
    )
    state.position = cols.offsets[room]
    return room
