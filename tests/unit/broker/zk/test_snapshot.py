"""ZooKeeper's znodes as metadata records: decode the layout, diff against an image, and
replaying the diff makes the image equal to ZooKeeper's state (the diff is then empty)."""

from __future__ import annotations

import uuid

from kazoo.protocol.states import ZnodeStat

from moldau.broker.metadata.image import MetadataImage
from moldau.broker.metadata.records import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    BrokerEndpoint,
    ConfigRecord,
    ControllerChangeRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnregisterBrokerRecord,
)
from moldau.broker.zk import layout
from moldau.broker.zk.admin_layout import EntityConfig, ProducerIdBlock
from moldau.broker.zk.layout import (
    BrokerRegistration,
    ControllerEpoch,
    ControllerRegistration,
    Endpoint,
    PartitionState,
    TopicAssignment,
)
from moldau.broker.zk.snapshot import (
    CONFIG_BROKERS_PATH,
    CONFIG_TOPICS_PATH,
    decode,
    diff,
    incarnation_of,
    paths_to_read,
)

ORDERS = uuid.UUID("11111111-2222-3333-4444-555555555555")


def stat(version: int = 0, czxid: int = 1) -> ZnodeStat:
    return ZnodeStat(czxid, czxid, 0, 0, version, 0, 0, 0, 0, 0, czxid)


class Cluster:
    """A ZooKeeper tree as the sync's cache holds it."""

    def __init__(self) -> None:
        self.data: dict[str, tuple[bytes, ZnodeStat]] = {}
        self.children: dict[str, list[str]] = {
            layout.BROKER_IDS: [], layout.TOPICS: [], CONFIG_TOPICS_PATH: [],
            CONFIG_BROKERS_PATH: []}

    def put(self, path: str, data: bytes, version: int = 0, czxid: int = 1) -> None:
        self.data[path] = (data, stat(version, czxid))
        parent, name = path.rsplit("/", 1)
        if parent in self.children and name not in self.children[parent]:
            self.children[parent].append(name)

    def remove(self, path: str) -> None:
        del self.data[path]
        parent, name = path.rsplit("/", 1)
        if parent in self.children:
            self.children[parent].remove(name)

    def broker(self, broker_id: int, czxid: int = 1, rack: str | None = None) -> None:
        registration = BrokerRegistration(
            broker_id, (Endpoint("PLAINTEXT", "h", 9000 + broker_id, "PLAINTEXT"),), rack=rack)
        self.put(layout.broker_path(broker_id), registration.to_json(), czxid=czxid)

    def topic(self, name: str, topic_id: uuid.UUID, replicas: dict[int, list[int]]) -> None:
        self.put(layout.topic_path(name), TopicAssignment.of(replicas, topic_id).to_json())

    def state(self, name: str, p: int, leader: int, epoch: int, isr: list[int],
              version: int) -> None:
        self.put(layout.partition_state_path(name, p),
                 PartitionState(leader, epoch, tuple(isr), 1).to_json(), version)

    def records(self, image: MetadataImage) -> list:
        return diff(image, decode(self.data, self.children))


def _cluster() -> Cluster:
    zk = Cluster()
    zk.put(layout.CONTROLLER, ControllerRegistration(2).to_json())
    zk.put(layout.CONTROLLER_EPOCH, ControllerEpoch(3).to_json())
    zk.broker(1)
    zk.broker(2, rack="r2")
    zk.topic("orders", ORDERS, {0: [1, 2], 1: [2, 1]})
    zk.state("orders", 0, 1, 0, [1, 2], 0)
    zk.state("orders", 1, 2, 4, [2], 6)
    zk.put(layout.topic_config_path("orders"), EntityConfig({"retention.ms": "1"}).to_json())
    zk.put(layout.broker_config_path(None), EntityConfig({"log.retention.ms": "5"}).to_json())
    zk.put(layout.LATEST_PRODUCER_ID_BLOCK, ProducerIdBlock(1, 0, 999).to_json())
    return zk


def replay(image: MetadataImage, records: list) -> MetadataImage:
    for record in records:
        image.replay(record)
    return image


def test_a_full_snapshot_is_the_records_of_the_cluster() -> None:
    zk = _cluster()
    records = zk.records(MetadataImage())
    assert records == [
        ControllerChangeRecord(2, 3),
        RegisterBrokerRecord(1, incarnation_of(1, 1), [BrokerEndpoint("PLAINTEXT", "h", 9001)]),
        RegisterBrokerRecord(2, incarnation_of(2, 1), [BrokerEndpoint("PLAINTEXT", "h", 9002)],
                             "r2"),
        TopicRecord("orders", ORDERS),
        PartitionRecord(ORDERS, 0, [1, 2], [1, 2], 1, 0, 0),
        PartitionRecord(ORDERS, 1, [2, 1], [2], 2, 4, 6),
        ConfigRecord(TOPIC_RESOURCE, "orders", "retention.ms", "1"),
        ConfigRecord(BROKER_RESOURCE, "", "log.retention.ms", "5"),
        ProducerIdsRecord(1, 1000),
    ]
    image = replay(MetadataImage(), records)
    assert zk.records(image) == []
    assert image.topics_by_name["orders"].partitions[1].partition_epoch == 6


