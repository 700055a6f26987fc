"""The controller within the limits of one metadata batch and of local storage (issue 11,
defects 6, 7 and 9): a request whose records exceed one batch is split on topic boundaries,
a topic that alone exceeds it is refused (the same answer with validate_only), and a change
that a preparer (the replica manager creating logs) or the store refuses leaves nothing
behind and is answered with an error code, never raised to the handler."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from moldau.broker.metadata.controller import (
    MAX_PARTITIONS_PER_REQUEST,
    Controller,
    TopicSpec,
    batch_size,
)
from moldau.broker.metadata.image import MetadataImage
from moldau.broker.metadata.log import METADATA_MAX_BATCH_BYTES
from moldau.broker.metadata.records import BrokerEndpoint, MetadataRecord, PartitionRecord
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.storage.errors import KafkaStorageError

from .sync_controller import SyncController


class BatchStore:
    """Metadata batches kept in a list; refuses batches over ``limit`` bytes as the log does,
    and fails every append while ``broken`` is set (a full disk)."""

    def __init__(self, limit: int) -> None:
        self.batches: list[list[MetadataRecord]] = []
        self.limit = limit
        self.broken = False

    async def append(self, records: Sequence[MetadataRecord]) -> int:
        if self.broken:
            raise KafkaStorageError("append to .../__cluster_metadata-0 failed: No space")
        assert batch_size(records) <= self.limit
        self.batches.append(list(records))
        return sum(len(b) for b in self.batches) - 1


def make(limit: int) -> SyncController:
    c = SyncController(Controller(MetadataImage(), BatchStore(limit),
                                  default_partitions=lambda: 1,
                                  default_replication_factor=lambda: 1, max_batch_bytes=limit))
    c.register_broker(1, [BrokerEndpoint("PLAINTEXT", "h", 9092)], None)
    return c


def test_the_largest_request_fits_one_metadata_batch() -> None:
    """10,000 partitions (the per-request limit) made a 2 MB batch that message.max.bytes
    (1 MiB) refused after 5,510 partitions; the metadata log takes 8 MiB batches (KRaft's
    limit)."""
    c = make(METADATA_MAX_BATCH_BYTES)
    [result] = c.create_topics([TopicSpec("big", MAX_PARTITIONS_PER_REQUEST, 1)])
    assert result.error == ErrorCode.none
    assert len(c.image.topics_by_name["big"].partitions) == MAX_PARTITIONS_PER_REQUEST
    assert c.create_partitions("big", MAX_PARTITIONS_PER_REQUEST * 2, None) == (
        ErrorCode.none, None)


def test_topics_are_split_over_batches_and_each_topic_is_atomic() -> None:
    c = make(64 << 10)
    specs = [TopicSpec(f"t{i}", 200, 1) for i in range(6)]
    results = c.create_topics(specs)
    assert [r.error for r in results] == [ErrorCode.none] * 6
    store = c.store
    assert isinstance(store, BatchStore) and len(store.batches) > 1
    for batch in store.batches:  # no topic is cut in two
        ids = {r.topic_id for r in batch if isinstance(r, PartitionRecord)}
        for topic_id in ids:
            assert sum(1 for r in batch if isinstance(r, PartitionRecord)
                       and r.topic_id == topic_id) == 200


@pytest.mark.parametrize("validate_only", [True, False])
def test_a_topic_larger_than_a_batch_is_refused_alike(validate_only: bool) -> None:
    c = make(64 << 10)
    results = c.create_topics([TopicSpec("small", 2, 1), TopicSpec("huge", 2000, 1)],
                              validate_only=validate_only)
    assert results[0].error == ErrorCode.none
    assert results[1].error == ErrorCode.record_list_too_large
    assert "metadata batch" in (results[1].message or "")
    assert ("huge" in c.image.topics_by_name) is False
    assert ("small" in c.image.topics_by_name) is not validate_only


@pytest.mark.parametrize("validate_only", [True, False])
def test_create_partitions_larger_than_a_batch_is_refused_alike(validate_only: bool) -> None:
    c = make(64 << 10)
    c.create_topics([TopicSpec("t", 1, 1)])
    code, message = c.create_partitions("t", 2000, None, validate_only=validate_only)
    assert code == ErrorCode.record_list_too_large and "metadata batch" in (message or "")
    assert len(c.image.topics_by_name["t"].partitions) == 1


def test_a_refusing_preparer_leaves_nothing_and_answers_its_error() -> None:
    c = make(METADATA_MAX_BATCH_BYTES)
    seen: list[int] = []

    def refuse(_image: MetadataImage, records: Sequence[MetadataRecord]):
        seen.append(len(records))
        raise KafkaStorageError("Cannot create the log of t-3 in /data: Too many open files")

    c.preparers.append(refuse)
    [result] = c.create_topics([TopicSpec("t", 5, 1)])
    assert result.error == ErrorCode.kafka_storage_error
    assert "Too many open files" in (result.message or "")
    assert "t" not in c.image.topics_by_name and seen == [6]
    store = c.store
    assert isinstance(store, BatchStore) and len(store.batches) == 1  # the registration only


def test_a_failed_write_undoes_the_preparation() -> None:
    c = make(METADATA_MAX_BATCH_BYTES)
    undone: list[str] = []
    c.preparers.append(lambda _i, _r: (lambda: undone.append("undo")))
    store = c.store
    assert isinstance(store, BatchStore)
    store.broken = True
    [result] = c.create_topics([TopicSpec("t", 2, 1)])
    assert result.error == ErrorCode.kafka_storage_error and undone == ["undo"]
    assert c.create_partitions("x", 2, None)[0] == ErrorCode.unknown_topic_or_partition
    store.broken = False
    [again] = c.create_topics([TopicSpec("t", 2, 1)])
    assert again.error == ErrorCode.none and "t" in c.image.topics_by_name
    store.broken = True
    assert c.delete_topics(["t"])["t"][0] == ErrorCode.kafka_storage_error
    assert c.alter_configs(2, "t", {"retention.ms": "1000"})[0] == ErrorCode.kafka_storage_error
    assert c.create_partitions("t", 4, None)[0] == ErrorCode.kafka_storage_error
    with pytest.raises(KafkaError):
        c.allocate_producer_ids(1)
