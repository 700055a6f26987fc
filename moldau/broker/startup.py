"""Opening and closing a node's state: log dirs, metadata log, partitions (provisional)."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from .metadata.controller import Controller

if TYPE_CHECKING:
    from .server import Broker


class _MemoryStore:
    def __init__(self) -> None:
        self.records: list = []

    def append(self, records):  # type: ignore[no-untyped-def]
        self.records.extend(records)
        return len(self.records) - 1


async def open_node(broker: Broker) -> None:
    broker.cluster_id = broker.cluster_id or uuid.uuid4().hex[:22]
    broker.controller = Controller(
        broker.image, _MemoryStore(),
        default_partitions=lambda: broker.config["num.partitions"],
        default_replication_factor=lambda: broker.config["default.replication.factor"],
    )


async def close_node(broker: Broker) -> None:
    return None
