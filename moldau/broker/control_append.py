"""Transaction markers appended to partitions led here (``ReplicaManager.append_markers``).

What Kafka's ``ReplicaManager.appendRecords`` does for WriteTxnMarkers: each marker is one
control batch (:func:`moldau.protocol.records.control.build_end_txn_marker`) appended with the
coordinator origin (epoch checks, no sequence checks) and acks=-1, so the answer waits until
the ISR has it. Per (producer id, partition): the ``leader_partition`` errors
(UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR), NOT_ENOUGH_REPLICAS
(ISR below ``min.insync.replicas`` before the append), the producer state's
INVALID_PRODUCER_EPOCH / TRANSACTION_COORDINATOR_FENCED, then the ISR wait's
NOT_ENOUGH_REPLICAS_AFTER_APPEND / REQUEST_TIMED_OUT / NOT_LEADER_OR_FOLLOWER.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Protocol

from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.records.control import build_end_txn_marker

MarkerKey = tuple[int, tuple[str, int]]


class EndMarker(Protocol):
    """What a marker to append is (:class:`moldau.broker.txn.markers.TxnMarker`)."""

    @property
    def pid(self) -> int: ...
    @property
    def epoch(self) -> int: ...
    @property
    def commit(self) -> bool: ...
    @property
    def coordinator_epoch(self) -> int: ...
    @property
    def tps(self) -> Sequence[tuple[str, int]]: ...


async def append_markers(manager: Any, markers: Sequence[EndMarker],
                         timeout_ms: int) -> dict[MarkerKey, ErrorCode]:
    """Append every marker of ``markers`` to each of its partitions led by ``manager`` (the
    :class:`~.replica_manager.ReplicaManager`), then wait for the ISR; the error of each
    (producer id, (topic, partition))."""
    results: dict[MarkerKey, ErrorCode] = {}
    waits: list[tuple[MarkerKey, int]] = []
    now = manager.time_ms()
    for marker in markers:
        batch = build_end_txn_marker(marker.pid, marker.epoch, marker.coordinator_epoch,
                                     marker.commit, now)
        for topic, index in marker.tps:
            key = (marker.pid, (topic, index))
            partition = manager.leader_partition(topic, index)
            if isinstance(partition, ErrorCode):
                results[key] = partition
                continue
            if len(partition.isr) < partition.produce_limits[2]:
                results[key] = ErrorCode.not_enough_replicas
                continue
            try:
                info = partition.append_control(batch)
            except KafkaError as exc:
                results[key] = ErrorCode(exc.code)
                continue
            waits.append((key, info.last_offset + 1))
    deadline = time.monotonic() + timeout_ms / 1000
    for key, offset in waits:
        topic, index = key[1]
        left_ms = max(int((deadline - time.monotonic()) * 1000), 0)
        results[key] = await manager.wait_for_isr(topic, index, offset, left_ms)
    return results
