"""Where the compatibility tests send their clients: a :class:`KafkaEndpoint`.

By default every test module gets a fresh ``moldau serve`` subprocess on a free port. To run
the same tests through something else (for example ``moldau proxy`` in front of a broker), set
``MOLDAU_COMPAT_ENDPOINT=package.module:factory`` (several, comma-separated, run the suite
once per endpoint; ``direct`` names the default): ``factory(settings)`` is a context manager
that starts a broker with the given extra ``server.properties`` settings, puts whatever it
likes in front, and yields a :class:`KafkaEndpoint` whose ``bootstrap`` is the address clients
use and whose ``brokers`` are the addresses clients should see in metadata.
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from moldau.testing.runner import BrokerProcess

ENV_VAR = "MOLDAU_COMPAT_ENDPOINT"

EndpointFactory = Callable[[Mapping[str, Any]], AbstractContextManager["KafkaEndpoint"]]


@dataclass
class KafkaEndpoint:
    """A Kafka-protocol address the clients under test bootstrap from, and hooks behind it.

    ``brokers`` maps node id to the ``(host, port)`` a client must see in Metadata answers.
    ``broker`` is the ``moldau serve`` process behind the endpoint (None when the factory
    cannot expose one); tests use it to read the log directory. ``restart`` stops the
    broker cleanly and starts it again with the same data and address.
    """

    bootstrap: str
    brokers: dict[int, tuple[str, int]]
    cluster_id: str
    broker: BrokerProcess | None = None
    restart: Callable[[], None] | None = None
    name: str = "direct"
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def log_dir(self) -> Path | None:
        return self.broker.data_dir if self.broker is not None else None


def restart_in_place(broker: BrokerProcess) -> None:
    """SIGTERM the broker and start it again on the same port with the same data."""
    ports = dict(broker.ports)
    broker.stop()
    broker.settings["listeners"] = ",".join(
        f"{name}://127.0.0.1:{port}" for name, port in ports.items())
    broker.start()


@contextlib.contextmanager
def direct_endpoint(settings: Mapping[str, Any]) -> Iterator[KafkaEndpoint]:
    """A fresh ``moldau serve`` subprocess that clients talk to directly."""
    with BrokerProcess(settings=dict(settings)) as broker:
        yield KafkaEndpoint(
            bootstrap=broker.bootstrap,
            brokers={1: ("127.0.0.1", broker.port())},
            cluster_id=broker.cluster_id,
            broker=broker,
            restart=lambda: restart_in_place(broker),
        )


def endpoint_factory(spec: str) -> EndpointFactory:
    """The factory a spec names: ``direct`` or ``package.module:factory``."""
    spec = spec.strip()
    if not spec or spec == "direct":
        return direct_endpoint
    module_name, _, attr = spec.partition(":")
    if not attr:
        raise ValueError(f"{ENV_VAR}: {spec!r} is neither 'direct' nor 'package.module:factory'")
    return getattr(importlib.import_module(module_name), attr)  # type: ignore[no-any-return]


def endpoint_specs() -> list[str]:
    """The endpoints to run the suite against: ``$MOLDAU_COMPAT_ENDPOINT``, comma-separated
    (default ``direct``); every test module runs once per endpoint."""
    specs = [s.strip() for s in os.environ.get(ENV_VAR, "direct").split(",") if s.strip()]
    return specs or ["direct"]
