"""API v3 produce over HTTP: one record, many concatenated, and a stream of 1,000 records on
one connection with a result per record; records read back with moldau's consumer."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator

import pytest

from moldau.client import Consumer, ConsumerRecord, TopicPartition
from moldau.testing.runner import InProcessBroker

from .test_v3_resources import create, error, ok
from .v3_harness import JSON, RestV3, stream_produce, unique


@pytest.fixture(scope="module")
def rest() -> Iterator[RestV3]:
    with InProcessBroker() as node, RestV3(node.bootstrap) as server:
        yield server


@pytest.fixture(scope="module")
def cid(rest: RestV3) -> str:
    return rest.cluster_id


def read_back(rest: RestV3, topic: str, partitions: int, count: int) -> list[ConsumerRecord]:
    async def read() -> list[ConsumerRecord]:
        async with Consumer({"bootstrap.servers": rest.bootstrap}) as consumer:
            consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
            consumer.seek_to_beginning()
            found: list[ConsumerRecord] = []
            for _ in range(300):
                found.extend(await consumer.poll(0.1))
                if len(found) >= count:
                    break
            return found

    return rest.call(read())  # type: ignore[no-any-return]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_one_record_every_plain_type(rest: RestV3, cid: str) -> None:
    topic = unique()
    ok(create(rest, cid, topic, partitions_count=3), 201)
    results = rest.produce(cid, topic, [{
        "partition_id": 2,
        "headers": [{"name": "h1", "value": b64(b"one")}, {"name": "h2", "value": None}],
        "key": {"type": "STRING", "data": "kéy"},
        "value": {"type": "JSON", "data": {"foo": "bar", "n": [1, 2]}},
        "timestamp": "2026-02-05T19:14:42.123Z",
    }])
    assert results == [{
        "error_code": 200, "cluster_id": cid, "topic_name": topic, "partition_id": 2,
        "offset": 0, "timestamp": "2026-02-05T19:14:42.123Z",
        "key": {"type": "STRING", "size": 4}, "value": {"type": "JSON", "size": 23},
    }]
    results = rest.produce(cid, topic, [
        {"partition_id": 2, "key": {"type": "BINARY", "data": b64(b"\x00\xff")},
         "value": {"type": "BINARY", "data": b64(b"bytes")}},
        {"partition_id": 2, "value": {"type": "STRING", "data": "plain"}},
        {"partition_id": 2, "key": {"type": "JSON", "data": None}},
    ])
    assert [(r["error_code"], r["offset"], r["key"], r["value"]) for r in results] == [
        (200, 1, {"type": "BINARY", "size": 2}, {"type": "BINARY", "size": 5}),
        (200, 2, None, {"type": "STRING", "size": 5}),
        (200, 3, {"type": "JSON", "size": 0}, None),
    ]
    records = read_back(rest, topic, 3, 4)
    assert [(r.partition, r.key, r.value) for r in records] == [
        (2, "kéy".encode(), b'{"foo":"bar","n":[1,2]}'),
        (2, b"\x00\xff", b"bytes"),
        (2, None, b"plain"),
        (2, None, None),
    ]
    assert records[0].headers == [("h1", b"one"), ("h2", None)]
    assert records[0].timestamp == 1770318882123


def test_keys_pick_partitions_as_kafka_does(rest: RestV3, cid: str) -> None:
    topic = unique()
    ok(create(rest, cid, topic, partitions_count=4), 201)
    records = [{"key": {"type": "STRING", "data": f"key-{i % 5}"},
                "value": {"type": "STRING", "data": str(i)}} for i in range(40)]
    results = rest.produce(cid, topic, records)
    by_key: dict[str, set[int]] = {}
    for record, result in zip(records, results, strict=True):
        by_key.setdefault(record["key"]["data"], set()).add(result["partition_id"])
    assert all(len(parts) == 1 for parts in by_key.values())
    from moldau.client import partition_for_key
    assert by_key["key-1"] == {partition_for_key(b"key-1", 4)}


def test_per_record_errors_in_a_200_answer(rest: RestV3, cid: str) -> None:
    topic = unique()
    ok(create(rest, cid, topic, partitions_count=2), 201)
    results = rest.produce(cid, topic, [
        {"value": {"type": "BINARY", "data": "not base64!"}},
        {"partition_id": 7, "value": {"type": "STRING", "data": "x"}},
        {"value": {"type": "STRING", "data": 42}},
        {"value": {"type": "XML", "data": "<a/>"}},
        {"value": {"data": "no type and no schema registry"}},
        {"value": "not an object"},
        {"timestamp": "yesterday", "value": {"type": "STRING", "data": "x"}},
        {"headers": [{"name": "h", "value": "%%%"}]},
        {"partition_id": "1", "value": {"type": "STRING", "data": "x"}},
        {"value": {"type": "STRING", "data": "fine"}, "partition_id": 1},
    ])
    codes = [r["error_code"] for r in results]
    assert codes == [400, 40403, 400, 400, 400, 400, 400, 400, 400, 200]
    assert results[0]["message"].startswith("Bad Request: value.data is not valid base64")
    assert results[1] == {"error_code": 40403,
                          "message": "This server does not host this topic-partition."}
    assert "schema registry" in results[4]["message"]
    assert results[-1]["partition_id"] == 1 and results[-1]["offset"] == 0
    assert [r.value for r in read_back(rest, topic, 2, 1)] == [b"fine"]


def test_each_result_ends_with_crlf(rest: RestV3, cid: str) -> None:
    # Confluent's proxy writes every result as a chunk followed by "\r\n"; kafi splits the
    # answer on it (and a one-record answer is one object and its "\r\n")
    topic = unique()
    ok(create(rest, cid, topic), 201)
    path = f"/v3/clusters/{cid}/topics/{topic}/records"
    for count in (1, 3):
        raw = b"".join(json.dumps({"value": {"type": "STRING", "data": str(n)}}).encode()
                       for n in range(count))
        reply = rest.request("POST", path, raw=raw, headers={"Content-Type": JSON})
        assert reply.status == 200 and reply.text.endswith("}\r\n"), reply.text
        pieces = reply.text[:-2].split("\r\n")
        assert [json.loads(piece)["error_code"] for piece in pieces] == [200] * count


def test_request_level_errors(rest: RestV3, cid: str) -> None:
    topic = unique()
    ok(create(rest, cid, topic), 201)
    path = f"/v3/clusters/{cid}/topics/{topic}/records"
    record = json.dumps({"value": {"type": "STRING", "data": "x"}}).encode()
    error(rest.request("POST", f"/v3/clusters/{cid}/topics/{unique()}/records", raw=record,
                       headers={"Content-Type": JSON}), 404, 40403)
    error(rest.request("POST", f"/v3/clusters/other/topics/{topic}/records", raw=record,
                       headers={"Content-Type": JSON}), 404, 404)
    error(rest.request("POST", path, raw=record,
                       headers={"Content-Type": "application/vnd.kafka.json.v2+json"}),
          415, 415)
    error(rest.request("POST", path, raw=b"", headers={"Content-Type": JSON}), 400, 400)
    error(rest.request("POST", path, raw=b"  \n", headers={"Content-Type": JSON}), 400, 400)
    error(rest.request("POST", path, raw=b"[1, 2]", headers={"Content-Type": JSON}), 400, 400)
    error(rest.request("POST", path, raw=b'{"value": {"type": "STRING"',
                       headers={"Content-Type": JSON}), 400, 400)
    assert rest.request("GET", path).status == 405
    # without a Content-Type the body is read as JSON
    reply = rest.request("POST", path, raw=record)
    assert reply.status == 200 and reply.json["error_code"] == 200


def test_hostile_records_get_errors_and_the_stream_goes_on(rest: RestV3, cid: str) -> None:
    topic = unique()
    ok(create(rest, cid, topic), 201)
    good = json.dumps({"value": {"type": "STRING", "data": "x"}}).encode()
    deep = b'{"value":{"type":"JSON","data":' + b"[" * 50_000 + b"]" * 50_000 + b"}}"
    reply = rest.request("POST", f"/v3/clusters/{cid}/topics/{topic}/records",
                         raw=good + deep + b'{"value": tru}' + good,
                         headers={"Content-Type": JSON})
    assert reply.status == 200
    from .v3_harness import concatenated
    results = concatenated(reply.text)
    assert [r["error_code"] for r in results] == [200, 400, 400, 200]
    assert [r["offset"] for r in results if r["error_code"] == 200] == [0, 1]


def test_garbage_after_records_ends_the_stream_with_an_error(rest: RestV3, cid: str) -> None:
    topic = unique()
    ok(create(rest, cid, topic), 201)
    good = json.dumps({"value": {"type": "STRING", "data": "x"}}).encode()
    reply = rest.request("POST", f"/v3/clusters/{cid}/topics/{topic}/records",
                         raw=good + b"\n" + good + b" oops " + good,
                         headers={"Content-Type": JSON})
    assert reply.status == 200
    from .v3_harness import concatenated
    results = concatenated(reply.text)
    assert [r["error_code"] for r in results] == [200, 200, 400]
    assert "expected a JSON object" in results[2]["message"]


def test_oversized_record(rest: RestV3, cid: str) -> None:
    topic = unique()
    ok(create(rest, cid, topic), 201)
    with RestV3(rest.bootstrap, client_max_size=10_000) as small:
        big = json.dumps({"value": {"type": "STRING", "data": "x" * 20_000}}).encode()
        path = f"/v3/clusters/{cid}/topics/{topic}/records"
        error(small.request("POST", path, raw=big, headers={"Content-Type": JSON}), 413, 413)
        fine = json.dumps({"value": {"type": "STRING", "data": "x" * 5_000}}).encode()
        status, results = asyncio.run(stream_produce(small.url + path, [fine, fine, big]))
        assert status == 200
        assert [r["error_code"] for r in results] == [200, 200, 413]


def test_stream_of_1000_records_on_one_connection(rest: RestV3, cid: str) -> None:
    topic = unique()
    ok(create(rest, cid, topic), 201)
    records = [json.dumps({"key": {"type": "STRING", "data": f"k{i}"},
                           "value": {"type": "JSON", "data": {"i": i}}}).encode()
               for i in range(1000)]
    # cut the body at places that are not record boundaries (inside strings too)
    body = b"\n".join(records)
    pieces = [body[i:i + 997] for i in range(0, len(body), 997)]
    replies: list[int] = []
    url = f"{rest.url}/v3/clusters/{cid}/topics/{topic}/records"
    status, results = asyncio.run(stream_produce(url, pieces, chunked_reply=replies))
    assert status == 200 and len(results) == 1000
    assert [r["error_code"] for r in results] == [200] * 1000
    assert [r["offset"] for r in results] == list(range(1000))
    assert {r["partition_id"] for r in results} == {0}
    assert len(replies) > 1  # answered as the records went, not in one piece at the end
    back = read_back(rest, topic, 1, 1000)
    assert [(r.key, json.loads(r.value)) for r in back] == [
        (f"k{i}".encode(), {"i": i}) for i in range(1000)]


def test_results_come_back_while_the_request_is_still_open(rest: RestV3, cid: str) -> None:
    topic = unique()
    ok(create(rest, cid, topic), 201)
    records = [json.dumps({"value": {"type": "STRING", "data": f"r{i}"}}).encode()
               for i in range(25)]
    records[10] = b'{"value": {"type": "BINARY", "data": "??"}}'
    url = f"{rest.url}/v3/clusters/{cid}/topics/{topic}/records"
    # each record is sent only after the result of the previous one arrived
    status, results = asyncio.run(stream_produce(url, records, lockstep=True))
    assert status == 200
    assert [r["error_code"] for r in results] == [200] * 10 + [400] + [200] * 14
    assert [r["offset"] for r in results if r["error_code"] == 200] == list(range(24))


def test_back_pressure_keeps_order_and_answers_everything(rest: RestV3, cid: str) -> None:
    """With room for only 8 records in flight the reader waits for the writer again and
    again; every record is still answered, in order."""
    from moldau.rest.v3 import records as module

    topic = unique()
    ok(create(rest, cid, topic), 201)
    saved = module.IN_FLIGHT
    rest.call(_set(module, 8))
    try:
        body = b"".join(json.dumps({"value": {"type": "STRING", "data": str(i)}}).encode()
                        for i in range(2000))
        url = f"{rest.url}/v3/clusters/{cid}/topics/{topic}/records"
        status, results = asyncio.run(stream_produce(url, [body[i:i + 4096] for i in
                                                           range(0, len(body), 4096)]))
    finally:
        rest.call(_set(module, saved))
    assert status == 200
    assert [r["offset"] for r in results] == list(range(2000))


async def _set(module: object, value: int) -> None:
    module.IN_FLIGHT = value  # type: ignore[attr-defined]


def test_a_client_that_goes_away_mid_stream_leaves_the_proxy_serving(rest: RestV3,
                                                                    cid: str) -> None:
    import aiohttp

    topic = unique()
    ok(create(rest, cid, topic), 201)
    url = f"{rest.url}/v3/clusters/{cid}/topics/{topic}/records"
    record = json.dumps({"value": {"type": "STRING", "data": "x"}}).encode()

    async def abandon() -> int:
        never = asyncio.Event()

        async def body():  # type: ignore[no-untyped-def]
            for _ in range(50):
                yield record
            await never.wait()  # the request body never ends

        got = 0
        async with aiohttp.ClientSession() as session:
            reply = await session.post(url, data=body(), headers={"Content-Type": JSON})
            async for piece in reply.content.iter_any():
                got += piece.count(b'"error_code":200')
                if got >= 50:
                    break
            reply.close()  # drop the connection with the request still open
        return got

    assert asyncio.run(asyncio.wait_for(abandon(), 60)) == 50
    results = rest.produce(cid, topic, [{"value": {"type": "STRING", "data": "after"}}])
    assert results[0]["error_code"] == 200 and results[0]["offset"] >= 50
    ok(rest.request("GET", f"/v3/clusters/{cid}"))
