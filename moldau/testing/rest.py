"""A broker subprocess with its in-process REST Proxy, for tests that speak HTTP to it.

``moldau serve`` runs a REST Proxy when ``rest.proxy.listeners`` is set; on port 0 the OS
picks a free port, which the proxy names in its "rest proxy ready on URL" log line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .registry import REGISTRY_READY
from .runner import BrokerProcess

_READY = re.compile(r"rest proxy ready on (http://\S+?)[,\s]")


class RestBrokerProcess(BrokerProcess):
    """:class:`BrokerProcess` with ``rest.proxy.listeners=http://127.0.0.1:0``;
    :attr:`rest_url` is where the proxy answers once :meth:`start` returned."""

    def __init__(self, data_dir: Any = None, settings: Mapping[str, Any] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(data_dir, {"rest.proxy.listeners": "http://127.0.0.1:0",
                                    **(settings or {})}, **kwargs)
        self.rest_url = ""

    def start(self, timeout: float = 30.0, *, extra_args: list[str] | None = None
              ) -> RestBrokerProcess:
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        super().start(timeout, extra_args=extra_args)
        self.rest_url = self.wait_for_log(_READY, offset, timeout, "the REST proxy").group(1)
        return self

    def __enter__(self) -> RestBrokerProcess:
        return self.start()


class PlatformBrokerProcess(RestBrokerProcess):
    """``make run``'s set: a broker with its in-process schema registry and REST Proxy
    (:attr:`registry_url`, :attr:`rest_url`)."""

    def __init__(self, data_dir: Any = None, settings: Mapping[str, Any] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(data_dir, {"schema.registry.listeners": "http://127.0.0.1:0",
                                    **(settings or {})}, **kwargs)
        self.registry_url = ""

    def start(self, timeout: float = 30.0, *, extra_args: list[str] | None = None
              ) -> PlatformBrokerProcess:
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        super().start(timeout, extra_args=extra_args)
        self.registry_url = self.wait_for_log(REGISTRY_READY, offset, timeout,
                                              "the schema registry").group(1)
        return self
