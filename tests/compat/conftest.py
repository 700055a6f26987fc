"""Fixtures of the client compatibility suite (one module per real client).

``kafka_endpoint`` is the address every client bootstraps from: a fresh ``moldau serve``
subprocess per module by default, or each endpoint ``$MOLDAU_COMPAT_ENDPOINT`` names (see
endpoint.py) so the same tests can run through ``moldau proxy``: e.g.
``MOLDAU_COMPAT_ENDPOINT=direct,tests.compat.wiretap:tapped_endpoint pytest tests/compat``.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from .endpoint import KafkaEndpoint, endpoint_factory, endpoint_specs

JS_DIR = Path(__file__).resolve().parent / "js"

# Broker settings the suite relies on: seed 004 produces to the literal topic 'topic', so
# auto-creation must be on (it is Kafka's default; stated here so an endpoint factory that
# starts its own broker keeps it).
COMPAT_SETTINGS = {
    "auto.create.topics.enable": "true",
    "num.partitions": 1,
    "group.initial.rebalance.delay.ms": 0,
}


@pytest.fixture(scope="module", params=endpoint_specs(), ids=lambda spec: spec.split(":")[-1])
def kafka_endpoint(request: pytest.FixtureRequest) -> Iterator[KafkaEndpoint]:
    with endpoint_factory(request.param)(COMPAT_SETTINGS) as endpoint:
        yield endpoint


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A fresh topic name for the test."""
    return unique_name(request.node.name.split("[")[0].removeprefix("test_")[:30])


def unique_name(prefix: str) -> str:
    return f"{prefix.replace('_', '-')}-{uuid.uuid4().hex[:8]}"


def require_tool(*names: str) -> None:
    """Fail (not skip) when a client the suite must cover is not installed."""
    missing = [n for n in names if shutil.which(n) is None]
    if missing:
        pytest.fail(f"{', '.join(missing)} not installed: run "
                    f"`python -m moldau.testing.install_clients` (make test does)")
