"""A metadata store kept in memory, for tests that drive a controller without a log dir."""

from __future__ import annotations

from collections.abc import Sequence

from ..broker.metadata.records import MetadataRecord


class ListStore:
    """A :class:`~moldau.broker.metadata.controller.MetadataStore` that keeps its records in a
    list (``records``): nothing is durable, every append succeeds."""

    def __init__(self) -> None:
        self.records: list[MetadataRecord] = []

    async def append(self, records: Sequence[MetadataRecord]) -> int:
        self.records.extend(records)
        return len(self.records) - 1
