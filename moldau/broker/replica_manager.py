"""The partitions this broker hosts, kept in line with the metadata image, and the produce,
fetch, list-offsets and delete-records paths through them.

``prepare`` runs before the controller writes metadata records: it creates the logs of new
partitions hosted here, all or none, so a topic is never committed with logs missing (no file
descriptor or disk space left: the creation is refused with KAFKA_STORAGE_ERROR instead).
``reconcile`` runs after every metadata change (and at start-up): it opens logs for partitions
assigned here, deletes logs of removed topics, applies leader/ISR changes and pushes topic
configs into the logs, so a config change takes effect on the next append or retention run.
A partition whose log cannot be opened or created is offline here: clients get
KAFKA_STORAGE_ERROR for it, and :meth:`ReplicaManager.retry_offline` tries again.

Leadership comes only from the image: this broker leads a partition when its PartitionRecord /
PartitionChangeRecord names it leader, and hosts (keeps a log for) only partitions whose
replicas include it; a partition reassigned away has its log deleted, as Kafka's StopReplica
with deletion does. A fenced broker (:meth:`ReplicaManager.set_fenced`, set by the node when
its registration lapses, or its registration in the image marked fenced) leads nothing until
the fence is lifted. :meth:`ReplicaManager.leader_partition` is the one place that decides
what a client request for a partition gets: the partition, or UNKNOWN_TOPIC_OR_PARTITION /
NOT_LEADER_OR_FOLLOWER / KAFKA_STORAGE_ERROR / an epoch error, in Kafka's order.
"""

