"""The registry's rules, on an in-memory store with the real schema types (no sockets)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable
from typing import Any, TypeVar

import pytest

from moldau.http import HttpError
from moldau.registry.requests import SchemaRequest, parse_schema_request
from moldau.registry.service import RegistryService, Settings
from moldau.registry.store import MemoryStore

T = TypeVar("T")


def run(coro: Awaitable[T]) -> T:
    return asyncio.run(coro)  # type: ignore[arg-type]


def record(*fields: tuple[str, str] | tuple[str, str, Any], name: str = "User") -> str:
    out = []
    for f in fields:
        entry: dict[str, Any] = {"name": f[0], "type": f[1]}
        if len(f) == 3:
            entry["default"] = f[2]
        out.append(entry)
    return json.dumps({"type": "record", "name": name, "fields": out})


V1 = record(("a", "string"))
V2_OK = record(("a", "string"), ("b", "int", 0))  # BACKWARD-compatible with V1
V2_BAD = record(("a", "string"), ("b", "int"))  # new field without default


def req(schema: str | None, **kwargs: Any) -> SchemaRequest:
    return parse_schema_request({"schema": schema, **kwargs})


def fails(code: int, coro: Awaitable[Any]) -> HttpError:
    with pytest.raises(HttpError) as info:
        run(coro)
    assert info.value.error_code == code, info.value.message
    return info.value


@pytest.fixture
def svc() -> RegistryService:
    return RegistryService(MemoryStore(), Settings())


def test_register_reuses_ids_within_and_across_subjects(svc: RegistryService) -> None:
    assert run(svc.register("t-value", req(V1)))["id"] == 1
    assert run(svc.register("t-value", req(V1)))["id"] == 1
    # whitespace and key order do not make another schema
    spaced = json.dumps(json.loads(V1), indent=2)
    assert run(svc.register("t-value", req(spaced)))["id"] == 1
    assert run(svc.register("other", req(V1)))["id"] == 1
    assert run(svc.versions("t-value")) == [1]
    assert run(svc.versions("other")) == [1]
    assert run(svc.register("t-value", req(V2_OK)))["id"] == 2
    assert run(svc.versions("t-value")) == [1, 2]
    entity = run(svc.get_version("t-value", "latest"))
    assert entity == {"subject": "t-value", "version": 2, "id": 2, "schema": V2_OK.replace(
        " ", "")}
    assert "schemaType" not in entity and "references" not in entity
    assert run(svc.subjects_for_id(1)) == ["other", "t-value"]
    assert run(svc.versions_for_id(1)) == [{"subject": "other", "version": 1},
                                           {"subject": "t-value", "version": 1}]


def test_incompatible_is_409_and_writes_nothing(svc: RegistryService) -> None:
    run(svc.register("s", req(V1)))
    written = len(svc.store.log)  # type: ignore[attr-defined]
    error = fails(409, svc.register("s", req(V2_BAD)))
    assert error.status == 409 and 's"' in error.message and "details" in error.message
    assert len(svc.store.log) == written  # type: ignore[attr-defined]
    check = run(svc.check_compatibility("s", "latest", req(V2_BAD), verbose=True))
    assert check["is_compatible"] is False and check["messages"]
    assert run(svc.check_compatibility("s", None, req(V2_OK))) == {"is_compatible": True}
    assert run(svc.check_compatibility("nope", None, req(V2_OK))) == {"is_compatible": True}
    fails(40402, svc.check_compatibility("s", "7", req(V2_OK)))
    # with level NONE anything goes
    run(svc.set_config("s", {"compatibility": "none"}))
    assert run(svc.register("s", req(V2_BAD)))["id"] == 2


def test_transitive_levels_look_at_every_live_version(svc: RegistryService) -> None:
    run(svc.set_config("s", {"compatibility": "BACKWARD_TRANSITIVE"}))
    run(svc.register("s", req(record(("a", "string")))))
    run(svc.register("s", req(record(("a", "string"), ("b", "int", 0)))))
    # b without default reads v2's data, not v1's
    v3 = req(record(("b", "int")))
    fails(409, svc.register("s", v3))
    assert run(svc.check_compatibility("s", "2", v3)) == {"is_compatible": True}
    assert run(svc.check_compatibility("s", "1", v3)) == {"is_compatible": False}
    run(svc.set_config("s", {"compatibility": "BACKWARD"}))
    assert run(svc.register("s", v3))["id"] == 3


def test_invalid_input_codes(svc: RegistryService) -> None:
    fails(42201, svc.register("s", req('{"type": "record"}')))
    fails(42201, svc.register("s", req("not json")))
    fails(42201, svc.register("s", req(None)))  # empty schema, nothing to reuse
    fails(42201, svc.register("s", req('"string"', references=[
        {"name": "X", "subject": "missing", "version": 1}])))
    with pytest.raises(HttpError) as info:
        parse_schema_request({"schema": '"int"', "schemaType": "XML"})
    assert info.value.error_code == 42201
    with pytest.raises(HttpError) as info:
        parse_schema_request(["not", "an", "object"])
    assert info.value.error_code == 400
    fails(42208, svc.register("", req(V1)))
    fails(42202, svc.get_version("s", "0"))
    fails(42202, svc.get_version("s", "abc"))
    fails(40401, svc.get_version("s", "1"))
    run(svc.register("s", req(V1)))
    fails(40402, svc.get_version("s", "2"))
    fails(40403, svc.schema_by_id(99))
    fails(40403, svc.lookup("s", req(V2_OK)))
    fails(40401, svc.lookup("nope", req(V1)))
    fails(42203, svc.set_config(None, {"compatibility": "SIDEWAYS"}))
    fails(42204, svc.set_mode(None, {"mode": "WRITEONLY"}, False))
    fails(40408, svc.get_config("s"))
    fails(40409, svc.get_mode("s"))
    assert len(svc.state.subjects) == 1


def test_lookup_answers_the_version(svc: RegistryService) -> None:
    run(svc.register("s", req(V1)))
    run(svc.register("s", req(V2_OK)))
    found = run(svc.lookup("s", req(json.dumps(json.loads(V1), indent=1))))
    assert (found["version"], found["id"], found["subject"]) == (1, 1, "s")
    run(svc.delete_version("s", "1", False))
    fails(40403, svc.lookup("s", req(V1)))
    assert run(svc.lookup("s", req(V1), deleted=True))["version"] == 1


def test_soft_and_permanent_deletes(svc: RegistryService) -> None:
    run(svc.register("s", req(V1)))
    run(svc.register("s", req(V2_OK)))
    fails(40407, svc.delete_version("s", "1", True))
    assert run(svc.delete_version("s", "1", False)) == 1
    fails(40406, svc.delete_version("s", "1", False))
    assert run(svc.versions("s")) == [2]
    assert run(svc.versions("s", deleted=True)) == [1, 2]
    assert run(svc.versions("s", deleted_only=True)) == [1]
    assert run(svc.get_version("s", "1", deleted=True))["version"] == 1
    fails(40405, svc.delete_subject("s", True))
    assert run(svc.delete_subject("s", False)) == [2]
    fails(40404, svc.delete_subject("s", False))
    assert run(svc.subjects(None)) == []
    assert run(svc.subjects(None, deleted=True)) == ["s"]
    assert run(svc.delete_subject("s", True)) == [1, 2]
    fails(40401, svc.delete_subject("s", True))
    fails(40401, svc.versions("s", deleted=True))
    # ids are never reused; the same schema comes back with its id
    assert run(svc.register("s", req(V2_BAD)))["id"] == 3
    assert run(svc.register("t", req(V1)))["id"] == 1


def test_re_registering_a_soft_deleted_schema_makes_a_new_version(svc: RegistryService
                                                                  ) -> None:
    run(svc.register("s", req(V1)))
    run(svc.delete_version("s", "1", False))
    assert run(svc.register("s", req(V1)))["id"] == 1
    assert run(svc.versions("s", deleted=True)) == [2]  # version 1 was tombstoned


def test_references_block_deletes_and_are_reported(svc: RegistryService) -> None:
    address = json.dumps({"type": "record", "name": "Address", "namespace": "x",
                          "fields": [{"name": "street", "type": "string"}]})
    run(svc.register("address", req(address)))
    user = json.dumps({"type": "record", "name": "User", "namespace": "x",
                       "fields": [{"name": "home", "type": "x.Address"}]})
    refs = [{"name": "x.Address", "subject": "address", "version": 1}]
    assert run(svc.register("user", req(user, references=refs)))["id"] == 2
    entity = run(svc.get_version("user", "1"))
    assert entity["references"] == refs
    assert run(svc.referenced_by("address", "1")) == [2]
    assert run(svc.schema_by_id(2))["references"] == refs
    fails(42206, svc.delete_version("address", "1", False))
    fails(42206, svc.delete_subject("address", False))
    run(svc.delete_subject("user", False))
    run(svc.delete_subject("address", False))
    fails(42206, svc.delete_subject("address", True))  # soft-deleted user still refers
    run(svc.delete_subject("user", True))
    assert run(svc.delete_subject("address", True)) == [1]


def test_config_scopes_and_answers(svc: RegistryService) -> None:
    assert run(svc.get_config(None)) == {"compatibilityLevel": "BACKWARD"}
    assert run(svc.set_config(None, {"compatibility": "full"})) == {"compatibility": "FULL"}
    assert run(svc.get_config(None)) == {"compatibilityLevel": "FULL"}
    assert run(svc.get_config("s", default_to_global=True)) == {"compatibilityLevel": "FULL"}
    assert run(svc.set_config("s", {"compatibilityLevel": "NONE", "normalize": True})) == {
        "compatibility": "NONE", "normalize": True}
    assert run(svc.get_config("s")) == {"compatibilityLevel": "NONE", "normalize": True}
    assert run(svc.get_config(":.:s")) == {"compatibilityLevel": "NONE", "normalize": True}
    assert svc.level_in_scope("s") == "NONE" and svc.normalize_in_scope("s")
    assert run(svc.delete_config("s")) == {"compatibilityLevel": "NONE", "normalize": True}
    fails(40401, svc.delete_config("s"))
    assert run(svc.delete_config(None)) == {"compatibilityLevel": "FULL"}
    assert run(svc.get_config(None)) == {"compatibilityLevel": "BACKWARD"}
    assert run(svc.get_config(":.:")) == {"compatibilityLevel": "BACKWARD"}


def test_modes_readonly_and_import(svc: RegistryService) -> None:
    assert run(svc.get_mode(None)) == {"mode": "READWRITE"}
    run(svc.register("s", req(V1)))
    fails(42205, svc.set_mode(None, {"mode": "IMPORT"}, False))  # subjects exist
    assert run(svc.set_mode("s", {"mode": "READONLY"}, False)) == {"mode": "READONLY"}
    fails(42205, svc.register("s", req(V2_OK)))
    fails(42205, svc.delete_version("s", "1", False))
    fails(42205, svc.set_config("s", {"compatibility": "NONE"}))
    assert run(svc.register("t", req(V2_OK)))["id"] == 2  # other subjects still write
    assert run(svc.delete_mode("s")) == {"mode": "READONLY"}
    fails(40401, svc.delete_mode("s"))
    # IMPORT: explicit ids and versions, no compatibility check
    assert run(svc.set_mode("imp", {"mode": "IMPORT"}, False)) == {"mode": "IMPORT"}
    fails(42205, svc.register("imp", req(V1)))  # no id: not in read-write mode
    assert run(svc.register("imp", req(V2_BAD, id=100, version=5)))["id"] == 100
    assert run(svc.get_version("imp", "5"))["id"] == 100
    fails(42205, svc.register("imp", req(V1, id=100, version=6)))  # id 100 is another schema
    fails(42205, svc.register("t", req(V1, id=7)))  # not in import mode
    run(svc.set_mode("imp", {"mode": "READWRITE"}, False))
    assert run(svc.register("u", req('"bytes"')))["id"] == 101  # after the largest id
    # global IMPORT with force on a non-empty registry
    assert run(svc.set_mode(None, {"mode": "import"}, True)) == {"mode": "IMPORT"}


def test_mode_changes_can_be_forbidden() -> None:
    svc = RegistryService(MemoryStore(), Settings(mode_mutability=False))
    fails(42205, svc.set_mode(None, {"mode": "READONLY"}, False))


def test_normalize_stores_the_normalized_form(svc: RegistryService) -> None:
    first = json.dumps({"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "string", "doc": "x", "z-prop": 1, "a-prop": 2}]})
    second = json.dumps({"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "string", "a-prop": 2, "z-prop": 1, "doc": "x"}]})
    one = run(svc.register("n", req(first), normalize=True))
    assert run(svc.register("n", req(second), normalize=True)) == one


def test_empty_schema_reuses_the_latest(svc: RegistryService) -> None:
    run(svc.register("s", req(V1)))
    assert run(svc.register("s", req(None)))["id"] == 1


def test_contexts_subjects_and_prefixes(svc: RegistryService) -> None:
    run(svc.register(":.:plain", req(V1)))
    run(svc.register(":.ctx:inner", req(V1)))
    run(svc.register("pla", req(V1)))
    assert run(svc.subjects(None)) == [":.ctx:inner", "pla", "plain"]
    assert run(svc.subjects(":*:")) == [":.ctx:inner", "pla", "plain"]
    assert run(svc.subjects("plai")) == ["plain"]
    assert run(svc.subjects(":.:pl")) == ["pla", "plain"]
    assert run(svc.versions(":.:plain")) == [1]
    assert run(svc.contexts()) == [".", ".ctx"]
    assert svc.schema_types() == ["AVRO", "JSON", "PROTOBUF"]
    found = run(svc.schemas(None, latest_only=True))
    assert [s["subject"] for s in found] == [":.ctx:inner", "pla", "plain"]
