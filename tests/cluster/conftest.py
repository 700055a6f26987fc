"""Fixtures of the cluster suite: real ``moldau serve`` brokers against real ZooKeeper.

- ``cluster_factory(specs, style=..., settings=...)``: starts a :class:`BrokerCluster` on the
  session ZooKeeper (tests/conftest.py ``zookeeper``) under a chroot of its own, data under
  the test's tmp_path; every cluster it made is stopped (by pid) at the end of the test.
- ``seed003_cluster``: three brokers configured only by seed 003's environment variables
  (KAFKA_BROKER_ID, KAFKA_ZOOKEEPER_CONNECT, KAFKA_LISTENERS, KAFKA_ADVERTISED_LISTENERS,
  KAFKA_LISTENER_SECURITY_PROTOCOL_MAP, ...), shared by a module (tests there must leave the
  brokers running).
"""

from __future__ import annotations

import dataclasses
import re
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from moldau.devtools.zookeeper import ZooKeeperEnsemble
from moldau.testing.cluster import BrokerCluster, BrokerSpec, seed003_specs

ClusterFactory = Callable[..., BrokerCluster]


def _chroot(name: str) -> str:
    return f"/c-{re.sub(r'[^a-zA-Z0-9_-]', '_', name)[:50]}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def cluster_factory(zookeeper: ZooKeeperEnsemble, tmp_path: Path,
                    request: pytest.FixtureRequest) -> Iterator[ClusterFactory]:
    made: list[BrokerCluster] = []

    def make(specs: Sequence[BrokerSpec] | int = 3, *, style: str = "properties",
             settings: Mapping[str, str] | None = None, start: bool = True) -> BrokerCluster:
        if isinstance(specs, int):
            specs = [BrokerSpec(broker_id=i) for i in range(1, specs + 1)]
        if settings:
            specs = [dataclasses.replace(s, settings={**settings, **s.settings})
                     for s in specs]
        cluster = BrokerCluster(specs, tmp_path / f"cluster-{len(made) + 1}",
                                zookeeper=zookeeper.connect(_chroot(request.node.name)),
                                style=style)
        made.append(cluster)
        return cluster.start() if start else cluster

    try:
        yield make
    finally:
        for cluster in made:
            cluster.close()


@pytest.fixture(scope="module")
def seed003_cluster(zookeeper: ZooKeeperEnsemble, tmp_path_factory: pytest.TempPathFactory,
                    request: pytest.FixtureRequest) -> Iterator[BrokerCluster]:
    cluster = BrokerCluster(seed003_specs(3), tmp_path_factory.mktemp("seed003"),
                            zookeeper=zookeeper.connect(_chroot(request.module.__name__)),
                            style="env")
    try:
        yield cluster.start()
    finally:
        cluster.close()
