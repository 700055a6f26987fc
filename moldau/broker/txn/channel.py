"""From a prepared transaction to its markers on every partition: :class:`TxnMarkerChannel`.

Kafka's ``TransactionMarkerChannelManager``. The transaction coordinator hands the channel a
transaction it wrote PrepareCommit or PrepareAbort for (:meth:`TxnMarkerChannel.enqueue` of a
:class:`PendingMarkers`); the channel writes a COMMIT or ABORT marker to each of its partitions
at the partition's leader, and once every partition has its marker it tells the coordinator
(``complete(txn_id, pid, epoch, commit, coordinator_epoch)``), which writes CompleteCommit or
CompleteAbort.

Each partition is queued under its leader from the metadata image. One sender task per
destination broker drains its queue: every transaction with partitions there goes into one
request, one marker per producer id (the answer is keyed by producer id). The destination
this broker is goes straight to the :class:`MarkerWriter` (``txn/markers.py``: the local
partitions, or the group coordinator for ``__consumer_offsets``; the single node's only
path); another broker gets WriteTxnMarkers v1-2 over :class:`~..peers.PeerConnections`.
A partition without a leader waits until the metadata names one (:meth:`wake`, also retried
on the backoff below).

What each partition's answer does (Kafka's ``TransactionMarkerRequestCompletionHandler``):

* NONE: done.
* NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS(_AFTER_APPEND),
  REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, a
  failed connection: the leader is looked up again and the marker retried, after 100 ms
  doubling to 5 s.
* INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED: a newer producer epoch or a newer
  coordinator has moved on; this transaction stops here (never completed by this channel).
* UNSUPPORTED_VERSION, UNSUPPORTED_FOR_MESSAGE_FORMAT, a topic gone from the metadata: the
  partition is dropped (it can never take the marker).
* CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, INVALID_REQUIRED_ACKS and
  anything else: a bug on one side, logged as an error, retried.

Completion is retried on COORDINATOR_NOT_AVAILABLE (the coordinator's write failed for now)
and given up on NOT_COORDINATOR (the partition moved: its next coordinator loads the Prepare*
state and enqueues the markers again at its own epoch). :meth:`remove_partition` forgets the
transactions of a ``__transaction_state`` partition this broker stopped leading.

Left out: Kafka's per-transaction marker-write metrics and the "markers not yet written" JMX
gauges; the channel logs instead.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, KafkaError
from ...wire.errors import ClientError, UnsupportedVersionError
from ..metadata.image import MetadataImage
from ..peers import PeerConnections
from .markers import TxnMarker

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

#: The purpose of the channel's peer connections (client id ``broker-<id>-to-txn-markers``).
PURPOSE = "txn-markers"
#: First retry delay and its cap (seconds).
RETRY_FIRST_S = 0.1
RETRY_MAX_S = 5.0

_RETRY = frozenset({
    ErrorCode.not_leader_or_follower, ErrorCode.unknown_topic_or_partition,
    ErrorCode.not_enough_replicas, ErrorCode.not_enough_replicas_after_append,
    ErrorCode.request_timed_out, ErrorCode.kafka_storage_error, ErrorCode.not_coordinator,
    ErrorCode.coordinator_load_in_progress, ErrorCode.network_exception,
    ErrorCode.leader_not_available, ErrorCode.broker_not_available,
})
_SUPERSEDED = frozenset({ErrorCode.invalid_producer_epoch,
                         ErrorCode.transaction_coordinator_fenced})
_DROP = frozenset({ErrorCode.unsupported_version, ErrorCode.unsupported_for_message_format})


class MarkerWriter(Protocol):
    """Writes markers to partitions this broker leads (``txn/markers.py``'s
    :class:`~.markers.MarkerWriter`; tests give a fake)."""

    async def write(self, markers: Sequence[TxnMarker]
                    ) -> Mapping[tuple[int, TopicPartition], ErrorCode]:
        """Each (pid, partition)'s error (NONE once the marker is in the ISR)."""
        ...


