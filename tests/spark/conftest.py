"""Fixtures of the Spark suite: ONE SparkSession per test process, one broker per process.

Every test here is marked ``slow`` (Spark costs ~10-20 s to start and ~0.5 s per query).
The session runs ``local[2]`` on loopback with moldau's settings
(:func:`moldau.spark.session.build_session`); tests use fresh topic names on the shared
broker so they do not see each other's records.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

try:
    import pyspark  # noqa: F401
except ImportError:  # pragma: no cover - the message is the point
    raise pytest.UsageError(
        "the Spark suite needs the spark extra: pip install -e '.[test,spark]' "
        "(make test installs it)") from None

from moldau.client import NewTopic, SyncAdminClient
from moldau.testing.runner import BrokerProcess

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if Path(str(item.fspath)).resolve().parent == HERE:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from moldau.spark.session import build_session

    session = build_session("local[2]", "moldau-tests", {
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
    })
    yield session
    session.stop()


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("spark-broker") / "data",
                         {"num.partitions": 2})
    proc.start()
    yield proc
    proc.stop()
    proc.close()


@pytest.fixture(scope="session")
def admin(broker: BrokerProcess) -> Iterator[SyncAdminClient]:
    client = SyncAdminClient({"bootstrap.servers": broker.bootstrap})
    yield client
    client.close()


@pytest.fixture
def new_topic(admin: SyncAdminClient) -> Any:
    """``new_topic(partitions=2, **configs)`` creates a topic with a fresh name."""

    def make(partitions: int = 2, **configs: str) -> str:
        name = f"t-{uuid.uuid4().hex[:10]}"
        admin.create_topics([NewTopic(name, partitions, 1, configs=dict(configs))])
        return name

    return make
