"""Kafka's ZooKeeper layout (moldau.broker.zk.layout): paths, and round trips against the bytes
a Kafka 3.x broker writes (as ``zkCli.sh get`` shows them), older versions and what Kafka's
decoders tolerate."""

from __future__ import annotations

import uuid

import pytest

from moldau.broker.zk import layout
from moldau.broker.zk.layout import (
    BrokerRegistration,
    ClusterId,
    ControllerEpoch,
    ControllerRegistration,
    Endpoint,
    PartitionState,
    ReplicaAssignment,
    TopicAssignment,
    ZNodeFormatError,
)


def test_paths_are_kafkas() -> None:
    assert layout.broker_path(3) == "/brokers/ids/3"
    assert layout.topic_path("orders") == "/brokers/topics/orders"
    assert layout.partition_state_path("orders", 7) == "/brokers/topics/orders/partitions/7/state"
    assert layout.topic_config_path("orders") == "/config/topics/orders"
    assert layout.broker_config_path(2) == "/config/brokers/2"
    assert layout.broker_config_path(None) == "/config/brokers/<default>"
    assert layout.delete_topic_path("orders") == "/admin/delete_topics/orders"
    assert layout.PERSISTENT_PATHS[:3] == ("/consumers", "/brokers/ids", "/brokers/topics")
    assert "/config/ips" in layout.PERSISTENT_PATHS


@pytest.mark.parametrize("bad", ["", "a/b", "..", ".", "x" * 250, "sp ace"])
def test_a_name_that_is_no_topic_cannot_make_a_path(bad: str) -> None:
    with pytest.raises(ValueError, match="topic name"):
        layout.topic_path(bad)


def test_config_entity_path_checks_type_and_name() -> None:
    assert layout.config_entity_path("clients", "app-1") == "/config/clients/app-1"
    with pytest.raises(ValueError, match="entity type 'widgets'"):
        layout.config_entity_path("widgets", "x")
    with pytest.raises(ValueError, match="entity name"):
        layout.config_entity_path("users", "a/b")


# -- /cluster/id, /controller, /controller_epoch ----------------------------------------------

def test_cluster_id_bytes_and_string_version() -> None:
    raw = b'{"version":"1","id":"zIe91t8eRW-4e_je0Yarbw"}'
    assert ClusterId.from_json(raw) == ClusterId("zIe91t8eRW-4e_je0Yarbw")
    assert ClusterId("zIe91t8eRW-4e_je0Yarbw").to_json() == raw
    # kafkatest writes it with spaces; Kafka reads any JSON
    assert ClusterId.from_json(b'{"version": "1", "id": "abc"}').id == "abc"
    with pytest.raises(ZNodeFormatError, match="/cluster/id: missing field 'id'"):
        ClusterId.from_json(b'{"version":"1"}')


def test_controller_version_2_as_kafka_3_4_writes_it() -> None:
    raw = b'{"version":2,"brokerid":2,"timestamp":"1676813353461","kraftControllerEpoch":-1}'
    reg = ControllerRegistration.from_json(raw)
    assert reg == ControllerRegistration(2, 1676813353461, 2, -1)
    assert not reg.is_kraft
    assert reg.to_json() == raw


def test_controller_version_1_as_kafka_3_3_and_older_write_it() -> None:
    raw = b'{"version":1,"brokerid":0,"timestamp":"1643692590537"}'
    reg = ControllerRegistration.from_json(raw)
    assert reg == ControllerRegistration(0, 1643692590537, 1, None)
    assert reg.to_json() == raw


def test_controller_tolerates_what_kafka_does_and_names_what_it_does_not() -> None:
    assert ControllerRegistration.from_json(b'{"brokerid":5}').broker_id == 5
    migrating = ControllerRegistration.from_json(
        b'{"version":2,"brokerid":3000,"timestamp":"1","kraftControllerEpoch":7}')
    assert migrating.is_kraft
    with pytest.raises(ZNodeFormatError, match="/controller: missing field 'brokerid'"):
        ControllerRegistration.from_json(b'{"version":2}')
    with pytest.raises(ZNodeFormatError, match="'brokerid' must be an integer"):
        ControllerRegistration.from_json(b'{"brokerid":"1"}')
    with pytest.raises(ZNodeFormatError, match="/controller: not JSON"):
        ControllerRegistration.from_json(b"{oops")
    with pytest.raises(ZNodeFormatError, match="/controller: no data"):
        ControllerRegistration.from_json(b"")


def test_controller_default_timestamp_is_now() -> None:
    before = layout.now_ms()
    assert before <= ControllerRegistration(1).timestamp_ms <= layout.now_ms()


def test_controller_epoch_is_decimal_text() -> None:
    assert ControllerEpoch(1).to_json() == b"1"
    assert ControllerEpoch.from_json(b"42") == ControllerEpoch(42)
    with pytest.raises(ZNodeFormatError, match="/controller_epoch: expected an integer"):
        ControllerEpoch.from_json(b"one")


# -- /brokers/ids/<id> ------------------------------------------------------------------------

