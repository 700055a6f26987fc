"""The registry client's pure parts: settings, urls with credentials, request bodies."""

from __future__ import annotations

import asyncio
import base64

import pytest

from moldau.registry.client import (
    AsyncSchemaRegistryClient,
    Schema,
    SchemaReference,
    config_from_properties,
    references_of,
)


def test_console_tool_properties_map_to_client_settings() -> None:
    assert config_from_properties({
        "schema.registry.url": "http://a:1,http://b:2",
        "schema.registry.basic.auth.user.info": "u:p",
        "basic.auth.credentials.source": "USER_INFO",
        "schema.registry.ssl.ca.location": "/ca.pem",
        "parse.key": "true", "value.schema": "{}",
    }) == {"url": "http://a:1,http://b:2", "basic.auth.user.info": "u:p",
           "basic.auth.credentials.source": "USER_INFO", "ssl.ca.location": "/ca.pem"}


def test_urls_are_split_and_credentials_taken_out() -> None:
    client = AsyncSchemaRegistryClient({"url": "http://us%40er:se:cret@h1:8081/, http://h2:8082"})
    assert client.urls == ["http://h1:8081", "http://h2:8082"]
    assert client.credentials == ("us@er", "se:cret")
    with pytest.raises(ValueError, match="remove one of them"):
        AsyncSchemaRegistryClient({"url": "http://u:p@h:1", "basic.auth.user.info": "a:b"})
    plain = AsyncSchemaRegistryClient({"url": "http://h:1", "basic.auth.user.info": "a:b:c",
                                       "cache.latest.ttl.sec": "5", "timeout": "2"})
    assert plain.credentials == ("a", "b:c")
    assert (plain.latest_ttl_s, plain.timeout) == (5.0, 2.0)
    with pytest.raises(ValueError, match="timeout must be a number"):
        AsyncSchemaRegistryClient({"url": "http://h:1", "timeout": "soon"})


def test_request_bodies_leave_out_avro_type_and_empty_references() -> None:
    assert Schema('"string"').to_json() == {"schema": '"string"'}
    refs = (SchemaReference("common.proto", "common.proto", 2),)
    assert Schema("syntax", "PROTOBUF", refs).to_json() == {
        "schema": "syntax", "schemaType": "PROTOBUF",
        "references": [{"name": "common.proto", "subject": "common.proto", "version": 2}]}
    assert Schema.from_json({"schema": "x", "references": [
        {"name": "n", "subject": "s", "version": "3"}]}) == Schema(
        "x", "AVRO", (SchemaReference("n", "s", 3),))


def test_references_from_console_json() -> None:
    assert references_of([{"name": "a", "subject": "b", "version": 1}]) == (
        SchemaReference("a", "b", 1),)
    with pytest.raises(ValueError, match="name, subject and version"):
        references_of([{"name": "a"}])


def test_basic_auth_header() -> None:
    async def headers() -> dict[str, str]:
        client = AsyncSchemaRegistryClient({"url": "http://h:1", "basic.auth.user.info": "u:p"})
        session = client._get_session()
        try:
            return dict(session.headers)
        finally:
            await client.close()

    found = asyncio.run(headers())
    assert found["Authorization"] == "Basic " + base64.b64encode(b"u:p").decode()
    assert found["Accept"].startswith("application/vnd.schemaregistry.v1+json")
