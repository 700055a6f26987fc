"""The registry's REST API on an in-process broker, spoken to with a plain HTTP client."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import pytest
from google.protobuf import descriptor_pb2

from moldau.testing.runner import InProcessBroker

from .registry_harness import RunningRegistry, unique

V1 = json.dumps({"type": "record", "name": "User", "fields": [
    {"name": "name", "type": "string"}]})
V2 = json.dumps({"type": "record", "name": "User", "fields": [
    {"name": "name", "type": "string"}, {"name": "age", "type": "int", "default": 0}]})
BAD = json.dumps({"type": "record", "name": "User", "fields": [
    {"name": "name", "type": "int"}]})  # string -> int: incompatible with V1 and V2
SR = "application/vnd.schemaregistry.v1+json"


@pytest.fixture(scope="module")
def broker() -> Iterator[InProcessBroker]:
    with InProcessBroker() as node:
        yield node


@pytest.fixture
def reg(broker: InProcessBroker) -> Iterator[RunningRegistry]:
    """A registry with a topic of its own (global config and mode changes stay here)."""
    with RunningRegistry(broker.bootstrap) as registry:
        yield registry


def ok(reg: RunningRegistry, method: str, path: str, body: object = None) -> object:
    status, ctype, answer = reg.request(method, path, body)
    assert status == 200, (method, path, answer)
    assert ctype == SR
    return answer


def error(reg: RunningRegistry, method: str, path: str, body: object = None, *,
          status: int, code: int, **kwargs: object) -> str:
    got_status, ctype, answer = reg.request(method, path, body, **kwargs)  # type: ignore[arg-type]
    assert (got_status, answer.get("error_code")) == (status, code), (method, path, answer)
    assert set(answer) == {"error_code", "message"} and ctype == SR
    return str(answer["message"])


def test_every_endpoint(reg: RunningRegistry) -> None:
    s = unique("user-value")
    assert ok(reg, "GET", "/") == {}
    assert ok(reg, "GET", "/schemas/types") == ["AVRO", "JSON", "PROTOBUF"]
    assert ok(reg, "POST", f"/subjects/{s}/versions", {"schema": V1})["id"] == 1
    assert ok(reg, "POST", f"/subjects/{s}/versions?normalize=False",
              {"schema": V1, "schemaType": "AVRO", "references": []})["id"] == 1
    assert ok(reg, "POST", f"/subjects/{s}/versions", {"schema": V2})["id"] == 2
    assert ok(reg, "GET", "/subjects") == [s]
    assert ok(reg, "GET", f"/subjects?subjectPrefix={s[:6]}") == [s]
    assert ok(reg, "GET", f"/subjects/{s}/versions") == [1, 2]
    latest = ok(reg, "GET", f"/subjects/{s}/versions/latest")
    assert latest == {"subject": s, "version": 2, "id": 2,
                      "schema": json.dumps(json.loads(V2), separators=(",", ":"))}
    assert ok(reg, "GET", f"/subjects/{s}/versions/-1") == latest
    status, _, raw = reg.request("GET", f"/subjects/{s}/versions/1/schema")
    assert status == 200 and raw == json.loads(V1)  # the schema text itself
    assert ok(reg, "GET", f"/subjects/{s}/versions/1/referencedby") == []
    found = ok(reg, "POST", f"/subjects/{s}", {"schema": V1})
    assert (found["version"], found["id"]) == (1, 1)  # type: ignore[index]
    assert ok(reg, "GET", "/schemas/ids/1") == {
        "schema": json.dumps(json.loads(V1), separators=(",", ":"))}
    assert ok(reg, "GET", "/schemas/ids/2?fetchMaxId=true")["maxId"] == 2  # type: ignore[index]
    status, _, raw = reg.request("GET", "/schemas/ids/1/schema")
    assert status == 200 and raw == json.loads(V1)
    assert ok(reg, "GET", "/schemas/ids/1/subjects") == [s]
    assert ok(reg, "GET", "/schemas/ids/1/versions") == [{"subject": s, "version": 1}]
    assert len(ok(reg, "GET", "/schemas")) == 2  # type: ignore[arg-type]
    assert len(ok(reg, "GET", "/schemas?latestOnly=true")) == 1  # type: ignore[arg-type]
    assert ok(reg, "GET", "/contexts") == ["."]
    # compatibility
    assert ok(reg, "POST", f"/compatibility/subjects/{s}/versions/latest",
              {"schema": BAD}) == {"is_compatible": False}
    verbose = ok(reg, "POST", f"/compatibility/subjects/{s}/versions?verbose=True",
                 {"schema": BAD})
    assert verbose["is_compatible"] is False and verbose["messages"]  # type: ignore[index]
    assert ok(reg, "POST", f"/compatibility/subjects/{s}/versions/1?verbose=true",
              {"schema": V2}) == {"is_compatible": True, "messages": []}
    # config and mode
    assert ok(reg, "GET", "/config") == {"compatibilityLevel": "BACKWARD"}
    assert ok(reg, "PUT", "/config", {"compatibility": "FULL"}) == {"compatibility": "FULL"}
    assert ok(reg, "PUT", f"/config/{s}", {"compatibility": "NONE"}) == {
        "compatibility": "NONE"}
    assert ok(reg, "GET", f"/config/{s}") == {"compatibilityLevel": "NONE"}
    assert ok(reg, "DELETE", f"/config/{s}") == {"compatibilityLevel": "NONE"}
    assert ok(reg, "GET", f"/config/{s}?defaultToGlobal=true") == {"compatibilityLevel": "FULL"}
    assert ok(reg, "GET", "/mode") == {"mode": "READWRITE"}
    assert ok(reg, "PUT", f"/mode/{s}", {"mode": "READONLY"}) == {"mode": "READONLY"}
    assert ok(reg, "GET", f"/mode/{s}") == {"mode": "READONLY"}
    error(reg, "POST", f"/subjects/{s}/versions", {"schema": V1.replace("User", "U2")},
          status=422, code=42205)
    assert ok(reg, "DELETE", f"/mode/{s}") == {"mode": "READONLY"}
    # deletes
    assert ok(reg, "DELETE", f"/subjects/{s}/versions/1") == 1
    assert ok(reg, "GET", f"/subjects/{s}/versions?deleted=true") == [1, 2]
    assert ok(reg, "DELETE", f"/subjects/{s}/versions/1?permanent=true") == 1
    assert ok(reg, "DELETE", f"/subjects/{s}") == [2]
    assert ok(reg, "GET", "/subjects?deleted=true") == [s]
    assert ok(reg, "DELETE", f"/subjects/{s}?permanent=true") == [2]
    assert ok(reg, "GET", "/subjects?deleted=true") == []


def test_error_codes_and_nothing_written(reg: RunningRegistry) -> None:
    s = unique()
    ok(reg, "POST", f"/subjects/{s}/versions", {"schema": V1})
    position = reg.registry.store.position  # type: ignore[union-attr]
    error(reg, "GET", "/subjects/nope/versions", status=404, code=40401)
    error(reg, "GET", f"/subjects/{s}/versions/9", status=404, code=40402)
    error(reg, "GET", "/schemas/ids/999", status=404, code=40403)
    error(reg, "POST", f"/subjects/{s}", {"schema": V2}, status=404, code=40403)
    error(reg, "GET", f"/subjects/{s}/versions/zero", status=422, code=42202)
    message = error(reg, "POST", f"/subjects/{s}/versions", {"schema": BAD},
                    status=409, code=409)
    assert "incompatible" in message
    for invalid in ('{"type": "recrd"}', "{not json"):
        error(reg, "POST", f"/subjects/{s}/versions", {"schema": invalid},
              status=422, code=42201)
    # an empty schema means "the latest one again" (Confluent), so only on a new subject
    error(reg, "POST", f"/subjects/{s}-new/versions", {"schema": ""}, status=422, code=42201)
    error(reg, "POST", f"/subjects/{s}/versions",
          {"schema": "syntax = \"proto3\"; message {", "schemaType": "PROTOBUF"},
          status=422, code=42201)
    error(reg, "POST", f"/subjects/{s}/versions", {"schema": V1, "schemaType": "XSD"},
          status=422, code=42201)
    error(reg, "PUT", "/config", {"compatibility": "MOSTLY"}, status=422, code=42203)
    error(reg, "PUT", "/mode", {"mode": "SOMETIMES"}, status=422, code=42204)
    error(reg, "POST", f"/subjects/{s}/versions", raw=b'{"schema": ',
          headers={"Content-Type": SR}, status=400, code=400)
    error(reg, "POST", f"/subjects/{s}/versions", raw=b"[1, 2]",
          headers={"Content-Type": SR}, status=400, code=400)
    error(reg, "POST", f"/subjects/{s}/versions", raw=V1.encode(),
          headers={"Content-Type": "text/plain"}, status=415, code=415)
    huge = json.dumps({"schema": json.dumps({"type": "enum", "name": "E", "symbols": [
        f"S{i}" for i in range(1_000_000)]})}).encode()
    error(reg, "POST", f"/subjects/{s}/versions", raw=huge, headers={"Content-Type": SR},
          status=413, code=413)
    error(reg, "GET", "/no/such/thing", status=404, code=404)
    error(reg, "PATCH", "/subjects", status=405, code=405)
    error(reg, "GET", "/subjects", headers={"Accept": "text/html"}, status=406, code=406)
    error(reg, "GET", "/schemas/ids/abc", status=404, code=404)
    assert reg.registry.store.position == position  # type: ignore[union-attr]
    assert ok(reg, "GET", f"/subjects/{s}/versions") == [1]


@pytest.mark.parametrize("ctype", [
    "application/vnd.schemaregistry.v1+json", "application/vnd.schemaregistry+json",
    "application/json", "application/json; charset=utf-8", None])
def test_content_types(reg: RunningRegistry, ctype: str | None) -> None:
    s = unique()
    headers = {"Content-Type": ctype} if ctype else {}
    status, _, answer = reg.request("POST", f"/subjects/{s}/versions",
                                    raw=json.dumps({"schema": V1}).encode(), headers=headers)
    assert (status, answer["id"]) == (200, 1)
    for accept, answered in [("application/json", "application/json"),
                             ("application/vnd.schemaregistry+json",
                              "application/vnd.schemaregistry+json"),
                             ("*/*", SR), ("application/vnd.schemaregistry.v1+json", SR)]:
        _, got, _ = reg.request("GET", "/subjects", headers={"Accept": accept})
        assert got == answered


def test_protobuf_base64_descriptor_in_and_serialized_out(reg: RunningRegistry) -> None:
    s = unique()
    proto = descriptor_pb2.FileDescriptorProto(name="thing.proto", package="t", syntax="proto3")
    message = proto.message_type.add(name="Thing")
    message.field.add(name="id", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
                      label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    encoded = base64.standard_b64encode(proto.SerializeToString()).decode()
    answer = ok(reg, "POST", f"/subjects/{s}/versions",
                {"schema": encoded, "schemaType": "PROTOBUF"})
    schema_id = answer["id"]  # type: ignore[index]
    text = ok(reg, "GET", f"/schemas/ids/{schema_id}")
    assert text["schemaType"] == "PROTOBUF" and "message Thing" in text["schema"]  # type: ignore[index]
    serialized = ok(reg, "GET", f"/schemas/ids/{schema_id}?format=serialized")
    back = descriptor_pb2.FileDescriptorProto.FromString(
        base64.standard_b64decode(serialized["schema"]))  # type: ignore[index]
    assert [m.name for m in back.message_type] == ["Thing"]
    # the text form is the same schema: same id
    assert ok(reg, "POST", f"/subjects/{s}/versions",
              {"schema": text["schema"], "schemaType": "PROTOBUF"}) == answer  # type: ignore[index]


def test_state_survives_a_restart_and_other_instances_read_it(broker: InProcessBroker) -> None:
    with RunningRegistry(broker.bootstrap) as first:
        topic = first.topic
        ids = [ok(first, "POST", f"/subjects/s{i}/versions",
                  {"schema": json.dumps({"type": "enum", "name": "E", "symbols": [f"A{i}"]})})
               for i in range(5)]
        ok(first, "PUT", "/config", {"compatibility": "FORWARD"})
        with RunningRegistry(broker.bootstrap, kafkastore_topic=topic) as second:
            # a write on the first is visible on the second at once
            ok(first, "POST", "/subjects/late/versions", {"schema": '"string"'})
            assert ok(second, "GET", "/subjects/late/versions") == [1]
            assert ok(second, "GET", "/config") == {"compatibilityLevel": "FORWARD"}
    with RunningRegistry(broker.bootstrap, kafkastore_topic=topic) as again:
        assert [ok(again, "GET", f"/subjects/s{i}/versions/1")["id"]  # type: ignore[index]
                for i in range(5)] == [i["id"] for i in ids]  # type: ignore[index]
        assert ok(again, "POST", "/subjects/new/versions", {"schema": '"bytes"'})["id"] == 7
