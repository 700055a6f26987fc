"""Fixtures: one peer broker per kind, shared by the whole session."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest

from moldau.client.connection import BrokerConnection

from .peers import Peer, start_peer

PEER_NAMES = ["tansu", "noida", "moldau"]

_peers: dict[str, Peer] = {}


def _peer(name: str) -> Peer:
    if name not in _peers:
        _peers[name] = start_peer(name)
    return _peers[name]


@pytest.fixture(scope="session", autouse=True)
def _stop_peers() -> Iterator[None]:
    yield
    for peer in _peers.values():
        peer.stop()
    _peers.clear()


@pytest.fixture(scope="session", params=PEER_NAMES)
def peer(request: pytest.FixtureRequest) -> Peer:
    return _peer(request.param)


@pytest.fixture(scope="session")
def tansu() -> Peer:
    return _peer("tansu")


@pytest.fixture(scope="session")
def noida() -> Peer:
    return _peer("noida")


def broker_versions(peer: Peer) -> dict[int, tuple[int, int]]:
    """The peer's ApiVersions answer as {api_key: (min, max)}, cached per peer."""
    cached = peer.extra.get("versions")
    if cached is None:
        async def ask() -> dict[int, tuple[int, int]]:
            host, port = peer.bootstrap.split(":")
            conn = BrokerConnection(host, int(port))
            await conn.connect()
            conn.close()
            return {k: (r.min_version, r.max_version) for k, r in conn.versions.broker.items()}

        cached = peer.extra["versions"] = asyncio.run(ask())
    return cached  # type: ignore[return-value]


def require_apis(peer: Peer, *api_keys: int) -> None:
    """Skip (naming the gap) when the peer does not serve one of ``api_keys``."""
    from moldau.protocol.api_keys import api_name

    versions = broker_versions(peer)
    missing = [api_name(k) for k in api_keys if k not in versions]
    if missing:
        pytest.skip(f"{peer.name} does not serve {', '.join(missing)}")


def topic_name(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"