#: ``TransactionCoordinator.complete(txn_id, pid, epoch, commit, coordinator_epoch)``: may
#: return None / an ErrorCode, or raise KafkaError.
Completion = Callable[[str, int, int, bool, int], Awaitable[Any] | Any]


@dataclass(frozen=True, slots=True)
class PendingMarkers:
    """A prepared transaction whose markers are to be written."""

    txn_id: str
    coord_partition: int  # its ``__transaction_state`` partition
    coord_epoch: int  # that partition's leader epoch at load: the coordinator epoch
    pid: int
    epoch: int
    commit: bool
    tps: frozenset[TopicPartition]


@dataclass(eq=False)
class _Txn:
    markers: PendingMarkers
    remaining: set[TopicPartition]
    done: bool = False


@dataclass(eq=False)
class _Item:
    """One partition of one transaction, on its way to the partition's leader."""

    txn: _Txn
    tp: TopicPartition
    delay_s: float = RETRY_FIRST_S
    timer: asyncio.TimerHandle | None = None


@dataclass(eq=False)
class _Sender:
    dest: int
    items: list[_Item] = field(default_factory=list)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None


class TxnMarkerChannel:
    """Writes the markers of prepared transactions and reports them complete."""

    def __init__(self, *, node_id: int, image: Callable[[], MetadataImage] | MetadataImage,
                 writer: MarkerWriter, peers: PeerConnections | None = None,
                 complete: Completion | None = None,
                 request_timeout_ms: int = 30_000) -> None:
        self.node_id = node_id
        self._image = image if callable(image) else (lambda: image)
        self.writer = writer
        self.peers = peers
        #: Set by the coordinator, which is built after the channel it enqueues into.
        self.complete = complete
        self.request_timeout_ms = request_timeout_ms
        self._txns: dict[tuple[int, str], _Txn] = {}
        self._senders: dict[int, _Sender] = {}
        self._leaderless: set[_Item] = set()
        self._completions: set[asyncio.Task[None]] = set()
        self._closed = False

    # --- the seam -------------------------------------------------------------------------
    def enqueue(self, pending: PendingMarkers) -> None:
        """Write ``pending``'s markers (a transaction enqueued again, e.g. by a coordinator
        that loaded it at a newer epoch, replaces the one queued before)."""
        if self._closed:
            return
        key = (pending.coord_partition, pending.txn_id)
        old = self._txns.pop(key, None)
        if old is not None:
            old.done = True
        txn = _Txn(pending, set(pending.tps))
        self._txns[key] = txn
        if not txn.remaining:
            self._finish_txn(txn)
            return
        for tp in sorted(txn.remaining):
            self._route(_Item(txn, tp))

    def remove_partition(self, coord_partition: int) -> None:
        """Forget the transactions of ``coord_partition`` (this broker stopped being its
        coordinator; the next one re-sends what is left)."""
        for key in [k for k in self._txns if k[0] == coord_partition]:
            self._txns.pop(key).done = True

    def wake(self, *_args: Any) -> None:
        """The metadata changed: route partitions that had no leader again (a controller
        listener; arguments ignored)."""
        waiting, self._leaderless = self._leaderless, set()
        for item in waiting:
            if item.timer is not None:
                item.timer.cancel()
                item.timer = None
            self._route(item)

    def pending(self) -> list[PendingMarkers]:
        """The transactions whose markers are not all written yet (for tools and tests)."""
        return [t.markers for t in self._txns.values()]

    async def close(self) -> None:
        """Stop every sender and completion (node stop)."""
        self._closed = True
        for txn in self._txns.values():
            txn.done = True
        self._txns.clear()
        tasks = [s.task for s in self._senders.values() if s.task is not None]
        tasks += list(self._completions)
        for item in self._leaderless:
            if item.timer is not None:
                item.timer.cancel()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # --- routing --------------------------------------------------------------------------
    def _route(self, item: _Item) -> None:
        item.timer = None
        if item.txn.done or self._closed:
            return
        topic, index = item.tp
        image = self._image()
        topic_image = image.topics_by_name.get(topic)
        state = topic_image.partitions.get(index) if topic_image is not None else None
        if state is None:
            log.warning("transaction %s: %s-%d is gone from the metadata; its %s marker is "
                        "dropped", item.txn.markers.txn_id, topic, index, _kind(item))
            self._partition_done(item)
            return
        if state.leader < 0:
            self._leaderless.add(item)
            self._retry_later(item)
            return
        sender = self._senders.get(state.leader)
        if sender is None:
            sender = self._senders[state.leader] = _Sender(state.leader)
            sender.task = asyncio.ensure_future(self._send_loop(sender))
        sender.items.append(item)
        sender.wake.set()

    def _retry_later(self, item: _Item) -> None:
        if item.txn.done or self._closed:
            return
        delay, item.delay_s = item.delay_s, min(item.delay_s * 2, RETRY_MAX_S)
        loop = asyncio.get_running_loop()

        def again() -> None:
            self._leaderless.discard(item)
            self._route(item)

        item.timer = loop.call_later(delay, again)

    # --- sending --------------------------------------------------------------------------
    async def _send_loop(self, sender: _Sender) -> None:
        while True:
            await sender.wake.wait()
            sender.wake.clear()
            batch, markers = self._take(sender)
            if not batch:
                continue
            try:
                results = await self._write(sender.dest, markers)
            except asyncio.CancelledError:
                raise
            except (ClientError, KafkaError, OSError) as exc:
                log.info("transaction markers to broker %d failed (%s); retrying",
                         sender.dest, exc)
                results = {}
            except Exception:
                log.exception("transaction markers to broker %d failed; retrying",
                              sender.dest)
                results = {}
            for item in batch:
                code = results.get((item.txn.markers.pid, item.tp), ErrorCode.network_exception)
                self._answer(item, code)

    def _take(self, sender: _Sender) -> tuple[list[_Item], list[TxnMarker]]:
        """The items of one request: all live ones, one transaction per producer id (the
        rest stay queued for the next)."""
        batch: list[_Item] = []
        later: list[_Item] = []
        by_pid: dict[int, _Txn] = {}
        for item in sender.items:
            if item.txn.done:
                continue
            owner = by_pid.setdefault(item.txn.markers.pid, item.txn)
            (batch if owner is item.txn else later).append(item)
        sender.items = later
        if later:
            sender.wake.set()
        tps: dict[int, list[TopicPartition]] = {}
        for item in batch:
            tps.setdefault(id(item.txn), []).append(item.tp)
        markers = [TxnMarker(t.markers.pid, t.markers.epoch, t.markers.commit,
                             t.markers.coord_epoch, tuple(tps[id(t)]))
                   for t in by_pid.values() if id(t) in tps]
        return batch, markers

    async def _write(self, dest: int, markers: Sequence[TxnMarker]
                     ) -> Mapping[tuple[int, TopicPartition], ErrorCode]:
        if dest == self.node_id:
            return await self.writer.write(markers)
        if self.peers is None:
            raise KafkaError(ErrorCode.broker_not_available,
                             f"broker {dest} leads a partition but this node has no peer "
                             f"connections (a single node)")
        try:
            conn = await self.peers.get(dest, PURPOSE)
            version = conn.versions.require(ApiKey.WRITE_TXN_MARKERS, 1)
        except UnsupportedVersionError as exc:
            log.error("broker %d does not serve WriteTxnMarkers v1+ (%s): dropping the "
                      "markers of its partitions", dest, exc)
            return {(m.pid, tp): ErrorCode.unsupported_version for m in markers
                    for tp in m.tps}
        try:
            response = await conn.request(ApiKey.WRITE_TXN_MARKERS, _request(markers),
                                          version=version,
                                          timeout_ms=self.request_timeout_ms + 5000)
        except (ClientError, OSError):
            self.peers.drop(dest, PURPOSE)
            raise
        return _results(response)

    def _answer(self, item: _Item, code: ErrorCode | int) -> None:
        txn = item.txn
        if txn.done:
            return
        code = _code(code)
        if code == ErrorCode.none:
            self._partition_done(item)
        elif code in _SUPERSEDED:
            log.info("transaction %s (producer %d, epoch %d, coordinator epoch %d): %s at "
                     "%s-%d; a newer producer epoch or coordinator took over, so its %s "
                     "markers stop here", txn.markers.txn_id, txn.markers.pid,
                     txn.markers.epoch, txn.markers.coord_epoch, code.name.upper(),
                     item.tp[0], item.tp[1], _kind(item))
            self._stop(txn)
        elif code in _DROP:
            log.error("transaction %s: %s-%d answered %s to its %s marker; the partition "
                      "is dropped from the transaction", txn.markers.txn_id, item.tp[0],
                      item.tp[1], code.name.upper(), _kind(item))
            self._partition_done(item)
        else:
            if code not in _RETRY:
                log.error("transaction %s: %s-%d answered %s to its %s marker (unexpected: "
                          "a bug on one side); retrying", txn.markers.txn_id, item.tp[0],
                          item.tp[1], code.name.upper(), _kind(item))
            self._retry_later(item)

    # --- completion -----------------------------------------------------------------------
    def _partition_done(self, item: _Item) -> None:
        txn = item.txn
        txn.remaining.discard(item.tp)
        if not txn.remaining and not txn.done:
            self._finish_txn(txn)

    def _stop(self, txn: _Txn) -> None:
        txn.done = True
        key = (txn.markers.coord_partition, txn.markers.txn_id)
        if self._txns.get(key) is txn:
            del self._txns[key]

    def _finish_txn(self, txn: _Txn) -> None:
        self._stop(txn)
        task = asyncio.ensure_future(self._complete(txn.markers))
        self._completions.add(task)
        task.add_done_callback(self._completions.discard)

    async def _complete(self, m: PendingMarkers) -> None:
        delay = RETRY_FIRST_S
        while not self._closed:
            if self.complete is None:
                log.error("transaction %s: markers written but no coordinator to complete it",
                          m.txn_id)
                return
            try:
                result = self.complete(m.txn_id, m.pid, m.epoch, m.commit, m.coord_epoch)
                if inspect.isawaitable(result):
                    result = await result
                code = _code(result) if result is not None else ErrorCode.none
            except KafkaError as exc:
                code = exc.code
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("completing transaction %s failed", m.txn_id)
                return
            if code == ErrorCode.none:
                return
            if code != ErrorCode.coordinator_not_available:
                log.info("transaction %s: completion answered %s; the next coordinator "
                         "completes it", m.txn_id, code.name.upper())
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX_S)


