"""moldau.registry.client against moldau's registry (a ``moldau serve`` subprocess): each API
call, the errors the registry answers, the caches, failover between urls, the sync facade."""

from __future__ import annotations

import asyncio
import json
import socket
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from moldau.registry.client import (
    AsyncSchemaRegistryClient,
    Schema,
    SchemaReference,
    SchemaRegistryClient,
    SchemaRegistryError,
)
from moldau.testing.registry import RegistryBrokerProcess

V1 = json.dumps({"type": "record", "name": "Item", "namespace": "t",
                 "fields": [{"name": "a", "type": "string"}]})
V2 = json.dumps({"type": "record", "name": "Item", "namespace": "t",
                 "fields": [{"name": "a", "type": "string"},
                            {"name": "b", "type": "int", "default": 0}]})
BAD = json.dumps({"type": "record", "name": "Item", "namespace": "t",
                  "fields": [{"name": "a", "type": "int"}]})


@pytest.fixture(scope="module")
def registry() -> Iterator[RegistryBrokerProcess]:
    with RegistryBrokerProcess() as proc:
        yield proc
        proc.close()


@pytest.fixture(scope="module")
def client(registry: RegistryBrokerProcess) -> Iterator[SchemaRegistryClient]:
    # Retries as confluent-kafka's client (500s included), with short waits.
    with SchemaRegistryClient({"url": registry.registry_url, "retries.wait.ms": 50}) as sync:
        yield sync


def _subject() -> str:
    return f"s-{uuid.uuid4().hex[:8]}"


def test_register_get_lookup_versions_and_latest(client: SchemaRegistryClient) -> None:
    subject = _subject()
    first = client.register_schema_full_response(subject, Schema(V1))
    assert first.subject == subject
    assert client.register_schema(subject, Schema(V1)) == first.schema_id
    second = client.register_schema(subject, Schema(V2))
    assert second != first.schema_id
    assert client.get_versions(subject) == [1, 2]
    assert subject in client.get_subjects()
    fetched = client.get_schema(first.schema_id)
    assert fetched.schema_type == "AVRO" and json.loads(fetched.schema_str)["name"] == "Item"
    found = client.lookup_schema(subject, Schema(V2))
    assert (found.schema_id, found.version, found.subject) == (second, 2, subject)
    latest = client.get_latest_version(subject)
    assert (latest.schema_id, latest.version) == (second, 2)
    assert client.get_version(subject, 1).schema_id == first.schema_id
    assert "AVRO" in client.get_schema_types()
    # the same schema under another subject keeps its id; normalized too
    assert client.register_schema(_subject(), Schema(V1)) == first.schema_id
    spaced = json.dumps(json.loads(V1), indent=2)
    assert client.register_schema(subject, Schema(spaced), normalize_schemas=True) == (
        first.schema_id)
    assert client.lookup_schema(subject, Schema(spaced), normalize_schemas=True).version == 1


def test_config_compatibility_and_deletes(client: SchemaRegistryClient) -> None:
    subject = _subject()
    client.register_schema(subject, Schema(V1))
    ok, messages = client.test_compatibility(subject, Schema(V2), verbose=True)
    assert ok and messages == []
    ok, messages = client.test_compatibility(subject, Schema(BAD), verbose=True)
    assert not ok and messages
    assert client.set_compatibility(subject, "none") == "NONE"
    assert client.get_compatibility(subject) == "NONE"
    assert client.test_compatibility(subject, Schema(BAD))[0]
    client.register_schema(subject, Schema(BAD))
    assert client.delete_version(subject, 2) == 2
    assert client.get_versions(subject) == [1]
    assert client.delete_subject(subject) == [1]
    assert client.delete_subject(subject, permanent=True) == [1, 2]  # soft-deleted version 2 too
    assert subject not in client.get_subjects(deleted=True)
    assert client.get_config()["compatibilityLevel"] == "BACKWARD"
    other = _subject()
    assert client.set_config(other, "FULL", normalize=True) == {"compatibility": "FULL",
                                                                "normalize": True}
    assert client.get_config(other)["compatibilityLevel"] == "FULL"


