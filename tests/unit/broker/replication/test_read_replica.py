"""Fetch from the closest replica (KIP-392) over real Partitions and logs in a tmp dir: the
rack-aware selector's choice (Kafka's ``RackAwareReplicaSelector``), the leader's preferred
read replica (ISR members holding the offset, reachable on the listener), and what a
follower answers a consumer (records up to its high watermark, OFFSET_OUT_OF_RANGE, empty
answers between its high watermark and log end, leader-only for Fetch v4-10)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from moldau.broker.config import ConfigError, load_config
from moldau.broker.metadata.image import (
    BrokerRegistration,
    MetadataImage,
    PartitionState,
    TopicImage,
)
from moldau.broker.metadata.records import BrokerEndpoint
from moldau.broker.partition import Partition
from moldau.broker.purgatory import Purgatory
from moldau.broker.replica_manager import FetchTarget, ReplicaManager
from moldau.broker.replication.read_replica import (
    RACK_AWARE_CLASS,
    ConsumerFetch,
    ReplicaView,
    rack_aware_select,
    read_for_consumer,
    redirects,
    selector_for,
)
from moldau.protocol.errors import ErrorCode as E
from moldau.protocol.records.batch import validate_batches

from ...storage.helpers import make_batch, open_log

RACKS = {1: "a", 2: "b", 3: "c"}
NOW = 100_000


def view(broker: int, rack: str | None, leo: int = 10, since: int = 0) -> ReplicaView:
    return ReplicaView(broker, rack, leo, since)


def test_rack_aware_select_is_kafkas() -> None:
    leader = view(1, "a")
    others = [leader, view(2, "b"), view(3, "c", leo=8), view(4, "c", leo=9, since=50),
              view(5, "c", leo=9, since=10)]
    assert rack_aware_select("", leader, others) is leader          # no client rack
    assert rack_aware_select("z", leader, others) is leader         # no replica there
    assert rack_aware_select("a", leader, others) is leader         # the leader's own rack
    assert rack_aware_select("b", leader, others).broker_id == 2
    # Most caught up: largest log end, then most recently caught up.
    assert rack_aware_select("c", leader, others).broker_id == 5
    assert rack_aware_select("a", leader, [leader, view(6, "a", leo=99)]) is leader


def test_the_config_takes_kafkas_class_name_and_names_a_bad_one() -> None:
    # As `moldau serve` loads it: defaults, KAFKA_* environment, --override.
    assert load_config(None, [], {})["replica.selector.class"] is None
    assert selector_for(None) is None
    env = {"KAFKA_REPLICA_SELECTOR_CLASS": RACK_AWARE_CLASS}
    assert selector_for(load_config(None, [], env)["replica.selector.class"]) \
        is rack_aware_select
    assert selector_for(load_config(None, ["replica.selector.class=rack-aware"], {})[
        "replica.selector.class"]) is rack_aware_select
    with pytest.raises(ConfigError) as caught:
        load_config(None, ["replica.selector.class=com.example.NearestSelector"], {})
    assert "replica.selector.class" in str(caught.value)
    assert "com.example.NearestSelector" in str(caught.value)
    assert RACK_AWARE_CLASS in str(caught.value)  # and what it may be


class Manager:
    """The parts of a ReplicaManager a consumer's read uses, over real Partitions."""

    def __init__(self, image: MetadataImage, partitions: dict[tuple[str, int], Partition]):
        self.image = image
        self.partitions = partitions
        self.offline: dict[tuple[str, int], str] = {}

    get = ReplicaManager.get
    hosted_partition = ReplicaManager.hosted_partition
    current_leader = ReplicaManager.current_leader


def cluster_image(isr: list[int], leader: int = 1, epoch: int = 3) -> MetadataImage:
    image = MetadataImage()
    topic = TopicImage("t", uuid.uuid4(), {0: PartitionState(0, [1, 2, 3], isr, leader, epoch,
                                                             epoch)})
    image.topics_by_name["t"] = topic
    image.topics_by_id[topic.topic_id] = topic
    for broker, rack in RACKS.items():
        image.brokers[broker] = BrokerRegistration(
            broker, uuid.uuid4(), [BrokerEndpoint("CLIENT", "127.0.0.1", 9000 + broker)],
            rack, False)
    return image


def hosted(tmp_path: Path, node_id: int, image: MetadataImage) -> tuple[Manager, Partition]:
    log = open_log(str(tmp_path / f"n{node_id}" / "t-0"))
    partition = Partition("t", 0, image.topics_by_name["t"].topic_id, log, node_id=node_id,
                          purgatory=Purgatory(), time_ms=lambda: NOW)
    partition.apply_state(image.topics_by_name["t"].partitions[0])
    return Manager(image, {("t", 0): partition}), partition


def fetch(manager: Manager, offset: int, *, rack: str = "c", version: int = 16,
          epoch: int = 3, selector: Any = rack_aware_select) -> Any:
    request = ConsumerFetch(version, rack, "CLIENT", False, selector)
    read = read_for_consumer(manager, [("t", [FetchTarget("t", 0, offset, 1 << 20, epoch)])],
                             1 << 20, request, NOW)  # type: ignore[arg-type]
    [(_, [entry])] = read.topics
    return read, entry