V5 = (b'{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
      b'"endpoints":["PLAINTEXT://localhost:9092"],"jmx_port":-1,"features":{},'
      b'"host":"localhost","timestamp":"1617894143073","port":9092,"version":5}')


def test_broker_registration_version_5_round_trip() -> None:
    reg = BrokerRegistration.from_json(V5, 0)
    assert reg == BrokerRegistration(
        0, (Endpoint("PLAINTEXT", "localhost", 9092, "PLAINTEXT"),), None, -1,
        1617894143073, {}, 5)
    assert reg.to_json() == V5
    assert reg.path == "/brokers/ids/0"


def test_broker_registration_with_several_listeners_as_seed_001() -> None:
    raw = (b'{"listener_security_protocol_map":{"INTERNAL":"PLAINTEXT","EXTERNAL":"SASL_SSL"},'
           b'"endpoints":["INTERNAL://kf01:9092","EXTERNAL://[::1]:19092"],"jmx_port":-1,'
           b'"features":{},"host":"kf01","timestamp":"1684599876292","port":9092,"version":5}')
    reg = BrokerRegistration.from_json(raw, 1)
    assert reg.endpoint("INTERNAL") == Endpoint("INTERNAL", "kf01", 9092, "PLAINTEXT")
    assert reg.endpoint("EXTERNAL") == Endpoint("EXTERNAL", "::1", 19092, "SASL_SSL")
    assert reg.endpoint("TEXT") is None
    assert reg.to_json() == raw


def test_broker_registration_rack_features_and_no_plaintext_listener() -> None:
    reg = BrokerRegistration(
        4, (Endpoint("SECURE", "b4", 9093, "SSL"),), rack="eu-1a", timestamp_ms=5,
        features={"metadata.version": (1, 19)})
    text = reg.to_json()
    assert b'"rack":"eu-1a"' in text
    assert b'"features":{"metadata.version":{"min_version":1,"max_version":19}}' in text
    # no PLAINTEXT endpoint: Kafka registers host null and port -1 for old clients
    assert b'"host":null' in text and b'"port":-1' in text
    assert BrokerRegistration.from_json(text, 4) == reg


def test_broker_registration_older_versions() -> None:
    v4 = (b'{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
          b'"endpoints":["PLAINTEXT://kafka-3.broker:9092"],"jmx_port":-1,'
          b'"host":"kafka-3.broker","timestamp":"1502217586002","port":9092,"version":4}')
    reg = BrokerRegistration.from_json(v4, 3)
    assert reg.version == 4 and reg.features == {}
    assert reg.endpoints == (Endpoint("PLAINTEXT", "kafka-3.broker", 9092, "PLAINTEXT"),)
    # version 2: no protocol map, the listener name is the protocol
    v2 = (b'{"version":2,"host":"h","port":9092,"jmx_port":9999,"timestamp":"2233345666",'
          b'"endpoints":["PLAINTEXT://h:9092","SSL://h:9093"]}')
    reg = BrokerRegistration.from_json(v2, 1)
    assert [ep.security_protocol for ep in reg.endpoints] == ["PLAINTEXT", "SSL"]
    assert reg.jmx_port == 9999
    # version 1: host and port only
    v1 = b'{"version":1,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"1"}'
    assert BrokerRegistration.from_json(v1, 1).endpoints == (
        Endpoint("PLAINTEXT", "localhost", 9092, "PLAINTEXT"),)
    # rack written as null, listener names in lower case, an empty host
    odd = (b'{"version":4,"jmx_port":-1,"rack":null,"endpoints":["plaintext://:9092"],'
           b'"listener_security_protocol_map":{"plaintext":"PLAINTEXT"}}')
    reg = BrokerRegistration.from_json(odd, 9)
    assert reg.rack is None and reg.timestamp_ms is None
    assert reg.endpoints == (Endpoint("PLAINTEXT", None, 9092, "PLAINTEXT"),)
    assert reg.endpoints[0].connection_string == "PLAINTEXT://:9092"


@pytest.mark.parametrize(("raw", "message"), [
    (b'{"version":5,"endpoints":[]}', "missing field 'jmx_port'"),
    (b'{"jmx_port":-1,"endpoints":[]}', "missing field 'version'"),
    (b'{"version":0,"jmx_port":-1}', "unsupported registration version 0"),
    (b'{"version":5,"jmx_port":-1,"endpoints":["CLIENT://h:1"],'
     b'"listener_security_protocol_map":{}}', "no security protocol defined for listener CLIENT"),
    (b'{"version":2,"jmx_port":-1,"endpoints":["CLIENT://h:1"]}',
     "no security protocol defined for listener CLIENT"),
    (b'{"version":5,"jmx_port":-1,"endpoints":["h:9092"]}', "cannot parse endpoint 'h:9092'"),
    (b'{"version":5,"jmx_port":-1}', "'endpoints' must be a list"),
    (b'{"version":5,"jmx_port":-1,"endpoints":[],"features":{"f":{"max_version":2}}}',
     "missing field 'min_version'"),
])
def test_broker_registration_errors_name_the_znode_and_field(raw: bytes, message: str) -> None:
    with pytest.raises(ZNodeFormatError, match="/brokers/ids/7") as info:
        BrokerRegistration.from_json(raw, 7)
    assert message in str(info.value)


