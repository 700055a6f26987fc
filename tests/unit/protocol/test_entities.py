"""Building kio entities across versions from plain dicts (as the client builds requests)."""

from __future__ import annotations

import datetime
import uuid

import pytest

from moldau.protocol.entities import build, to_ms
from moldau.protocol.messages import encode_request, request_schema

FETCH = {
    "replica_id": -1, "max_wait": 250, "min_bytes": 1, "max_bytes": 1000,
    "isolation_level": 0, "session_id": 0, "session_epoch": -1,
    "topics": [{"topic": "t", "topic_id": uuid.UUID(int=5), "partitions": [
        {"partition": 0, "fetch_offset": 42, "partition_max_bytes": 100,
         "current_leader_epoch": -1, "log_start_offset": -1, "last_fetched_epoch": -1}]}],
    "forgotten_topics_data": [], "rack_id": "",
}


@pytest.mark.parametrize("version", range(4, 19))
def test_fetch_builds_and_encodes_at_every_version(version: int) -> None:
    entity = build(request_schema(1, version), FETCH, strict=True)
    assert entity.max_wait == datetime.timedelta(milliseconds=250)
    topic = entity.topics[0]
    if version >= 13:
        assert topic.topic_id == uuid.UUID(int=5)
    else:
        assert topic.topic == "t"
    assert topic.partitions[0].fetch_offset == 42
    assert encode_request(1, version, 7, "c", entity)[:4] != b"\x00\x00\x00\x00"


def test_missing_required_field_names_it() -> None:
    with pytest.raises(TypeError, match="min_bytes"):
        build(request_schema(1, 12), {k: v for k, v in FETCH.items() if k != "min_bytes"},
              strict=True)


def test_missing_required_field_takes_its_zero_value_unless_strict() -> None:
    entity = build(request_schema(1, 12), {k: v for k, v in FETCH.items() if k != "min_bytes"})
    assert entity.min_bytes == 0


def test_nullable_fields_default_to_none() -> None:
    entity = build(request_schema(20, 6), {"topics": [{"name": "x"}], "timeout": 5},
                   strict=True)
    assert entity.topics[0].topic_id is None


def test_to_ms_helper() -> None:
    assert to_ms(datetime.timedelta(seconds=2)) == 2000
    assert to_ms(5) == 5
