"""Content types of the REST Proxy: what a produce body's type means, what GET .../records
answers for an Accept header, and which bodies are read."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp.test_utils import make_mocked_request

from moldau.http import HttpError
from moldau.rest.media import (
    EMBEDDED,
    V2,
    is_v3,
    produce_format,
    read_body,
    records_format,
)


def _request(headers: dict[str, str], body: bytes = b"") -> object:
    request = make_mocked_request("POST", "/topics/t", headers=headers)
    if body:
        async def read() -> bytes:
            return body
        request.read = read  # type: ignore[method-assign]
    return request


@pytest.mark.parametrize("ctype, fmt", [
    (EMBEDDED["avro"], "avro"), (EMBEDDED["json"], "json"), (EMBEDDED["binary"], "binary"),
    (EMBEDDED["jsonschema"], "jsonschema"), (EMBEDDED["protobuf"], "protobuf"),
    (V2, "binary"), ("application/vnd.kafka+json", "binary"), ("application/json", "binary"),
    ("application/octet-stream", "binary"),
])
def test_produce_format_from_content_type(ctype: str, fmt: str) -> None:
    assert produce_format(_request({"Content-Type": ctype})) == fmt  # type: ignore[arg-type]


def test_produce_refuses_other_types() -> None:
    with pytest.raises(HttpError) as info:
        produce_format(_request({"Content-Type": "text/plain"}))  # type: ignore[arg-type]
    assert (info.value.status, info.value.error_code) == (415, 415)


@pytest.mark.parametrize("accept, own, expected", [
    (EMBEDDED["json"], "json", ("json", EMBEDDED["json"])),
    (EMBEDDED["json"], "binary", ("json", EMBEDDED["json"])),
    (V2, "binary", ("binary", V2)),
    ("*/*", "binary", ("binary", EMBEDDED["binary"])),
    (None, "json", ("binary", EMBEDDED["binary"])),  # Confluent: binary unless asked
    (f"{EMBEDDED['binary']}, {EMBEDDED['avro']}", "avro", ("avro", EMBEDDED["avro"])),
    (f"{EMBEDDED['binary']}, {EMBEDDED['avro']};q=0.5", "avro",
     ("binary", EMBEDDED["binary"])),
])
def test_records_format_from_accept(accept: str | None, own: str,
                                    expected: tuple[str, str]) -> None:
    headers = {} if accept is None else {"Accept": accept}
    request = make_mocked_request("GET", "/consumers/g/instances/i/records", headers=headers)
    assert records_format(request, own) == expected


def test_records_format_406() -> None:
    request = make_mocked_request("GET", "/r", headers={"Accept": "text/plain"})
    with pytest.raises(HttpError) as info:
        records_format(request, "json")
    assert info.value.status == 406


def test_read_body_checks_type_and_json() -> None:
    async def body(headers: dict[str, str], raw: bytes, **kw: bool) -> object:
        return await read_body(_request(headers, raw), **kw)  # type: ignore[arg-type]

    assert asyncio.run(body({"Content-Type": V2}, b'{"a": 1}')) == {"a": 1}
    assert asyncio.run(body({"Content-Type": V2}, b"", optional=True)) is None
    for headers, raw, status in (({"Content-Type": "text/xml"}, b"<a/>", 415),
                                 ({"Content-Type": V2}, b"{oops", 400),
                                 ({"Content-Type": V2}, b"", 400),
                                 ({"Content-Type": V2}, b"\xff\xfe", 400)):
        with pytest.raises(HttpError) as info:
            asyncio.run(body(headers, raw))
        assert info.value.status == status, (headers, raw)


def test_v3_paths() -> None:
    assert is_v3("/v3") and is_v3("/v3/clusters") and not is_v3("/v30") \
        and not is_v3("/topics")
