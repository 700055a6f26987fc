"""The controller's operations, asynchronous since the controller may be remote, called from
synchronous tests: each call runs to its end on an event loop of its own."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from moldau.broker.metadata.controller import Controller


class SyncController:
    """A :class:`Controller` whose coroutine methods are called like plain methods."""

    def __init__(self, controller: Controller) -> None:
        self.controller = controller

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.controller, name)
        if inspect.iscoroutinefunction(attr):
            return lambda *args, **kwargs: asyncio.run(attr(*args, **kwargs))
        return attr
