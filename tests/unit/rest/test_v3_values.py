"""Pure pieces of API v3: plain key/value encoding, timestamps, headers, error mapping, group
states."""

from __future__ import annotations

import pytest

from moldau.client import AdminError, BrokerError, ClientError, KafkaTimeoutError
from moldau.http import HttpError
from moldau.protocol.errors import ErrorCode
from moldau.rest.v3.body import get_str
from moldau.rest.v3.errors import V3Error, from_exception
from moldau.rest.v3.groups import group_state
from moldau.rest.v3.record_data import RecordError, encode_plain, needs_registry
from moldau.rest.v3.records import iso_timestamp, parse_headers, parse_timestamp


def test_plain_types() -> None:
    assert encode_plain("BINARY", "AP8=", "key").data == b"\x00\xff"
    assert encode_plain("JSON", {"a": [1, "é"]}, "value").data == '{"a":[1,"é"]}'.encode()
    assert encode_plain("JSON", False, "value").data == b"false"
    assert encode_plain("STRING", "héllo", "value").info == {"type": "STRING", "size": 6}
    assert encode_plain("BINARY", None, "value").data is None
    for kind, data in (("BINARY", "%%"), ("BINARY", 12), ("STRING", {"a": 1})):
        with pytest.raises(RecordError) as caught:
            encode_plain(kind, data, "value")
        assert (caught.value.status, caught.value.error_code) == (400, 400)
    assert not needs_registry({"type": "binary"})
    assert needs_registry({"type": "AVRO"}) and needs_registry({"data": 1})


def test_string_fields_take_scalars_as_jackson_does() -> None:
    # kafi creates topics with {"name": "retention.ms", "value": 604800000}: Confluent's
    # Jackson entities read a JSON number or boolean into a String field as its text
    body = {"n": 604800000, "f": 1.5, "b": True, "s": "x", "z": None}
    assert [get_str(body, k) for k in ("n", "f", "b", "s", "z")] == [
        "604800000", "1.5", "true", "x", None]
    for bad in ({"a": 1}, [1]):
        with pytest.raises(V3Error) as caught:
            get_str({"v": bad}, "v")
        assert caught.value.status == 400 and "v must be a string" in str(caught.value)


def test_timestamps() -> None:
    assert iso_timestamp(1612552482000) == "2021-02-05T19:14:42Z"
    assert iso_timestamp(1612552482007) == "2021-02-05T19:14:42.007Z"
    assert parse_timestamp("2021-02-05T19:14:42Z") == 1612552482000
    assert parse_timestamp("2021-02-05T19:14:42.5+01:00") == 1612548882500
    assert parse_timestamp("2021-02-05T19:14:42") == 1612552482000  # no zone: UTC
    assert parse_timestamp(1234) == 1234 and parse_timestamp(None) is None
    for bad in ("soon", True, 1.5, [1]):
        with pytest.raises(V3Error):
            parse_timestamp(bad)


def test_headers() -> None:
    assert parse_headers([{"name": "a", "value": "eA=="}, {"name": "b"}]) == [
        ("a", b"x"), ("b", None)]
    assert parse_headers(None) == []
    for bad in ({"a": 1}, [{"value": "eA=="}], [{"name": "a", "value": "!"}],
                [{"name": "a", "value": 3}]):
        with pytest.raises(V3Error):
            parse_headers(bad)


@pytest.mark.parametrize(("code", "status", "error_code"), [
    (ErrorCode.unknown_topic_or_partition, 404, 40403),
    (ErrorCode.topic_already_exists, 400, 40002),
    (ErrorCode.invalid_replication_factor, 400, 40002),
    (ErrorCode.invalid_config, 400, 40002),
    (ErrorCode.policy_violation, 400, 40002),
    (ErrorCode.topic_authorization_failed, 403, 40301),
    (ErrorCode.sasl_authentication_failed, 401, 40101),
    (ErrorCode.throttling_quota_exceeded, 429, 42901),
    (ErrorCode.broker_not_available, 503, 50302),
    (ErrorCode.not_leader_or_follower, 500, 50003),
    (ErrorCode.invalid_record, 500, 50002),
])
def test_kafka_errors_as_confluent_maps_them(code: ErrorCode, status: int,
                                             error_code: int) -> None:
    mapped = from_exception(BrokerError(code, "the broker says why", "CreateTopics x"))
    assert (mapped.status, mapped.error_code) == (status, error_code)
    if code != ErrorCode.unknown_topic_or_partition:
        assert mapped.message == "the broker says why"
    wrapped = from_exception(AdminError("create_topics", {"x": BrokerError(code)}))
    assert (wrapped.status, wrapped.error_code) == (status, error_code)


def test_other_errors() -> None:
    assert from_exception(BrokerError(ErrorCode.topic_already_exists)).message == (
        "Topic already exists.")
    assert from_exception(HttpError(500, 50003, "connecting")).error_code == 50003
    assert from_exception(KafkaTimeoutError("slow")).error_code == 50003
    assert from_exception(ClientError("closed")).error_code == 50002
    unexpected = from_exception(RuntimeError("secret detail"))
    assert (unexpected.status, unexpected.error_code, unexpected.message) == (
        500, 500, "Internal Server Error")


def test_group_states() -> None:
    assert [group_state(s) for s in ("Stable", "Empty", "PreparingRebalance",
                                     "CompletingRebalance", "Dead", "Assigning")] == [
        "STABLE", "EMPTY", "PREPARING_REBALANCE", "COMPLETING_REBALANCE", "DEAD", "UNKNOWN"]
