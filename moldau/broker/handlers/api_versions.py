"""ApiVersions (key 18), versions 0-4.

Answers with the API keys and version ranges of the handler registry, so the broker advertises
exactly what it implements. Requests at a version we do not serve get the KIP-511 fallback: a
v0-format response with UNSUPPORTED_VERSION and our version list, header v0, so that any client
can parse it and retry at a version we do serve (librdkafka retries v0, kafka-python v2).

Default-valued tagged fields (supported/finalized features, zk_migration_ready) are omitted:
old librdkafka (kcat's 2.0.2) fails to parse an ApiVersions v3 response that carries them.
Left out: feature flags (no finalized features are announced) and client software name checks.
"""

from __future__ import annotations

from typing import Any

from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0

from ...protocol.api_keys import ApiKey
from ...protocol.entities import build
from ...protocol.errors import ErrorCode
from ...protocol.messages import RequestHeader, encode_response
from ..dispatch import REGISTRY, RequestContext, handler

# As Kafka 4.x does (KAFKA-18659): list Produce from v0 although only v3+ is served (older
# requests are still refused by dispatch). librdkafka before 2.10 — kcat's 2.0.2 — compresses
# gzip, snappy and lz4 only when the broker lists Produce v0, and silently sends uncompressed
# batches otherwise. Clients pick their highest common version, so none picks v0-v2.
_ADVERTISED_MIN = {ApiKey.PRODUCE: 0}


def advertised_min(api_key: int) -> int:
    """The lowest version ApiVersions lists for ``api_key``."""
    return _ADVERTISED_MIN.get(api_key, REGISTRY[api_key].min_version)


def _api_keys() -> list[dict[str, int]]:
    return [
        {"api_key": spec.api_key,
         "min_version": advertised_min(spec.api_key),
         "max_version": spec.max_version}
        for spec in sorted(REGISTRY.values(), key=lambda s: s.api_key)
    ]


@handler(ApiKey.API_VERSIONS, 0, 4)
def handle_api_versions(ctx: RequestContext, request: Any) -> Any:
    return ctx.respond({"error_code": ErrorCode.none, "api_keys": _api_keys(),
                        "throttle_time": 0})


def fallback_response(header: RequestHeader) -> bytes:
    """KIP-511: answer an ApiVersions request at an unknown version in v0 format."""
    body = build(ApiVersionsResponseV0, {"error_code": ErrorCode.unsupported_version,
                                         "api_keys": _api_keys()})
    return encode_response(ApiKey.API_VERSIONS, 0, header.correlation_id, body)