def test_changes_become_the_records_that_replay_them() -> None:
    zk = _cluster()
    image = replay(MetadataImage(), zk.records(MetadataImage()))
    # one step of a partition: a PartitionChangeRecord; several: the whole PartitionRecord
    zk.state("orders", 0, 2, 1, [2], 1)
    zk.state("orders", 1, 2, 4, [2, 1], 8)
    # a broker gone, one re-registered (a new znode), a new controller
    zk.remove(layout.broker_path(1))
    zk.broker(2, czxid=77, rack="r2")
    zk.put(layout.CONTROLLER, ControllerRegistration(1).to_json())
    zk.put(layout.CONTROLLER_EPOCH, ControllerEpoch(4).to_json())
    zk.put(layout.topic_config_path("orders"), EntityConfig({"cleanup.policy": "compact"}
                                                            ).to_json())
    zk.put(layout.LATEST_PRODUCER_ID_BLOCK, ProducerIdBlock(2, 1000, 1999).to_json())
    records = zk.records(image)
    assert records == [
        ControllerChangeRecord(1, 4),
        UnregisterBrokerRecord(1),
        RegisterBrokerRecord(2, incarnation_of(2, 77),
                             [BrokerEndpoint("PLAINTEXT", "h", 9002)], "r2"),
        PartitionChangeRecord(ORDERS, 0, leader=2, isr=[2]),
        PartitionRecord(ORDERS, 1, [2, 1], [2, 1], 2, 4, 8),
        ConfigRecord(TOPIC_RESOURCE, "orders", "cleanup.policy", "compact"),
        ConfigRecord(TOPIC_RESOURCE, "orders", "retention.ms", None),
        ProducerIdsRecord(2, 2000),
    ]
    replay(image, records)
    assert zk.records(image) == []
    assert image.topics_by_name["orders"].partitions[0].leader_epoch == 1


def test_deleted_and_recreated_topics() -> None:
    zk = _cluster()
    image = replay(MetadataImage(), zk.records(MetadataImage()))
    # recreated under the same name: a new id
    new_id = uuid.uuid4()
    zk.topic("orders", new_id, {0: [2]})
    zk.state("orders", 0, 2, 0, [2], 0)
    zk.put(layout.topic_config_path("orders"), EntityConfig({"retention.ms": "1"}).to_json())
    records = zk.records(image)
    assert records[:3] == [RemoveTopicRecord(ORDERS), TopicRecord("orders", new_id),
                           PartitionRecord(new_id, 0, [2], [2], 2, 0, 0)]
    assert records[3:] == [ConfigRecord(TOPIC_RESOURCE, "orders", "retention.ms", "1")]
    replay(image, records)
    assert zk.records(image) == []
    # deleted
    for p in (0, 1):
        zk.data.pop(layout.partition_state_path("orders", p), None)
    zk.remove(layout.topic_path("orders"))
    zk.remove(layout.topic_config_path("orders"))
    assert zk.records(image) == [RemoveTopicRecord(new_id)]
    replay(image, zk.records(image))
    assert image.topics_by_name == {} and image.topic_configs == {}


def test_what_is_not_there_yet_or_not_kafkas_is_left_alone() -> None:
    zk = _cluster()
    image = replay(MetadataImage(), zk.records(MetadataImage()))
    # a partition in the assignment without its state znode (being created)
    zk.topic("orders", ORDERS, {0: [1, 2], 1: [2, 1], 2: [1, 2]})
    # a topic written by a pre-2.8 tool (no topic id)
    zk.put(layout.topic_path("legacy"), b'{"version":1,"partitions":{"0":[1]}}')
    # a broker registration that is not JSON
    zk.put(layout.broker_path(3), b"garbage")
    assert zk.records(image) == []
    assert layout.partition_state_path("orders", 2) in paths_to_read(
        zk.children, {"orders": decode(zk.data, zk.children).topics["orders"]})
    # a state that is not Kafka's JSON: the image keeps what it had
    zk.put(layout.partition_state_path("orders", 0), b"{}", version=9)
    assert zk.records(image) == []


def test_every_malformed_znode_is_skipped_with_a_warning_naming_it(caplog) -> None:
    zk = _cluster()
    zk.broker(3)
    zk.topic("bad-state", uuid.uuid4(), {0: [1]})
    broken = {
        layout.CONTROLLER: "/controller",
        layout.CONTROLLER_EPOCH: "/controller_epoch",
        layout.broker_path(3): "broker 3",
        layout.topic_path("bad-state"): "topic bad-state",
        layout.partition_state_path("orders", 1): "partition orders-1",
        layout.topic_config_path("orders"): layout.topic_config_path("orders"),
        layout.broker_config_path(None): layout.broker_config_path(None),
        layout.LATEST_PRODUCER_ID_BLOCK: "/latest_producer_id_block",
    }
    for path in broken:
        zk.put(path, b"not json")
    with caplog.at_level("WARNING", logger="moldau.broker.zk.snapshot"):
        state = decode(zk.data, zk.children)
    assert (state.controller_id, state.controller_epoch) == (-1, -1)
    assert sorted(state.brokers) == [1, 2]
    assert sorted(state.topics) == ["orders"]
    assert sorted(state.partitions) == [("orders", 0)]
    assert state.topic_configs == {} and state.broker_configs == {}
    assert state.producer_id_block is None
    warnings = [r.getMessage() for r in caplog.records]
    for what in broken.values():
        assert any(message.startswith(f"ignoring {what}: ") for message in warnings), (
            what, warnings)