def test_the_leader_prefers_an_in_sync_follower_in_the_consumers_rack(tmp_path: Path) -> None:
    manager, leader = hosted(tmp_path, 1, cluster_image([1, 2, 3]))
    batch = make_batch(5)
    leader.append_as_leader(batch, validate_batches(batch))
    for follower in (2, 3):
        leader.record_follower_fetch(follower, 5, 0)
    assert leader.high_watermark == 5
    read, entry = fetch(manager, 2)
    assert entry.preferred_read_replica == 3 and entry.records == b""
    assert entry.error_code == E.none and entry.high_watermark == 5
    assert redirects(read)  # answered at once, not parked in the purgatory
    # The leader's own rack, no rack, a rack without replicas, no selector: the leader reads.
    for kwargs in ({"rack": "a"}, {"rack": ""}, {"rack": "z"}, {"selector": None}):
        read, entry = fetch(manager, 2, **kwargs)
        assert entry.preferred_read_replica == -1 and entry.records, kwargs
        assert not redirects(read)
    # Fetch v10 carries no rack: no selection, the leader reads.
    _, entry = fetch(manager, 2, version=10)
    assert entry.preferred_read_replica == -1 and entry.records


def test_a_follower_out_of_the_isr_or_behind_the_offset_is_not_chosen(tmp_path: Path) -> None:
    image = cluster_image([1, 2, 3])
    manager, leader = hosted(tmp_path, 1, image)
    batch = make_batch(5)
    leader.append_as_leader(batch, validate_batches(batch))
    leader.record_follower_fetch(2, 5, 0)
    leader.record_follower_fetch(3, 3, 0)
    assert fetch(manager, 3)[1].preferred_read_replica == 3
    assert fetch(manager, 4)[1].preferred_read_replica == -1   # broker 3 has up to 3 only
    image.brokers[3].fenced = True
    assert fetch(manager, 3)[1].preferred_read_replica == -1   # not a live broker
    image.brokers[3].fenced = False
    image.brokers[3].endpoints = [BrokerEndpoint("OTHER", "127.0.0.1", 9103)]
    assert fetch(manager, 3)[1].preferred_read_replica == -1   # unreachable on this listener
    image.brokers[3].endpoints = [BrokerEndpoint("CLIENT", "127.0.0.1", 9103)]
    # Broker 3 leaves the ISR: the leader stops choosing it.
    leader.apply_state(PartitionState(0, [1, 2, 3], [1, 2], 1, 3, 4))
    assert fetch(manager, 3)[1].preferred_read_replica == -1


def test_a_follower_serves_consumers_up_to_its_high_watermark(tmp_path: Path) -> None:
    image = cluster_image([1, 2, 3])
    _, leader = hosted(tmp_path / "l", 1, image)
    manager, follower = hosted(tmp_path, 3, image)
    for count in (4, 2):
        batch = make_batch(count)
        leader.append_as_leader(batch, validate_batches(batch))
    data = leader.read(0, 1 << 20, False, True, up_to_log_end=True).records

    async def append() -> bool:
        waiter = follower.purgatory.watch([("t", 0)])
        follower.append_as_follower(bytes(data), leader_high_watermark=4)
        return waiter.done()

    # The high watermark's move wakes the long polls of consumers reading here.
    assert asyncio.run(append())
    assert (follower.log_end_offset, follower.high_watermark) == (6, 4)
    read, entry = fetch(manager, 0)
    assert entry.error_code == E.none and entry.preferred_read_replica == -1
    # Whole batches up to the high watermark: offsets 0-3, not the batch of 4-5.
    assert [h.last_offset for h in validate_batches(bytes(entry.records))] == [3]
    assert entry.high_watermark == 4
    # Between the high watermark and the log end: nothing yet, no error (long-polls).
    read, entry = fetch(manager, 5)
    assert (entry.error_code, entry.records, read.has_error) == (E.none, b"", False)
    # Past the log end: OFFSET_OUT_OF_RANGE (the client asks the leader) ...
    _, entry = fetch(manager, 7)
    assert entry.error_code == E.offset_out_of_range
    # ... except for a consumer without a leader epoch (stale metadata, perhaps: a client
    # without KIP-320 would reset its position).
    for version in (11, 12, 16):
        _, entry = fetch(manager, 7, version=version, epoch=-1)
        assert (entry.error_code, entry.records) == (E.none, b""), version
    # Fetch v4-10 reads from the leader only; epochs are checked as on a leader.
    _, entry = fetch(manager, 0, version=10)
    assert entry.error_code == E.not_leader_or_follower and entry.current_leader == (1, 3)
    assert fetch(manager, 0, epoch=2)[1].error_code == E.fenced_leader_epoch
    assert fetch(manager, 0, epoch=4)[1].error_code == E.unknown_leader_epoch
    # A long poll that began on the leader is sent back to the leader once it moved.
    request = ConsumerFetch(16, "c", "CLIENT", False, None, frozenset({("t", 0)}))
    read = read_for_consumer(manager, [("t", [FetchTarget("t", 0, 0, 1 << 20, 3)])],  # type: ignore[arg-type]
                             1 << 20, request, NOW)
    assert read.topics[0][1][0].error_code == E.not_leader_or_follower
    # A follower never redirects (only the leader chooses) ...
    assert fetch(manager, 0, rack="b")[1].preferred_read_replica == -1
    # ... and a fenced one, or one whose partition has no leader, sends clients away.
    follower.set_fenced(True)
    assert fetch(manager, 0)[1].error_code == E.not_leader_or_follower
    follower.set_fenced(False)
    follower.apply_state(PartitionState(0, [1, 2, 3], [3], -1, 4, 4))
    assert fetch(manager, 0, epoch=4)[1].error_code == E.not_leader_or_follower
