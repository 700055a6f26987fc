"""API version negotiation (:mod:`moldau.wire.versions`, shared with the broker's outbound
connections), under the name client code has always imported it by."""

from moldau.wire.versions import (
    API_VERSIONS_FIRST,
    CLIENT_CAPS,
    ApiVersionTable,
    VersionRange,
    api_versions_retry_version,
    choose_version,
    client_range,
)

__all__ = ["API_VERSIONS_FIRST", "CLIENT_CAPS", "ApiVersionTable", "VersionRange",
           "api_versions_retry_version", "choose_version", "client_range"]