def _kind(item: _Item) -> str:
    return "COMMIT" if item.txn.markers.commit else "ABORT"


def _code(value: Any) -> ErrorCode:
    try:
        return ErrorCode(int(value))
    except ValueError:
        return ErrorCode.unknown_server_error


def _request(markers: Iterable[TxnMarker]) -> dict[str, Any]:
    """A WriteTxnMarkers (v1-2) request body."""
    entries = []
    for m in markers:
        by_topic: dict[str, list[int]] = {}
        for topic, index in m.tps:
            by_topic.setdefault(topic, []).append(index)
        entries.append({
            "producer_id": m.pid, "producer_epoch": m.epoch, "transaction_result": m.commit,
            "topics": [{"name": t, "partition_indexes": sorted(p)}
                       for t, p in sorted(by_topic.items())],
            "coordinator_epoch": m.coordinator_epoch,
        })
    return {"markers": entries}


def _results(response: Any) -> dict[tuple[int, TopicPartition], ErrorCode]:
    """The per-(pid, partition) errors of a WriteTxnMarkers response."""
    results: dict[tuple[int, TopicPartition], ErrorCode] = {}
    for marker in response.markers:
        for topic in marker.topics:
            for part in topic.partitions:
                results[(marker.producer_id, (topic.name, part.partition_index))] = \
                    _code(part.error_code)
    return results
