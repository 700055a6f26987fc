"""What registration answers (Confluent's RegisterSchemaResponse: the registered version, as
the JavaScript client's ``registerFullResponse`` reads it) and the latest version with given
metadata (``GET /subjects/{subject}/metadata``), on an in-memory store."""

from __future__ import annotations

import json

import pytest

from moldau.registry.service import RegistryService, Settings
from moldau.registry.store import MemoryStore

from .test_service import V1, V2_OK, fails, req, run


@pytest.fixture
def svc() -> RegistryService:
    return RegistryService(MemoryStore(), Settings())


def _compact(text: str) -> str:
    return json.dumps(json.loads(text), separators=(",", ":"))


def test_a_registration_answers_the_version_it_made_or_found(svc: RegistryService) -> None:
    owner = {"properties": {"owner": "Bob"}}
    first = run(svc.register("s", req(V1, metadata=owner)))
    assert first == {"version": 1, "id": 1, "metadata": owner}  # no text: see registered()
    again = run(svc.register("s", req(V1, metadata=owner)))
    assert again == first  # already there: the same version answers
    second = run(svc.register("s", req(V2_OK)))  # metadata not given: the latest version's
    assert second == {"version": 2, "id": 2, "metadata": owner}
    elsewhere = run(svc.register("t", req(V1, metadata=owner)))
    assert (elsewhere["id"], elsewhere["version"]) == (1, 1)
    assert "subject" not in elsewhere


def test_a_registration_answers_schema_type_and_references_except_avro(
        svc: RegistryService) -> None:
    run(svc.register("base", req('{"type": "string"}', schemaType="JSON")))
    refs = [{"name": "base.json", "subject": "base", "version": 1}]
    answer = run(svc.register("user", req('{"$ref": "base.json"}', schemaType="JSON",
                                          references=refs)))
    assert answer["schemaType"] == "JSON"
    assert answer["references"] == refs
    assert (answer["id"], answer["version"]) == (2, 1)


def test_latest_with_metadata_is_the_newest_version_holding_every_pair(
        svc: RegistryService) -> None:
    bob = {"properties": {"owner": "Bob", "email": "bob@acme.com"}}
    bob2 = {"properties": {"owner": "Bob2", "email": "bob@acme.com"}}
    run(svc.register("s", req(V1, metadata=bob)))
    run(svc.register("s", req(V2_OK, metadata=bob2)))
    found = run(svc.latest_with_metadata("s", {"owner": "Bob"}))
    assert (found["subject"], found["version"], found["metadata"]) == ("s", 1, bob)
    found = run(svc.latest_with_metadata("s", {"email": "bob@acme.com"}))
    assert found["version"] == 2
    assert run(svc.latest_with_metadata("s", {}))["version"] == 2
    fails(40403, svc.latest_with_metadata("s", {"owner": "Alice"}))
    fails(40401, svc.latest_with_metadata("nobody", {"owner": "Bob"}))


def test_latest_with_metadata_sees_soft_deleted_versions_only_when_asked(
        svc: RegistryService) -> None:
    bob = {"properties": {"owner": "Bob"}}
    run(svc.register("s", req(V1, metadata=bob)))
    run(svc.register("s", req(V2_OK, metadata={"properties": {"owner": "Eve"}})))
    run(svc.delete_version("s", "1", False))
    fails(40403, svc.latest_with_metadata("s", {"owner": "Bob"}))
    assert run(svc.latest_with_metadata("s", {"owner": "Bob"}, deleted=True))["version"] == 1
