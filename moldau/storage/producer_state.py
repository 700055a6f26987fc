"""Idempotent/transactional producer state of one partition (Kafka's ProducerStateManager).

Per producer id we keep the epoch, the metadata of its last 5 batches (enough to recognise any
retry of an in-flight request, since clients allow at most 5 in flight), the coordinator epoch,
the last timestamp and the first offset of its open transaction.

Appends go in two steps so a failed disk write leaves the state untouched:
:meth:`ProducerStateManager.prepare` validates the batches against the current state (raising
:class:`ProducerStateError` with Kafka's error code, or reporting a duplicate) and returns a
:class:`ProducerAppend`; after the bytes are written the log calls :meth:`commit`.

Validation follows Kafka 3.x/4.x ``ProducerAppendInfo``: an older epoch is
INVALID_PRODUCER_EPOCH; a new epoch must start at sequence 0 (OUT_OF_ORDER_SEQUENCE_NUMBER
otherwise); within an epoch the first sequence must follow the last one, wrapping at int32 max;
a producer with no state (new, expired, or its records deleted) may start at any sequence, so
UNKNOWN_PRODUCER_ID is never raised here (Kafka stopped raising it from the log in 2.5,
KIP-360). A non-transactional batch from a producer with an open transaction is
INVALID_TXN_STATE. Replicated appends (followers, recovery) are not validated. Stricter than
Kafka: a transactional batch of a producer with no transaction open on the partition is never
answered as a duplicate (:func:`_opens_transaction` says why).

Snapshots (``<20-digit offset>.snapshot``) use our own layout (Kafka's keeps only the last batch
per producer, ours keeps all five), big-endian::

    magic   4 bytes  b"MPSN"
    version int16    1
    crc     uint32   CRC-32C of everything after this field
    count   int32    number of producers, then per producer:
      producer_id int64, producer_epoch int16, coordinator_epoch int32,
      current_txn_first_offset int64 (-1: none), last_timestamp int64, batch_count int8,
      then per batch (oldest first): last_seq int32, last_offset int64, offset_delta int32,
      timestamp int64
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field

from crc32c import crc32c

from moldau.protocol.errors import ErrorCode
from moldau.protocol.records.batch import BatchHeader
from moldau.protocol.records.control import EndTxnMarker

from .errors import CorruptSnapshot, ProducerStateError
from .fs import FileSystem
from .names import SNAPSHOT_SUFFIX, filename_prefix

MAX_BATCHES = 5
INT32_MAX = 0x7FFFFFFF
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1

ORIGIN_CLIENT = "client"
ORIGIN_COORDINATOR = "coordinator"
ORIGIN_REPLICATION = "replication"

_MAGIC = b"MPSN"
_VERSION = 1
_FILE_HEAD = struct.Struct(">4shI")
_PRODUCER = struct.Struct(">qhiqqb")
_BATCH = struct.Struct(">iqiq")
_COUNT = struct.Struct(">i")


@dataclass(slots=True, frozen=True)
class BatchMetadata:
    """What a duplicate check needs of one appended batch."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return (self.last_seq - self.offset_delta) & INT32_MAX

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: list[BatchMetadata] = field(default_factory=list)
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(
            self.producer_id, self.producer_epoch, list(self.batches), self.coordinator_epoch,
            self.last_timestamp, self.current_txn_first_offset,
        )

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        for b in self.batches:
            if b.last_seq == last_seq and b.first_seq == first_seq:
                return b
        return None

    def _maybe_bump_epoch(self, epoch: int) -> None:
        if epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = epoch

    def add_batch(self, epoch: int, last_seq: int, last_offset: int, offset_delta: int,
                  timestamp: int) -> None:
        self._maybe_bump_epoch(epoch)
        if len(self.batches) >= MAX_BATCHES:
            del self.batches[0]
        self.batches.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp


