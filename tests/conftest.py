"""Fixtures every part of the suite may use: real Apache ZooKeeper (moldau.testing.zookeeper).

- ``zookeeper``: one standalone server for the whole session (started on first use, ~0.5 s).
  Tests share it, so each works under its own chroot: ``zookeeper_connect`` gives a fresh
  ``127.0.0.1:PORT/<unique>`` connect string (the chroot not created, as a broker would find
  it), ``kazoo_client`` a started kazoo client inside a created one.
- ``zookeeper_ensemble``: a 3-node ensemble shared by a test module; every node is running and
  serving when a test starts (a test may kill or stop nodes; the next one gets them back).
  A test that needs a pristine ensemble starts its own ``ZooKeeperEnsemble(3)``.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from moldau.testing.zookeeper import ZooKeeperEnsemble

if TYPE_CHECKING:
    from kazoo.client import KazooClient


@pytest.fixture(scope="session")
def zookeeper() -> Iterator[ZooKeeperEnsemble]:
    ensemble = ZooKeeperEnsemble(1)
    try:
        yield ensemble.start()
    finally:
        ensemble.close()


@pytest.fixture
def zookeeper_chroot(request: pytest.FixtureRequest) -> str:
    """A chroot no other test uses: ``/t-<test name>-<random>``."""
    name = re.sub(r"[^a-zA-Z0-9_-]", "_", request.node.name)[:60]
    return f"/t-{name}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def zookeeper_connect(zookeeper: ZooKeeperEnsemble, zookeeper_chroot: str) -> str:
    """``zookeeper.connect`` of the session server with a fresh, not yet created chroot."""
    return zookeeper.connect(zookeeper_chroot)


@pytest.fixture
def kazoo_client(zookeeper_connect: str, zookeeper: ZooKeeperEnsemble,
                 zookeeper_chroot: str) -> Iterator[KazooClient]:
    """A connected kazoo client whose root is this test's own (created) chroot."""
    from kazoo.client import KazooClient

    root = KazooClient(hosts=zookeeper.connect_string)
    root.start(30)
    try:
        root.ensure_path(zookeeper_chroot)
    finally:
        root.stop()
        root.close()
    client = KazooClient(hosts=zookeeper_connect, timeout=10.0)
    client.start(30)
    try:
        yield client
    finally:
        client.stop()
        client.close()


@pytest.fixture(scope="module")
def _zookeeper_ensemble_module() -> Iterator[ZooKeeperEnsemble]:
    ensemble = ZooKeeperEnsemble(3)
    try:
        yield ensemble.start()
    finally:
        ensemble.close()


@pytest.fixture
def zookeeper_ensemble(_zookeeper_ensemble_module: ZooKeeperEnsemble) -> ZooKeeperEnsemble:
    _zookeeper_ensemble_module.heal()
    return _zookeeper_ensemble_module
