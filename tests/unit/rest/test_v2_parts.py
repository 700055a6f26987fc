"""API v2's pure parts: embedded formats without a registry, consumer instance settings as
Confluent validates them, the produce byte budget, the instance manager's expiry."""

from __future__ import annotations

import asyncio

import pytest

from moldau.http import HttpError
from moldau.registry.serde import SerializationError
from moldau.rest.config import build_config
from moldau.rest.context import RestContext
from moldau.rest.v2.formats import (
    check_format,
    decode_binary,
    decode_json,
    encode_binary,
    encode_json,
)
from moldau.rest.v2.instances import InstanceManager, InstanceSettings
from moldau.rest.v2.produce import ByteBudget


def _code(call: object, *args: object) -> tuple[int, int]:
    with pytest.raises(HttpError) as info:
        call(*args)  # type: ignore[operator]
    return info.value.status, info.value.error_code


def test_binary_and_json_round_trip() -> None:
    assert encode_binary("AAEC") == b"\x00\x01\x02" and decode_binary(b"\x00\x01\x02") == "AAEC"
    assert encode_binary(None) is None and decode_binary(None) is None
    assert _code(encode_binary, "no base64!") == (400, 400)
    assert _code(encode_binary, 12) == (400, 400)
    assert encode_json({"a": [1, "é", None]}) == '{"a":[1,"é",null]}'.encode()
    assert encode_json(None) is None and decode_json(b'{"a":1}') == {"a": 1}
    with pytest.raises(SerializationError):
        decode_json(b"\x00not json")


def test_instance_settings_as_confluent_validates_them() -> None:
    plain = InstanceSettings.parse(None, "")
    assert plain.format == "binary" and plain.name.startswith("rest-consumer-")
    assert InstanceSettings.parse({}, "p1").name.startswith("rest-consumer-p1-")
    named = InstanceSettings.parse({"name": "n", "id": "i", "format": "JSON",
                                    "auto.offset.reset": "Earliest",
                                    "auto.commit.enable": "false", "fetch.min.bytes": 10,
                                    "consumer.request.timeout.ms": "250"}, "")
    assert (named.name, named.format, named.auto_offset_reset, named.auto_commit_enable,
            named.fetch_min_bytes, named.request_timeout_ms) == \
        ("i", "json", "earliest", False, 10, 250)
    assert InstanceSettings.parse({"responseMinBytes": 5}, "").fetch_min_bytes == 5
    assert _code(InstanceSettings.parse, {"format": "xml"}, "") == (422, 422)
    assert _code(InstanceSettings.parse, {"auto.offset.reset": "x"}, "") == (422, 42204)
    assert _code(InstanceSettings.parse, {"auto.commit.enable": "x"}, "") == (422, 42204)
    assert _code(InstanceSettings.parse, {"fetch.min.bytes": -2}, "") == (422, 40001)
    assert _code(InstanceSettings.parse, {"fetch.min.bytes": "lots"}, "") == (422, 42204)
    assert _code(InstanceSettings.parse, [1], "") == (422, 422)
    assert check_format("protobuf") == "protobuf"


def test_byte_budget_waits_for_room_and_times_out() -> None:
    async def scenario() -> None:
        budget = ByteBudget(100)
        assert await budget.acquire(80, 1)
        waiter = asyncio.create_task(budget.acquire(50, 5))
        await asyncio.sleep(0.05)
        assert not waiter.done()  # back-pressure: waits for the first request
        await budget.release(80)
        assert await waiter and budget.used == 50
        assert not await budget.acquire(60, 0.05)  # no room in time
        await budget.release(50)
        assert await budget.acquire(10_000, 0.05)  # larger than the limit: the whole budget
        assert budget.used == 100

    asyncio.run(scenario())


def test_expiry_skips_busy_instances() -> None:
    async def scenario() -> None:
        ctx = RestContext(build_config({"bootstrap.servers": "127.0.0.1:1",
                                        "consumer.instance.timeout.ms": "1000"}))
        manager = InstanceManager(ctx)
        idle = manager.create("g", {"name": "idle"})
        busy = manager.create("g", {"name": "busy"})
        assert _code(manager.create, "g", {"name": "idle"}) == (409, 40902)
        busy.busy = 1
        now = idle.last_used + 5
        assert manager.expire(now) == 1 and list(manager.instances) == [("g", "busy")]
        await asyncio.sleep(0)
        assert idle.closed
        assert _code(manager.get, "g", "idle") == (404, 40403)
        await manager.stop()
        assert busy.closed and not manager.instances

    asyncio.run(scenario())
