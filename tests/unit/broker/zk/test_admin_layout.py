"""Kafka's ZooKeeper layout, continued (moldau.broker.zk.admin_layout): configs, change
notifications, admin requests, producer id blocks, features."""

from __future__ import annotations

import pytest

from moldau.broker.zk import admin_layout as al
from moldau.broker.zk.layout import ZNodeFormatError


def test_entity_config_round_trip_and_tolerance() -> None:
    raw = b'{"version":1,"config":{"retention.ms":"86400000","cleanup.policy":"compact"}}'
    config = al.EntityConfig.from_json(raw, "/config/topics/t")
    assert config.config == {"retention.ms": "86400000", "cleanup.policy": "compact"}
    assert config.to_json() == raw
    assert al.EntityConfig({}).to_json() == b'{"version":1,"config":{}}'
    # what Kafka reads as "no overrides"
    for empty in (None, b"", b'{"version":1}', b'{"version":1,"config":[]}'):
        assert al.EntityConfig.from_json(empty).config == {}
    with pytest.raises(ZNodeFormatError, match="/config/brokers/1: config 'x' must be a string"):
        al.EntityConfig.from_json(b'{"version":1,"config":{"x":1}}', "/config/brokers/1")


def test_config_change_notification_versions() -> None:
    raw = b'{"version":2,"entity_path":"brokers/<default>"}'
    change = al.ConfigChangeNotification.from_json(raw, "config_change_0000000000")
    assert (change.entity_type, change.entity_name) == ("brokers", "<default>")
    assert change.to_json() == raw
    v1 = al.ConfigChangeNotification.from_json(
        b'{"version":1,"entity_type":"topics","entity_name":"orders"}')
    assert v1 == al.ConfigChangeNotification("topics/orders", 1)
    assert v1.to_json() == b'{"version":1,"entity_type":"topics","entity_name":"orders"}'
    nested = al.ConfigChangeNotification.from_json(
        b'{"version":2,"entity_path":"users/alice/clients/app"}')
    assert nested.entity_name == "alice/clients/app"


@pytest.mark.parametrize(("raw", "message"), [
    (b'{"version":3,"entity_path":"topics/t"}', "unsupported version 3"),
    (b'{"version":1,"entity_type":"brokers","entity_name":"1"}', "'topics' or 'clients'"),
    (b'{"version":2,"entity_path":"widgets/x"}', "entity_path must start with one of topics/"),
    (b'{"version":2}', "missing field 'entity_path'"),
])
def test_config_change_notification_errors(raw: bytes, message: str) -> None:
    with pytest.raises(ZNodeFormatError, match="/config/changes/config_change_") as info:
        al.ConfigChangeNotification.from_json(raw)
    assert message in str(info.value)


def test_sequential_names() -> None:
    assert al.config_change_create_path() == "/config/changes/config_change_"
    assert al.isr_change_create_path() == "/isr_change_notification/isr_change_"
    assert al.sequence_number("config_change_0000000042", al.CONFIG_CHANGE_PREFIX) == 42
    assert al.sequence_number("/isr_change_notification/isr_change_0000000007",
                              al.ISR_CHANGE_PREFIX) == 7
    with pytest.raises(ZNodeFormatError, match="isr_change_NNNNNNNNNN"):
        al.sequence_number("config_change_0000000001", al.ISR_CHANGE_PREFIX)


def test_partition_lists() -> None:
    raw = b'{"version":1,"partitions":[{"topic":"topic-a","partition":0},' \
          b'{"topic":"topic-b","partition":0}]}'
    isr = al.IsrChangeNotification.from_json(raw)
    assert isr.partitions == (("topic-a", 0), ("topic-b", 0))
    assert isr.to_json() == raw
    election = al.PreferredReplicaElection.from_json(raw)
    assert election.to_json() == raw
    with pytest.raises(ZNodeFormatError, match="/admin/preferred_replica_election: missing "
                                               "field 'partition'"):
        al.PreferredReplicaElection.from_json(b'{"version":1,"partitions":[{"topic":"a"}]}')


def test_reassignment_as_the_ops_docs_show_it() -> None:
    raw = (b'{"version":1,"partitions":[{"topic":"foo1","partition":0,"replicas":[5,6]},'
           b'{"topic":"foo2","partition":1,"replicas":[2,3]}]}')
    reassignment = al.PartitionReassignment.from_json(raw)
    assert reassignment.replicas == {("foo1", 0): (5, 6), ("foo2", 1): (2, 3)}
    assert reassignment.to_json() == raw
    with pytest.raises(ZNodeFormatError, match="needs topic, partition and replicas"):
        al.PartitionReassignment.from_json(b'{"version":1,"partitions":[{"topic":"a"}]}')


def test_log_dir_event() -> None:
    raw = b'{"version":1,"broker":3,"event":1}'
    assert al.LogDirEventNotification.from_json(raw) == al.LogDirEventNotification(3)
    assert al.LogDirEventNotification(3).to_json() == raw


def test_producer_id_block_strings_and_next_block() -> None:
    raw = b'{"version":1,"broker":1001,"block_start":"8000","block_end":"8999"}'
    block = al.ProducerIdBlock.from_json(raw)
    assert block == al.ProducerIdBlock(1001, 8000, 8999)
    assert block.size == al.PRODUCER_ID_BLOCK_SIZE
    assert block.to_json() == raw
    assert block.next_block(2) == al.ProducerIdBlock(2, 9000, 9999)
    assert al.ProducerIdBlock.first(1) == al.ProducerIdBlock(1, 0, 999)
    big = al.ProducerIdBlock(1, 2**62, 2**62 + 999)
    assert al.ProducerIdBlock.from_json(big.to_json()) == big
    with pytest.raises(ZNodeFormatError, match="must be a string"):
        al.ProducerIdBlock.from_json(b'{"version":1,"broker":1,"block_start":0,"block_end":9}')
    with pytest.raises(ZNodeFormatError, match="before block_start"):
        al.ProducerIdBlock.from_json(
            b'{"version":1,"broker":1,"block_start":"10","block_end":"9"}')


def test_finalized_features_versions_and_checks() -> None:
    raw = b'{"features":{},"version":2,"status":1}'
    assert al.FinalizedFeatures.from_json(raw) == al.FinalizedFeatures({})
    assert al.FinalizedFeatures({}).to_json() == raw
    v2 = al.FinalizedFeatures({"metadata.version": 7})
    assert al.FinalizedFeatures.from_json(v2.to_json()) == v2
    v1 = al.FinalizedFeatures({"f": 2}, version=1)
    assert v1.to_json() == (b'{"features":{"f":{"max_version_level":2,"min_version_level":2}},'
                            b'"version":1,"status":1}')
    assert al.FinalizedFeatures.from_json(v1.to_json()) == v1
    for bad, message in [
        (b'{"features":{},"version":3,"status":1}', "unsupported version 3"),
        (b'{"features":{},"version":2}', "missing field 'status'"),
        (b'{"features":{},"version":2,"status":4}', "unknown status 4"),
        (b'{"version":2,"status":1}', "'features' must be an object"),
        (b'{"features":{"f":{"max_version_level":0}},"version":2,"status":1}', ">= 1"),
        (b'{"features":{"f":{"max_version_level":2}},"version":1,"status":1}',
         "missing field 'min_version_level'"),
    ]:
        with pytest.raises(ZNodeFormatError, match="/feature") as info:
            al.FinalizedFeatures.from_json(bad)
        assert message in str(info.value)