# -- /brokers/topics/<topic> ------------------------------------------------------------------

def test_topic_assignment_version_3_round_trip() -> None:
    raw = (b'{"partitions":{"0":[2,3,1],"1":[3,1,2],"2":[1,2,3]},'
           b'"topic_id":"cMr3GpVESX2L3byPGf93lQ","adding_replicas":{},'
           b'"removing_replicas":{},"version":3}')
    assignment = TopicAssignment.from_json(raw, "demo")
    assert assignment.partitions[1] == ReplicaAssignment((3, 1, 2))
    assert layout.uuid_to_text(assignment.topic_id) == "cMr3GpVESX2L3byPGf93lQ"
    assert assignment.to_json() == raw


def test_topic_assignment_keys_in_any_order_and_reassignment_in_progress() -> None:
    raw = (b'{"partitions":{"11":[1,3,4],"0":[0,1,2],"1":[1,2,3]},'
           b'"adding_replicas":{"1":[3]},"removing_replicas":{"1":[0]},"version":2}')
    assignment = TopicAssignment.from_json(raw, "t")
    assert sorted(assignment.partitions) == [0, 1, 11]
    assert assignment.partitions[1] == ReplicaAssignment((1, 2, 3), (3,), (0,))
    assert assignment.topic_id is None and assignment.version == 2
    again = TopicAssignment.from_json(assignment.to_json(), "t")
    assert again == assignment
    assert assignment.to_json().startswith(b'{"partitions":{"0":[0,1,2],"1":[1,2,3],"11"')


def test_topic_assignment_versions_1_and_empty_data() -> None:
    v1 = TopicAssignment.from_json(b'{"version":1,"partitions":{"0":[1]}}', "t")
    assert v1 == TopicAssignment({0: ReplicaAssignment((1,))}, None, 1)
    assert TopicAssignment.from_json(b"", "t") == TopicAssignment({}, None)
    assert TopicAssignment.from_json(None, "t").partitions == {}
    assert TopicAssignment.from_json(b'{"version":3}', "t").partitions == {}


def test_topic_assignment_of_and_errors() -> None:
    topic_id = uuid.uuid4()
    made = TopicAssignment.of({0: [1, 2]}, topic_id)
    assert TopicAssignment.from_json(made.to_json(), "t") == made
    with pytest.raises(ZNodeFormatError, match="not a partition number: 'x'"):
        TopicAssignment.from_json(b'{"partitions":{"x":[1]}}', "t")
    with pytest.raises(ZNodeFormatError, match=r"/brokers/topics/t partitions\[0\]"):
        TopicAssignment.from_json(b'{"partitions":{"0":["1"]}}', "t")
    with pytest.raises(ZNodeFormatError, match="not a Kafka Uuid"):
        TopicAssignment.from_json(b'{"partitions":{},"topic_id":"short"}', "t")


# -- partition state --------------------------------------------------------------------------

def test_partition_state_round_trip_as_kafka_writes_it() -> None:
    raw = b'{"controller_epoch":1,"leader":2,"version":1,"leader_epoch":0,"isr":[2,3,1]}'
    state = PartitionState.from_json(raw, "__consumer_offsets", 0)
    assert state == PartitionState(leader=2, leader_epoch=0, isr=(2, 3, 1), controller_epoch=1)
    assert state.to_json() == raw


def test_partition_state_recovering_is_written_only_when_recovering() -> None:
    state = PartitionState(-1, 5, (), 3, layout.LEADER_RECOVERING)
    raw = state.to_json()
    assert raw == (b'{"controller_epoch":3,"leader":-1,"version":1,"leader_epoch":5,"isr":[],'
                   b'"leader_recovery_state":1}')
    assert PartitionState.from_json(raw, "t", 0) == state
    with pytest.raises(ZNodeFormatError, match="unknown leader_recovery_state 9"):
        PartitionState.from_json(
            b'{"controller_epoch":1,"leader":1,"leader_epoch":0,"isr":[1],'
            b'"leader_recovery_state":9}', "t", 0)


@pytest.mark.parametrize("missing", ["leader", "leader_epoch", "isr", "controller_epoch"])
def test_partition_state_requires_what_kafka_requires(missing: str) -> None:
    obj = {"controller_epoch": 1, "leader": 1, "leader_epoch": 0, "isr": [1]}
    del obj[missing]
    with pytest.raises(ZNodeFormatError, match=f"partitions/4/state: missing field '{missing}'"):
        PartitionState.from_json(layout.dumps(obj), "t", 4)


def test_json_is_compact_utf8_like_jackson() -> None:
    assert layout.dumps({"a": "ü", "b": [1, 2]}) == '{"a":"ü","b":[1,2]}'.encode()