@dataclass(slots=True, frozen=True)
class CompletedTxn:
    """A transaction ended by a COMMIT or ABORT marker."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass(slots=True)
class ProducerAppend:
    """Validated, not yet applied, producer state changes of one log append."""

    updated: dict[int, ProducerStateEntry] = field(default_factory=dict)
    completed_txns: list[CompletedTxn] = field(default_factory=list)
    duplicate: BatchMetadata | None = None
    # Producers whose verification guard this append ends (a transactional write, a marker
    # or a new epoch).
    ended_guards: set[int] = field(default_factory=set)


class VerificationGuard:
    """The token of one KIP-890 verification: only the latest token of a producer id opens its
    transaction on the partition; an end marker or a new epoch in between makes it stale."""

    __slots__ = ("producer_id",)

    def __init__(self, producer_id: int) -> None:
        self.producer_id = producer_id

    def __repr__(self) -> str:
        return f"VerificationGuard(producer {self.producer_id})"


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def _fail(code: ErrorCode, message: str) -> ProducerStateError:
    return ProducerStateError(code, message)


class ProducerStateManager:
    """Producer ids -> state for one partition, with snapshots in the partition directory."""

    def __init__(self, partition_dir: str, fs: FileSystem, expiration_ms: int,
                 name: str = "") -> None:
        self.dir = partition_dir
        self._fs = fs
        self.expiration_ms = expiration_ms
        self.name = name or os.path.basename(partition_dir)
        self.producers: dict[int, ProducerStateEntry] = {}
        # producer id -> first offset of its open transaction
        self.ongoing_txns: dict[int, int] = {}
        # first offset -> a transaction whose marker is not yet below the high watermark
        # (Kafka's unreplicatedTxns): it still bounds the last stable offset.
        self.unreplicated_txns: dict[int, CompletedTxn] = {}
        # producer id -> the guard of its verification in flight (memory only, KIP-890)
        self._guards: dict[int, VerificationGuard] = {}
        self.map_end_offset = 0

    # -- append path -------------------------------------------------------------------
    def prepare(
        self,
        batches: list[tuple[BatchHeader, int, EndTxnMarker | None]],
        origin: str = ORIGIN_CLIENT,
        verification_guard: VerificationGuard | None = None,
    ) -> ProducerAppend:
        """Validate ``(header, first_offset, marker)`` triples of batches about to be appended.

        ``first_offset`` is the offset the batch will get (the header's own base offset may
        still be the client's 0). Control batches carry their decoded ``marker``. Stops at the
        first duplicate batch of a client append (the whole append is then answered from it).
        With a ``verification_guard`` (a produce the coordinator verified), a batch that opens
        a transaction needs that guard to still be its producer's current one
        (INVALID_TXN_STATE otherwise: a marker or a new epoch came in between).
        """
        result = ProducerAppend()
        updated = result.updated
        for header, first_offset, marker in batches:
            pid = header.producer_id
            if pid < 0:
                continue
            current = self.producers.get(pid)
            if origin == ORIGIN_CLIENT and current is not None and not header.is_control \
                    and not _opens_transaction(current, header):
                dup = current.find_duplicate(
                    header.producer_epoch, header.base_sequence, header.last_sequence
                )
                if dup is not None:
                    result.duplicate = dup
                    return result
            entry = updated.get(pid)
            if entry is None:
                entry = current.copy() if current is not None else ProducerStateEntry(pid)
                updated[pid] = entry
            last_offset = first_offset + header.last_offset_delta
            if header.is_transactional or header.producer_epoch != entry.producer_epoch:
                result.ended_guards.add(pid)
            if (verification_guard is not None and header.is_transactional
                    and not header.is_control and entry.current_txn_first_offset < 0
                    and self._guards.get(pid) is not verification_guard):
                raise _fail(
                    ErrorCode.invalid_txn_state,
                    f"Partition {self.name} was not added to the transaction of producer "
                    f"{pid}: its verification is stale (the transaction ended or the epoch "
                    "changed meanwhile)",
                )
            if header.is_control:
                if marker is None:
                    continue  # an empty control batch: its transaction was cleaned away
                completed = self._end_txn(entry, header, marker, first_offset, origin)
                result.completed_txns.append(completed)
            else:
                self._data_batch(entry, current, header, first_offset, last_offset, origin)
        return result

    def _check_epoch(self, entry: ProducerStateEntry, epoch: int, offset: int,
                     origin: str) -> None:
        if epoch < entry.producer_epoch and origin != ORIGIN_REPLICATION:
            raise _fail(
                ErrorCode.invalid_producer_epoch,
                f"epoch {epoch} of producer {entry.producer_id} at offset {offset} in "
                f"{self.name} is older than the last seen epoch {entry.producer_epoch}",
            )

    def _data_batch(self, entry: ProducerStateEntry, current: ProducerStateEntry | None,
                    header: BatchHeader, first_offset: int, last_offset: int,
                    origin: str) -> None:
        epoch = header.producer_epoch
        first_seq = header.base_sequence
        self._check_epoch(entry, epoch, first_offset, origin)
        if origin == ORIGIN_CLIENT:
            current_epoch = current.producer_epoch if current is not None else NO_PRODUCER_EPOCH
            if epoch != entry.producer_epoch:
                if first_seq != 0 and entry.producer_epoch != NO_PRODUCER_EPOCH:
                    raise _fail(
                        ErrorCode.out_of_order_sequence_number,
                        f"invalid sequence number {first_seq} for new epoch {epoch} of producer "
                        f"{entry.producer_id} at offset {first_offset} in {self.name}: a new "
                        f"epoch must start at sequence 0 (current epoch {entry.producer_epoch})",
                    )
            elif current_epoch != NO_PRODUCER_EPOCH and not _in_sequence(entry.last_seq,
                                                                         first_seq):
                raise _fail(
                    ErrorCode.out_of_order_sequence_number,
                    f"out of order sequence number for producer {entry.producer_id} at offset "
                    f"{first_offset} in {self.name}: {first_seq} (incoming seq. number), "
                    f"{entry.last_seq} (current end sequence number)",
                )
        entry.add_batch(epoch, header.last_sequence, last_offset, header.last_offset_delta,
                        header.max_timestamp)
        if entry.current_txn_first_offset >= 0 and not header.is_transactional:
            if origin != ORIGIN_REPLICATION:
                raise _fail(
                    ErrorCode.invalid_txn_state,
                    f"expected a transactional write from producer {entry.producer_id} at "
                    f"offset {first_offset} in {self.name}: it has an open transaction",
                )
        elif entry.current_txn_first_offset < 0 and header.is_transactional:
            entry.current_txn_first_offset = first_offset

    def _end_txn(self, entry: ProducerStateEntry, header: BatchHeader, marker: EndTxnMarker,
                 offset: int, origin: str) -> CompletedTxn:
        self._check_epoch(entry, header.producer_epoch, offset, origin)
        if entry.coordinator_epoch > marker.coordinator_epoch and origin != ORIGIN_REPLICATION:
            raise _fail(
                ErrorCode.transaction_coordinator_fenced,
                f"coordinator epoch {marker.coordinator_epoch} for producer "
                f"{entry.producer_id} at offset {offset} in {self.name} is older than "
                f"{entry.coordinator_epoch}",
            )
        first = entry.current_txn_first_offset if entry.current_txn_first_offset >= 0 else offset
        entry._maybe_bump_epoch(header.producer_epoch)
        entry.current_txn_first_offset = -1
        entry.coordinator_epoch = marker.coordinator_epoch
        entry.last_timestamp = header.max_timestamp
        return CompletedTxn(entry.producer_id, first, offset, not marker.is_commit)

    def commit(self, append: ProducerAppend) -> None:
        """Apply a prepared append after its bytes are in the log."""
        for pid, entry in append.updated.items():
            self.producers[pid] = entry
            if entry.current_txn_first_offset >= 0:
                self.ongoing_txns[pid] = entry.current_txn_first_offset
            else:
                self.ongoing_txns.pop(pid, None)
        for txn in append.completed_txns:
            self.unreplicated_txns[txn.first_offset] = txn
        for pid in append.ended_guards:
            self._guards.pop(pid, None)

    # -- KIP-890 verification and the high watermark ---------------------------------------
    def begin_verification(self, producer_id: int) -> VerificationGuard:
        """Start verifying ``producer_id``'s first transactional write here; the guard goes
        to :meth:`prepare` once the coordinator confirmed the partition is in the txn."""
        guard = self._guards.get(producer_id)
        if guard is None:
            guard = self._guards[producer_id] = VerificationGuard(producer_id)
        return guard

    def verification_guard(self, producer_id: int) -> VerificationGuard | None:
        """The guard of ``producer_id``'s verification in flight, if any."""
        return self._guards.get(producer_id)

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Transactions whose marker is now below the high watermark stop bounding the LSO."""
        if self.unreplicated_txns:
            for first in [f for f, t in self.unreplicated_txns.items()
                          if t.last_offset < high_watermark]:
                del self.unreplicated_txns[first]

    def update_map_end_offset(self, offset: int) -> None:
        self.map_end_offset = offset

    def apply_replicated(self, header: BatchHeader, marker: EndTxnMarker | None
                         ) -> list[CompletedTxn]:
        """Rebuild path: apply one batch from the log without validation; the transactions
        its marker completed."""
        completed: list[CompletedTxn] = []
        if header.producer_id >= 0:
            append = self.prepare([(header, header.base_offset, marker)], ORIGIN_REPLICATION)
            self.commit(append)
            completed = append.completed_txns
        self.map_end_offset = header.next_offset
        return completed

    # -- queries -----------------------------------------------------------------------
    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest transaction that is open or whose marker is not yet
        replicated (below the high watermark): the last stable offset cannot pass it."""
        ongoing, unreplicated = self.ongoing_txns, self.unreplicated_txns
        if not unreplicated:
            return min(ongoing.values()) if ongoing else None
        first = min(unreplicated)
        return min(first, min(ongoing.values())) if ongoing else first

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """LSO once ``completed`` ends: the next open transaction's start, else its end + 1
        (Kafka stores this in the aborted transaction index)."""
        others = [o for p, o in self.ongoing_txns.items() if p != completed.producer_id]
        return min(others) if others else completed.last_offset + 1

    # -- expiry and truncation -----------------------------------------------------------
    def remove_expired(self, now_ms: int) -> int:
        expired = [
            pid for pid, e in self.producers.items()
            if e.current_txn_first_offset < 0 and now_ms - e.last_timestamp >= self.expiration_ms
        ]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    def clear(self) -> None:
        self.producers.clear()
        self.ongoing_txns.clear()
        self.unreplicated_txns.clear()
        self._guards.clear()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.clear()
        for snap in self.snapshot_offsets():
            self._remove_snapshot(snap)
        self.map_end_offset = offset

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        # Kafka keeps producer entries (they expire by time) but never lets the state end
        # before the log starts.
        if self.map_end_offset < log_start_offset:
            self.map_end_offset = log_start_offset

    # -- snapshots ---------------------------------------------------------------------
    def snapshot_path(self, offset: int) -> str:
        return os.path.join(self.dir, filename_prefix(offset) + SNAPSHOT_SUFFIX)

    def snapshot_offsets(self) -> list[int]:
        out = []
        for name in self._fs.listdir(self.dir):
            if name.endswith(SNAPSHOT_SUFFIX):
                head = name[: -len(SNAPSHOT_SUFFIX)]
                if head.isdigit():
                    out.append(int(head))
        return sorted(out)

    def take_snapshot(self, *, sync: bool = False) -> int:
        """Write the state at ``map_end_offset``; returns that offset."""
        offset = self.map_end_offset
        self._fs.write_file_atomic(self.snapshot_path(offset), encode_snapshot(self.producers),
                                   sync=sync)
        return offset

    def _remove_snapshot(self, offset: int) -> None:
        try:
            self._fs.remove(self.snapshot_path(offset))
        except FileNotFoundError:
            pass

    def delete_snapshots_before(self, offset: int) -> None:
        for snap in self.snapshot_offsets():
            if snap < offset:
                self._remove_snapshot(snap)

    def delete_snapshots_after(self, offset: int) -> None:
        for snap in self.snapshot_offsets():
            if snap > offset:
                self._remove_snapshot(snap)

    def load_latest_snapshot(self, up_to: int) -> int | None:
        """Replace the state with the newest valid snapshot at or below ``up_to``.

        Newer snapshots (left behind by a truncation) and corrupt ones are deleted. Returns the
        snapshot's offset, or None (state cleared) if there is none.
        """
        self.clear()
        for snap in reversed(self.snapshot_offsets()):
            if snap > up_to:
                self._remove_snapshot(snap)
                continue
            try:
                producers = decode_snapshot(self._fs.read_file(self.snapshot_path(snap)))
            except (CorruptSnapshot, OSError):
                self._remove_snapshot(snap)
                continue
            self.producers = producers
            self.ongoing_txns = {
                pid: e.current_txn_first_offset
                for pid, e in producers.items() if e.current_txn_first_offset >= 0
            }
            self.map_end_offset = snap
            return snap
        return None


def encode_snapshot(producers: dict[int, ProducerStateEntry]) -> bytes:
    body = bytearray(_COUNT.pack(len(producers)))
    for pid, e in sorted(producers.items()):
        body += _PRODUCER.pack(pid, e.producer_epoch, e.coordinator_epoch,
                               e.current_txn_first_offset, e.last_timestamp, len(e.batches))
        for b in e.batches:
            body += _BATCH.pack(b.last_seq, b.last_offset, b.offset_delta, b.timestamp)
    return _FILE_HEAD.pack(_MAGIC, _VERSION, crc32c(body)) + bytes(body)


def decode_snapshot(data: bytes) -> dict[int, ProducerStateEntry]:
    if len(data) < _FILE_HEAD.size + _COUNT.size:
        raise CorruptSnapshot("producer snapshot is truncated")
    magic, version, crc = _FILE_HEAD.unpack_from(data, 0)
    if magic != _MAGIC or version != _VERSION:
        raise CorruptSnapshot(f"not a producer snapshot (magic {magic!r}, version {version})")
    body = memoryview(data)[_FILE_HEAD.size:]
    if crc32c(body) != crc:
        raise CorruptSnapshot("producer snapshot CRC mismatch")
    try:
        (count,) = _COUNT.unpack_from(body, 0)
        pos = _COUNT.size
        out: dict[int, ProducerStateEntry] = {}
        for _ in range(count):
            pid, epoch, coord, txn, last_ts, n = _PRODUCER.unpack_from(body, pos)
            pos += _PRODUCER.size
            batches = []
            for _b in range(n):
                batches.append(BatchMetadata(*_BATCH.unpack_from(body, pos)))
                pos += _BATCH.size
            out[pid] = ProducerStateEntry(pid, epoch, batches, coord, last_ts, txn)
    except struct.error:
        raise CorruptSnapshot("producer snapshot is truncated") from None
    if pos != len(body):
        raise CorruptSnapshot("producer snapshot has trailing bytes")
    return out


def _opens_transaction(entry: ProducerStateEntry, header: BatchHeader) -> bool:
    """Whether ``header`` is a transactional batch of a producer with no transaction open on
    this partition: then it is never a retry of a batch written here before.

    Every batch of a transaction is acknowledged before the producer ends it (EndTxn comes
    after the flush), so a batch matching a cached one across an end marker of the same
    epoch is not a retry: it is a sequence number used again. librdkafka does that after
    ``abort_transaction()`` purged a message whose request failed in transport but had been
    written (it advances the sequence base past the purged message without an epoch bump).
    Kafka answers such a batch as a duplicate, acknowledging records it never writes, and the
    next commit loses them; here it is checked as a new batch (OUT_OF_ORDER_SEQUENCE_NUMBER,
    fatal to librdkafka: the application's new producer aborts the transaction in
    ``init_transactions()``, nothing is lost). With KIP-890's transaction version 2 every
    transaction ends with a new epoch, which clears the batches for the same reason.
    """
    return header.is_transactional and entry.current_txn_first_offset < 0

