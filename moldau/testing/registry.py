"""A broker subprocess with its in-process schema registry, for tests of registry clients.

``moldau serve`` runs a registry when ``schema.registry.listeners`` is set; on port 0 the OS
picks a free port, which the registry names in its "schema registry ready on URL" log line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .runner import BrokerProcess

REGISTRY_READY = re.compile(r"schema registry ready on (http://\S+?)[,\s]")


class RegistryBrokerProcess(BrokerProcess):
    """:class:`BrokerProcess` with ``schema.registry.listeners=http://127.0.0.1:0``;
    :attr:`registry_url` is where the registry answers once :meth:`start` returned."""

    def __init__(self, data_dir: Any = None, settings: Mapping[str, Any] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(data_dir, {"schema.registry.listeners": "http://127.0.0.1:0",
                                    **(settings or {})}, **kwargs)
        self.registry_url = ""

    def start(self, timeout: float = 30.0, *, extra_args: list[str] | None = None
              ) -> RegistryBrokerProcess:
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        super().start(timeout, extra_args=extra_args)
        self.registry_url = self.wait_for_log(REGISTRY_READY, offset, timeout,
                                              "the schema registry").group(1)
        return self

    def __enter__(self) -> RegistryBrokerProcess:
        return self.start()