from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..protocol.encoders.fetch import FetchPartitionData
from ..protocol.encoders.produce import PartitionProduceResult
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.records.batch import BatchHeader, iter_batches, validate_batches
from ..protocol.records.codec import recompress_batch
from ..protocol.records.compression import Codec
from ..storage.config import LogConfig
from ..storage.errors import KafkaStorageError
from ..storage.manager import LogManager
from ..storage.producer_state import ORIGIN_CLIENT
from .config.loader import BrokerConfig
from .control_append import EndMarker, append_markers
from .metadata.configs import effective_topic_config
from .metadata.image import MetadataImage
from .metadata.isr_change import IsrChangeResult
from .metadata.records import (
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    MetadataRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from .metadata.validation import INTERNAL_TOPICS
from .partition import IsrHooks, Partition
from .produce_validation import Rejection, check_record_set
from .purgatory import Purgatory

_TARGET_CODECS = {"uncompressed": Codec.NONE, "gzip": Codec.GZIP, "snappy": Codec.SNAPPY,
                  "lz4": Codec.LZ4, "zstd": Codec.ZSTD}


def recompress(buf: bytes | bytearray | memoryview, headers: list[BatchHeader],
               codec: Codec) -> tuple[bytearray, list[BatchHeader]]:
    """Rewrite batches whose codec differs from the topic's ``compression.type``."""
    out = bytearray()
    pos = 0
    for header in headers:
        if header.compression == codec:
            out += buf[pos : pos + header.size]
        else:
            out += recompress_batch(buf, pos, codec)
        pos += header.size
    return out, validate_batches(out)


def kafka_uuid(value: uuid.UUID) -> str:
    """Kafka's text form of a Uuid (URL-safe base64 without padding)."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")

log = logging.getLogger(__name__)


@dataclass(slots=True)
class ProduceOutcome:
    error: ErrorCode
    message: str | None = None
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    wait_for_offset: int | None = None

    def result(self, index: int) -> PartitionProduceResult:
        return PartitionProduceResult(index, self.error, self.base_offset,
                                      self.log_append_time_ms, self.log_start_offset,
                                      self.message)

    def failed(self, index: int, error: ErrorCode) -> PartitionProduceResult:
        return PartitionProduceResult(index, error, -1, -1, -1, None)


@dataclass(slots=True)
class FetchTarget:
    topic: str | None
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    unknown_id: bool = False
    # A follower's log start offset (its fetches carry it; consumers send -1).
    log_start_offset: int = -1


@dataclass(slots=True)
class FetchRead:
    topics: list[tuple[Any, list[FetchPartitionData]]]
    total_bytes: int
    has_error: bool


def error_entry(index: int, error: ErrorCode,
                current_leader: tuple[int, int] | None = None) -> FetchPartitionData:
    """A Fetch answer for a partition that cannot be read: empty records, not null, as Kafka
    sends (librdkafka fails to parse the whole response on a null record set: "invalid
    MessageSetSize -1")."""
    return FetchPartitionData(index, error, records=b"", current_leader=current_leader)


def _nothing() -> None:
    return None


class ReplicaManager:
    """Owns the :class:`Partition` objects of this broker.

    ``image`` is the node's metadata image (replayed in place, so this object always sees the
    current cluster), ``config`` the static broker config (topic config defaults),
    ``log_manager`` the log dirs its partitions' logs live in."""

    def __init__(self, *, node_id: int, image: MetadataImage, config: BrokerConfig,
                 log_manager: LogManager, time_ms: Callable[[], int]) -> None:
        self.node_id = node_id
        self.image = image
        self.config = config
        self.log_manager = log_manager
        self.time_ms = time_ms
        self.partitions: dict[tuple[str, int], Partition] = {}
        # Partitions hosted here whose log could not be opened or created: why not.
        self.offline: dict[tuple[str, int], str] = {}
        self.purgatory = Purgatory()
        # Fenced by the node (its ZooKeeper session expired, it has not re-registered yet).
        self._fenced_by_node = False
        self._fence_applied = False
        # Called after the fence is set or lifted (the group coordinator follows leadership).
        self.leadership_listeners: list[Callable[[], None]] = []
        # Called after partition states were applied (reconcile) or the fence moved: the
        # replica fetchers follow what this broker follows.
        self.state_listeners: list[Callable[[], None]] = []
        # The ISR manager of a broker of a cluster, given to every partition (None: a single
        # node).
        self.isr_hooks: IsrHooks | None = None

    # --- metadata ------------------------------------------------------------------------
    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        topic = self.image.topics_by_id.get(topic_id)
        return topic.name if topic is not None else None

    def get(self, topic: str | None, index: int) -> Partition | None:
        if topic is None:
            return None
        return self.partitions.get((topic, index))

    # --- leadership ----------------------------------------------------------------------
    @property
    def fenced(self) -> bool:
        """Whether this broker may not lead: fenced by the node, or its registration in the
        image is marked fenced."""
        if self._fenced_by_node:
            return True
        registration = self.image.brokers.get(self.node_id)
        return registration is not None and registration.fenced

    def set_fenced(self, fenced: bool) -> None:
        """Fence this broker (it stops leading every partition at once: clients get
        NOT_LEADER_OR_FOLLOWER, parked produces and fetches are answered, the group
        coordinator unloads its shards) or lift the fence (the image's leadership applies
        again)."""
        if fenced != self._fenced_by_node:
            log.warning("broker %d is %s", self.node_id,
                        "fenced: it leads no partition until it is registered again"
                        if fenced else "no longer fenced: it leads what the metadata says")
        self._fenced_by_node = fenced
        self._sync_fence()

    def _sync_fence(self) -> None:
        fenced = self.fenced
        if fenced == self._fence_applied:
            return
        self._fence_applied = fenced
        for partition in self.partitions.values():
            partition.set_fenced(fenced)
        for listener in self.leadership_listeners:
            listener()
        self._notify_state_listeners()

    def _notify_state_listeners(self) -> None:
        for listener in self.state_listeners:
            try:
                listener()
            except Exception:
                log.exception("a listener of partition state changes failed")

    def leads(self, topic: str, index: int) -> bool:
        """Whether this broker is the leader of ``topic``-``index`` now."""
        partition = self.partitions.get((topic, index))
        return partition is not None and partition.is_leader

    def leader_partition(self, topic: str | None, index: int, current_leader_epoch: int = -1,
                         *, unknown_id: bool = False) -> Partition | ErrorCode:
        """The partition if this broker leads it (and ``current_leader_epoch``, when given,
        is its epoch), else the error a client request for it gets, in Kafka's order:
        UNKNOWN_TOPIC_ID (``unknown_id``) / UNKNOWN_TOPIC_OR_PARTITION when the metadata does
        not know it, KAFKA_STORAGE_ERROR when its log is offline here, NOT_LEADER_OR_FOLLOWER
        when this broker is not a replica, FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH for an
        older / newer epoch, and NOT_LEADER_OR_FOLLOWER when it is a replica but not the
        leader (another broker leads, none does, or this broker is fenced)."""
        partition = self.hosted_partition(topic, index, unknown_id=unknown_id)
        if isinstance(partition, ErrorCode):
            return partition
        error = partition.check_leader_epoch(current_leader_epoch)
        if error != ErrorCode.none:
            return error
        if not partition.is_leader:
            return ErrorCode.not_leader_or_follower
        return partition

    def hosted_partition(self, topic: str | None, index: int, *,
                         unknown_id: bool = False) -> Partition | ErrorCode:
        """The partition if this broker hosts a replica of it (leader or not), else
        UNKNOWN_TOPIC_ID / UNKNOWN_TOPIC_OR_PARTITION (unknown to the metadata),
        KAFKA_STORAGE_ERROR (its log is offline here) or NOT_LEADER_OR_FOLLOWER (not a
        replica here): Kafka's ``ReplicaManager.getPartitionOrError``."""
        partition = self.get(topic, index)
        if partition is not None:
            return partition
        if unknown_id:
            return ErrorCode.unknown_topic_id
        if (topic, index) in self.offline:
            return ErrorCode.kafka_storage_error
        known = self.image.topics_by_name.get(topic) if topic is not None else None
        if known is not None and index in known.partitions:
            return ErrorCode.not_leader_or_follower
        return ErrorCode.unknown_topic_or_partition

    def current_leader(self, topic: str | None, index: int) -> tuple[int, int]:
        """(leader id, leader epoch) of a partition as the image says, (-1, -1) when the
        metadata does not know it: the KIP-951 hint sent with NOT_LEADER_OR_FOLLOWER."""
        known = self.image.topics_by_name.get(topic) if topic is not None else None
        state = known.partitions.get(index) if known is not None else None
        if state is None:
            return (-1, -1)
        return (state.leader, state.leader_epoch)

    def log_config(self, topic: str) -> LogConfig:
        # producer.id.expiration.ms is a broker key (no topic synonym) that the logs' producer
        # state needs: without it every log kept Kafka's default of one day.
        return LogConfig.from_dict({
            **effective_topic_config(self.image, self.config, topic),
            "producer.id.expiration.ms": self.config["producer.id.expiration.ms"],
        })

    def led_partitions(self) -> list[Partition]:
        """The partitions this broker leads now that have other replicas (the ISR manager
        checks them)."""
        return [p for p in self.partitions.values() if p.is_leader and len(p.replicas) > 1]

    def apply_isr_result(self, result: IsrChangeResult) -> None:
        """Apply the controller's answer to an ISR change of a partition led here."""
        if result.error != ErrorCode.none:
            return
        partition = self.get(self.topic_name(result.topic_id), result.partition)
        if partition is not None and partition.topic_id == result.topic_id:
            partition.apply_isr_result(result)

    def on_metadata(self, image: MetadataImage, records: Sequence[MetadataRecord]) -> None:
        """Controller listener: reconcile the topics these records touch."""
        touched: set[str] = set()
        removed: set[str] = set()
        all_topics = False
        for record in records:
            if isinstance(record, RemoveTopicRecord):
                removed.update(t for (t, _), p in self.partitions.items()
                               if p.topic_id == record.topic_id)
            elif isinstance(record, (RegisterBrokerRecord, BrokerRegistrationChangeRecord)):
                continue  # the fence is synced below, whoever the record names
            elif isinstance(record, ConfigRecord):
                if record.resource_type == 2:
                    touched.add(record.resource_name)
                else:
                    all_topics = True
            elif hasattr(record, "topic_id"):
                topic = image.topics_by_id.get(record.topic_id)  # type: ignore[attr-defined]
                if topic is not None:
                    touched.add(topic.name)
        for name in removed:
            self._remove_topic(name)
        self.reconcile(image.topics_by_name if all_topics else touched)
        self._sync_fence()

    def prepare(self, image: MetadataImage, records: Sequence[MetadataRecord]
                ) -> Callable[[], None]:
        """Controller preparer: create (all or none) the logs of the new partitions in
        ``records`` that this broker hosts, before the records are written. Raises
        KafkaStorageError; returns how to remove the new logs if the write then fails."""
        names = {r.topic_id: r.name for r in records if isinstance(r, TopicRecord)}
        specs = []
        for record in records:
            if not isinstance(record, PartitionRecord) or self.node_id not in record.replicas:
                continue
            name = names.get(record.topic_id)
            if name is None:
                known = image.topics_by_id.get(record.topic_id)
                if known is None:
                    continue
                name = known.name
            if (name, record.partition_id) not in self.partitions:
                specs.append((name, record.partition_id, None, kafka_uuid(record.topic_id)))
        if not specs:
            return _nothing
        manager = self.log_manager
        before = {(lg.topic, lg.partition) for lg in manager.all_logs()}
        logs = manager.create_logs(specs, atomic=True)
        fresh = [lg for lg in logs if (lg.topic, lg.partition) not in before]
        return lambda: manager.discard_logs(fresh)

    def reconcile(self, topics: Iterable[str]) -> None:
        image = self.image
        states = []
        missing = []
        for name in list(topics):
            topic = image.topics_by_name.get(name)
            if topic is None:
                continue
            config = self.log_config(name)
            raw_config = effective_topic_config(image, self.config, name)
            for index, state in topic.partitions.items():
                if self.node_id not in state.replicas:
                    # Also a log loaded at start-up that the metadata no longer places here
                    # (reassigned away while this broker was down): a stray, deleted as
                    # KRaft brokers delete strays.
                    if (name, index) in self.partitions or (name, index) in self.offline \
                            or self.log_manager.get_log(name, index) is not None:
                        self._stop_replica(name, index)
                    continue
                states.append((name, index, topic.topic_id, config, raw_config, state))
                if (name, index) not in self.partitions:
                    missing.append((name, index, config, kafka_uuid(topic.topic_id)))
        for partition_log in self._open_logs(missing):
            key = (partition_log.topic, partition_log.partition)
            topic_id = image.topics_by_name[key[0]].topic_id
            partition = Partition(key[0], key[1], topic_id, partition_log,
                                  node_id=self.node_id, purgatory=self.purgatory,
                                  time_ms=self.time_ms)
            partition.fenced = self._fence_applied
            partition.isr_hooks = self.isr_hooks
            self.partitions[key] = partition
        for name, index, _topic_id, config, raw_config, state in states:
            partition = self.partitions.get((name, index))
            if partition is None:
                continue  # offline here
            try:
                if partition.log.config != config:
                    # Logs loaded at start-up were opened before the image had topic configs.
                    partition.log.update_config(config)
                partition.set_topic_config(raw_config)
                partition.apply_state(state)
            except (OSError, KafkaError) as exc:
                # E.g. the leader epoch checkpoint cannot be written (disk full): offline
                # until retry_offline applies the state again.
                del self.partitions[(name, index)]
                message = (f"applying the state of {name}-{index} failed: "
                           f"{getattr(exc, 'message', None) or exc}")
                if (name, index) not in self.offline:
                    log.error("partition %s-%d is offline on this broker: %s", name, index,
                              message)
                self.offline[(name, index)] = message
        self._notify_state_listeners()

    def _open_logs(self, missing: list[tuple[str, int, LogConfig, str]]) -> list[Any]:
        """Open or create logs; those that fail are marked offline instead of stopping the
        reconciliation (and the broker's start)."""
        if not missing:
            return []
        manager = self.log_manager
        try:
            # One batched creation: three fsyncs per new log made a 50-partition topic take
            # ~1 s.
            logs = manager.create_logs(missing)
        except KafkaStorageError:
            logs = []
            for spec in missing:
                try:
                    logs += manager.create_logs([spec])
                except KafkaStorageError as exc:
                    key = (spec[0], spec[1])
                    if key not in self.offline:
                        log.error("partition %s-%d is offline on this broker: %s", key[0],
                                  key[1], exc.message)
                    self.offline[key] = exc.message
        for lg in logs:
            self.offline.pop((lg.topic, lg.partition), None)
        return logs

    def retry_offline(self) -> None:
        """Try again to open the logs of offline partitions (space or descriptors may have
        been freed)."""
        if self.offline:
            self.reconcile({name for name, _index in self.offline})

    def _stop_replica(self, name: str, index: int) -> None:
        """This broker is no longer a replica of ``name``-``index`` (reassigned away): stop
        serving it and delete its log, as Kafka's StopReplica with deletion does."""
        self.offline.pop((name, index), None)
        partition = self.partitions.pop((name, index), None)
        if partition is not None:
            self.purgatory.notify((name, index))
        if self.log_manager.delete_log(name, index):
            log.info("deleted the log of %s-%d: this broker is no longer one of its replicas",
                     name, index)

    def _remove_topic(self, name: str) -> None:
        for key in [k for k in self.offline if k[0] == name]:
            del self.offline[key]
        for key in [k for k in self.partitions if k[0] == name]:
            partition = self.partitions.pop(key)
            self.log_manager.delete_log(partition.topic, partition.index)
            self.purgatory.notify(key)
        log.info("deleted the logs of topic %s", name)

    def _refusal(self, error: ErrorCode, topic: str, index: int) -> str:
        """The message that goes with a :meth:`leader_partition` error."""
        if error == ErrorCode.kafka_storage_error:
            return self.offline.get((topic, index), f"The log of {topic}-{index} is offline")
        if error == ErrorCode.unknown_topic_or_partition:
            return f"This server does not host this topic-partition: {topic}-{index}"
        leader, _epoch = self.current_leader(topic, index)
        if self.fenced:
            return f"Broker {self.node_id} is fenced and leads no partition"
        if leader < 0:
            return f"{topic}-{index} has no leader at the moment"
        return f"Broker {self.node_id} is not the leader of {topic}-{index} (broker {leader} is)"

    # --- produce -------------------------------------------------------------------------
    def reject(self, error: ErrorCode, message: str) -> ProduceOutcome:
        return ProduceOutcome(error, message)

    def append_records(self, topic: str, index: int, records: bytes | memoryview | None, *,
                       acks: int, transactional_id: str | None, internal: bool = False,
                       origin: str = ORIGIN_CLIENT,
                       verification_guard: object | None = None) -> ProduceOutcome:
        """Validate and append a produce's records as leader. ``origin`` "coordinator" (the
        group and transaction coordinators) skips sequence checks and keeps epoch checks;
        ``verification_guard`` see :meth:`Partition.append_as_leader` (KIP-890)."""
        if topic in INTERNAL_TOPICS and not internal:
            return ProduceOutcome(ErrorCode.invalid_topic_exception,
                                  f"Cannot append to internal topic {topic}")
        partition = self.leader_partition(topic, index)
        if isinstance(partition, ErrorCode):
            return ProduceOutcome(partition, self._refusal(partition, topic, index))
        config = partition.log.config
        before_max, after_max, min_isr, compression = partition.produce_limits
        checked = check_record_set(
            records,
            max_message_bytes=config.max_message_bytes,
            segment_bytes=config.segment_bytes,
            now_ms=self.time_ms(),
            timestamp_before_max_ms=before_max,
            timestamp_after_max_ms=after_max,
            log_append_time=config.message_timestamp_type == "LogAppendTime",
            compacted=config.compact,
            control_allowed=origin != ORIGIN_CLIENT,
        )
        if isinstance(checked, Rejection):
            return ProduceOutcome(checked.code, checked.message)
        if acks == -1 and len(partition.isr) < min_isr:
            return ProduceOutcome(
                ErrorCode.not_enough_replicas,
                f"The ISR of {topic}-{index} has {len(partition.isr)} members; "
                f"min.insync.replicas is {min_isr}")
        assert records is not None
        # Not copied here: the log copies small read-only sets and writes large ones as they are.
        buf: bytes | bytearray | memoryview = records
        if compression != "producer":
            target = _TARGET_CODECS.get(compression)
            if target is not None and any(h.compression != target for h in checked):
                buf, checked = recompress(buf, checked, target)
        try:
            result = partition.append_as_leader(buf, checked, origin=origin,
                                                verification_guard=verification_guard)
        except KafkaError as exc:
            return ProduceOutcome(exc.code, exc.message)
        wait = None
        if acks == -1 and partition.high_watermark <= result.last_offset:
            wait = result.last_offset + 1
        return ProduceOutcome(ErrorCode.none, None, result.first_offset,
                              result.log_append_time_ms, result.log_start_offset, wait)

    def append_internal(self, topic: str, index: int, batch: bytes) -> ProduceOutcome:
        """Append an already-built batch to an internal topic (group and transaction
        coordinators). Same validation and offset assignment as a client produce."""
        return self.append_records(topic, index, batch, acks=1, transactional_id=None,
                                   internal=True)

    def iter_batches(self, topic: str, index: int, start: int | None = None,
                     chunk_bytes: int = 1 << 20) -> Iterator[bytes | memoryview]:
        """Raw chunks of whole batches of a hosted partition from ``start`` (default: the log
        start) to the log end, for coordinators loading their state."""
        partition = self.partitions.get((topic, index))
        if partition is None:
            return
        offset = partition.log.log_start_offset if start is None else start
        while offset < partition.log.log_end_offset:
            result = partition.log.read(offset, chunk_bytes)
            if not result.records:
                return
            yield result.records
            last = None
            for _pos, header in iter_batches(result.records):
                last = header
            if last is None:
                return
            offset = last.next_offset

    async def append_markers(self, markers: Sequence[EndMarker], timeout_ms: int = 30000
                             ) -> dict[tuple[int, tuple[str, int]], ErrorCode]:
        """Append the COMMIT/ABORT markers of ``markers`` to the partitions led here and wait
        for their ISR (acks=-1, up to ``timeout_ms``); the error of every (producer id,
        partition), as WriteTxnMarkers answers them (:mod:`.control_append`)."""
        return await append_markers(self, markers, timeout_ms)

    async def wait_for_isr(self, topic: str, index: int, offset: int,
                           timeout_ms: int) -> ErrorCode:
        """Wait until the high watermark passes ``offset`` (acks=all). As Kafka's
        DelayedProduce: once it has, an ISR that shrank below ``min.insync.replicas`` meanwhile
        answers NOT_ENOUGH_REPLICAS_AFTER_APPEND (the records are written, but on fewer
        replicas than the producer asked for; it retries)."""
        import time

        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            partition = self.partitions.get((topic, index))
            if partition is None or not partition.is_leader:
                return ErrorCode.not_leader_or_follower
            if partition.high_watermark >= offset:
                if len(partition.isr) < partition.produce_limits[2]:
                    return ErrorCode.not_enough_replicas_after_append
                return ErrorCode.none
            if not await self.purgatory.wait([(topic, index)], deadline - time.monotonic()):
                return ErrorCode.request_timed_out
