"""API version negotiation."""

from __future__ import annotations

import gc
import tracemalloc

import pytest

from moldau.client.errors import UnsupportedVersionError
from moldau.client.versions import (
    ApiVersionTable,
    VersionRange,
    api_versions_retry_version,
    choose_version,
    client_range,
)
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.schemas import highest_version


def test_client_ranges_come_from_kio() -> None:
    assert client_range(ApiKey.FETCH) == (4, 18)
    assert client_range(ApiKey.PRODUCE) == (3, 13)
    assert client_range(ApiKey.METADATA) == (0, 13)
    assert client_range(ApiKey.API_VERSIONS) == (0, 4)
    assert client_range(4) is None  # LeaderAndIsr: kio has no schema


def test_choose_highest_common_version() -> None:
    assert choose_version(1, VersionRange(1, 0, 12), (4, 18)) == 12
    assert choose_version(1, VersionRange(1, 0, 17), (4, 18)) == 17
    assert choose_version(1, VersionRange(1, 5, 30), (4, 18)) == 18
    assert choose_version(1, VersionRange(1, 0, 3), (4, 18)) is None
    assert choose_version(1, None, (4, 18)) is None
    assert choose_version(1, VersionRange(1, 0, 3), None) is None


def test_table_require_explains_gap() -> None:
    table = ApiVersionTable.from_mapping({ApiKey.FETCH: (0, 3), ApiKey.METADATA: (0, 12)})
    assert table.version(ApiKey.METADATA) == 12
    assert table.supports(ApiKey.METADATA, 1)
    assert not table.supports(ApiKey.FETCH)
    with pytest.raises(UnsupportedVersionError, match=r"fetch v0-v3, this client speaks v4-v18"):
        table.require(ApiKey.FETCH)
    with pytest.raises(UnsupportedVersionError, match="create_partitions no version"):
        table.require(ApiKey.CREATE_PARTITIONS)
    with pytest.raises(UnsupportedVersionError, match="v13-v13"):
        table.require(ApiKey.METADATA, 13)


def test_kip511_retry_version() -> None:
    assert api_versions_retry_version([VersionRange(18, 0, 2)]) == 2
    assert api_versions_retry_version([VersionRange(18, 0, 9)]) == 3
    assert api_versions_retry_version([]) == 0


def test_made_up_api_keys_from_a_broker_leave_nothing_behind() -> None:
    """A broker (or proxy) listing every int16 api key at version 32767 in ApiVersions must
    not grow the client's version caches (before: one cached entry per made-up api key, each
    after 40 schema lookups; ~30,000 keys kept about 3 MB for the life of the process)."""
    made_up = [k for k in range(-32768, 32768) if highest_version(k) is None]
    hostile = [VersionRange(k, 0, 32767) for k in made_up]
    hostile.append(VersionRange(ApiKey.FETCH, 0, 32767))
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        table = ApiVersionTable(hostile)
        assert all(table.version(k) is None for k in made_up)
        assert table.version(ApiKey.FETCH) == 18  # a real key at a made-up version: ours
        del table
        gc.collect()
        grown = sum(stat.size_diff for stat in
                    tracemalloc.take_snapshot().compare_to(before, "filename"))
    finally:
        tracemalloc.stop()
    assert grown < 100_000, f"{grown} bytes kept after a hostile ApiVersions answer"
