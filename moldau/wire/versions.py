"""API version negotiation: pick, per API, the highest version both sides speak.

The client speaks every version kio has a schema for (kio 0.6.5 follows Kafka 4.x, which
removed some old versions, KIP-896). The broker says what it serves in ApiVersions. For each
API the client uses ``min(broker max, client max)`` when that is not below either minimum.

ApiVersions itself is sent at v3 first; a broker that does not serve v3 answers in the v0
format with UNSUPPORTED_VERSION and its own list (KIP-511), and the client retries with the
highest version that list allows.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from moldau.protocol.api_keys import ApiKey, api_name
from moldau.protocol.schemas import has_schema, highest_version

from .errors import UnsupportedVersionError

# ApiVersions version tried first: v3 is what librdkafka and the Java client send and the
# first with client software name/version; v4 (KIP-1049) adds nothing the client needs.
API_VERSIONS_FIRST = 3

# Versions this client caps at even when kio knows newer ones: none so far. Kept as the one
# place to pin an API if a newer version turns out to need work the client does not do.
CLIENT_CAPS: dict[int, int] = {}

_UNSET: Any = object()


def client_range(api_key: int) -> tuple[int, int] | None:
    """(min, max) version the client can encode and decode for ``api_key``, or None.

    An api key kio does not know costs one dict lookup and leaves nothing behind, so a broker
    (or a proxy) that lists made-up api keys and versions in ApiVersions cannot grow the
    cache: it only ever holds the api keys kio ships."""
    if highest_version(api_key) is None:
        return None
    return _known_range(api_key)


@functools.cache
def _known_range(api_key: int) -> tuple[int, int] | None:
    high = highest_version(api_key)
    assert high is not None, api_key  # only called for api keys kio knows
    # Versions kio knows, from its index: nothing is imported, no made-up version is tried.
    versions = [v for v in range(high + 1) if has_schema(api_key, v)]
    cap = CLIENT_CAPS.get(api_key)
    if cap is not None:
        high = min(high, cap)
    return (versions[0], high) if versions[0] <= high else None


@dataclass(frozen=True, slots=True)
class VersionRange:
    """Versions one side supports for one API."""

    api_key: int
    min_version: int
    max_version: int


def choose_version(
    api_key: int, broker: VersionRange | None, client: tuple[int, int] | None
) -> int | None:
    """Highest version both sides support, or None when the ranges do not overlap."""
    if broker is None or client is None:
        return None
    high = min(broker.max_version, client[1])
    low = max(broker.min_version, client[0])
    return high if high >= low else None


class ApiVersionTable:
    """The versions negotiated with one broker."""

    def __init__(self, broker_ranges: Iterable[VersionRange]) -> None:
        self.broker: dict[int, VersionRange] = {r.api_key: r for r in broker_ranges}
        self._chosen: dict[int, int | None] = {}

    @classmethod
    def from_mapping(cls, ranges: Mapping[int, tuple[int, int]]) -> ApiVersionTable:
        return cls(VersionRange(k, lo, hi) for k, (lo, hi) in ranges.items())

    def version(self, api_key: int) -> int | None:
        """The version to use for ``api_key`` with this broker, or None if none works."""
        chosen = self._chosen.get(api_key, _UNSET)
        if chosen is _UNSET:
            client = client_range(api_key)
            chosen = choose_version(api_key, self.broker.get(api_key), client)
            if client is not None:  # only api keys kio knows are remembered
                self._chosen[api_key] = chosen
        return chosen

    def require(self, api_key: int, min_version: int = 0, *, what: str = "") -> int:
        """The version to use, or :class:`UnsupportedVersionError` explaining why not."""
        version = self.version(api_key)
        if version is not None and version >= min_version:
            return version
        name = api_name(api_key)
        broker = self.broker.get(api_key)
        client = client_range(api_key)
        offered = f"v{broker.min_version}-v{broker.max_version}" if broker else "no version"
        speaks = f"v{max(client[0], min_version)}-v{client[1]}" if client else "no version"
        raise UnsupportedVersionError(
            f"{what or name}: the broker offers {name} {offered}, this client speaks {speaks}"
        )

    def supports(self, api_key: int, min_version: int = 0) -> bool:
        version = self.version(api_key)
        return version is not None and version >= min_version


def api_versions_retry_version(broker_ranges: Iterable[VersionRange]) -> int:
    """ApiVersions version to retry with after a KIP-511 UNSUPPORTED_VERSION answer."""
    for r in broker_ranges:
        if r.api_key == ApiKey.API_VERSIONS:
            return max(0, min(r.max_version, API_VERSIONS_FIRST))
    return 0