@pytest.mark.parametrize("call, status, code", [
    (lambda c: c.get_schema(987654), 404, 40403),
    (lambda c: c.get_versions("no-such-subject"), 404, 40401),
    (lambda c: c.get_latest_version("no-such-subject"), 404, 40401),
    (lambda c: c.register_schema("bad-schema", Schema('{"type": "record"}')), 422, 42201),
    (lambda c: c.lookup_schema("no-such-subject", Schema(V1)), 404, 40401),
])
def test_registry_errors_carry_status_code_and_message(client: SchemaRegistryClient,
                                                       call: Any, status: int,
                                                       code: int) -> None:
    with pytest.raises(SchemaRegistryError) as caught:
        call(client)
    assert (caught.value.http_status, caught.value.error_code) == (status, code)
    assert caught.value.message
    assert f"SR code {code}" in str(caught.value)


def test_missing_version_is_40402(client: SchemaRegistryClient) -> None:
    subject = _subject()
    client.register_schema(subject, Schema(V1))
    with pytest.raises(SchemaRegistryError) as caught:
        client.get_version(subject, 7)
    assert caught.value.error_code == 40402


def test_incompatible_registration_is_409(client: SchemaRegistryClient) -> None:
    subject = _subject()
    client.register_schema(subject, Schema(V1))
    with pytest.raises(SchemaRegistryError) as caught:
        client.register_schema(subject, Schema(BAD))
    assert (caught.value.http_status, caught.value.error_code) == (409, 409)


class Counting(AsyncSchemaRegistryClient):
    """Records the requests that reach the network."""

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__(config)
        self.paths: list[str] = []

    async def request(self, method: str, path: str, body: Any = None,
                      params: Any = None) -> Any:
        self.paths.append(f"{method} {path}")
        return await super().request(method, path, body, params)


def test_caches_by_id_schema_version_and_latest(registry: RegistryBrokerProcess) -> None:
    async def go() -> None:
        subject = _subject()
        async with Counting({"url": registry.registry_url}) as client:
            schema_id = await client.register_schema(subject, Schema(V1))
            await client.register_schema(subject, Schema(V1))
            # the registration answered its version: the lookup needs no request
            await client.lookup_schema(subject, Schema(V1))
            await client.get_schema(schema_id)  # known since it was registered
            await client.get_version(subject, 1)
            await client.get_version(subject, 1)
            await client.get_latest_version(subject)
            await client.get_latest_version(subject)
            assert client.paths == [
                f"POST /subjects/{subject}/versions",
                f"GET /subjects/{subject}/versions/1",
                f"GET /subjects/{subject}/versions/latest"]
        async with Counting({"url": registry.registry_url, "cache.latest.ttl.sec": 0}) as fresh:
            await fresh.get_schema(schema_id)
            await fresh.get_schema(schema_id)
            await fresh.get_schema(schema_id, fmt="resolved")
            await fresh.get_latest_version(subject)
            await asyncio.sleep(0.01)
            await fresh.get_latest_version(subject)
            assert fresh.paths == [f"GET /schemas/ids/{schema_id}"] * 2 + [
                f"GET /subjects/{subject}/versions/latest"] * 2

    asyncio.run(go())


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_failover_to_the_next_url_and_unreachable_registries(
        registry: RegistryBrokerProcess) -> None:
    dead = f"http://127.0.0.1:{_closed_port()}"
    with SchemaRegistryClient({"url": f"{dead},{registry.registry_url}",
                               "max.retries": 1, "retries.wait.ms": 10}) as client:
        assert isinstance(client.get_subjects(), list)
    with (SchemaRegistryClient({"url": dead, "max.retries": 1, "retries.wait.ms": 10}) as client,
          pytest.raises(SchemaRegistryError) as caught):
        client.get_subjects()
    assert caught.value.http_status == -1 and dead in caught.value.message


def test_references_travel_with_schemas(client: SchemaRegistryClient) -> None:
    base = _subject()
    client.register_schema(base, Schema(V1))
    holder = json.dumps({"type": "record", "name": "Holder", "namespace": "t",
                         "fields": [{"name": "item", "type": "t.Item"}]})
    schema = Schema(holder, "AVRO", (SchemaReference("t.Item", base, 1),))
    schema_id = client.register_schema(_subject(), schema)
    assert client.get_schema(schema_id).references == (SchemaReference("t.Item", base, 1),)


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="url is missing"):
        SchemaRegistryClient({})
    with pytest.raises(ValueError, match="invalid schema registry url"):
        SchemaRegistryClient({"url": "localhost:8081"})
    with pytest.raises(ValueError, match="unknown schema registry client settings: colour"):
        SchemaRegistryClient({"url": "http://x:1", "colour": "red"})
    with pytest.raises(ValueError, match="user:password"):
        SchemaRegistryClient({"url": "http://x:1", "basic.auth.user.info": "nocolon"})
