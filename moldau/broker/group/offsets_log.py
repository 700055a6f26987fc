"""The persistence seam of the group coordinator: appending to and reading back
``__consumer_offsets``.

The coordinator builds record batches itself (Kafka's key/value layout, see :mod:`.records`) and
hands them to an :class:`OffsetsLog`. In the broker the log is the partition layer (the adapter
lives in :mod:`.partition_log`); unit tests use :class:`MemoryOffsetsLog`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol

from ...protocol.records.batch import read_header
from ...protocol.records.codec import Header, build_batch


class OffsetsLogError(Exception):
    """An append to ``__consumer_offsets`` failed; carries the Kafka error to report."""

    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(message or f"append failed with error {code}")
        self.code = code


class OffsetsLog(Protocol):
    """What the coordinator needs from the partitions of ``__consumer_offsets``."""

    async def append(self, partition: int, batch: bytes) -> int:
        """Append one record batch as leader; return its base offset.

        Must complete only once the batch is as durable as an acks=all produce would make it
        (committed to the ISR). Raises :class:`OffsetsLogError` on failure.
        """
        ...

    def read_batches(self, partition: int) -> Iterator[bytes]:
        """Every batch of ``partition`` from the log start, each as its exact bytes."""
        ...


def records_batch(
    records: Iterable[tuple[bytes, bytes | None]], timestamp_ms: int
) -> bytes:
    """A RecordBatch v2 of ``(key, value)`` records (value None = tombstone), uncompressed."""
    no_headers: list[Header] = []
    return build_batch((key, value, no_headers, timestamp_ms) for key, value in records)


class MemoryOffsetsLog:
    """An in-memory :class:`OffsetsLog` (tests, and brokers without a partition layer)."""

    def __init__(self) -> None:
        self.partitions: dict[int, list[bytes]] = {}
        self.next_offset: dict[int, int] = {}
        self.fail_with: int | None = None

    async def append(self, partition: int, batch: bytes) -> int:
        if self.fail_with is not None:
            raise OffsetsLogError(self.fail_with, "injected failure")
        base = self.next_offset.get(partition, 0)
        header = read_header(batch, 0)
        # Patch the base offset in place as the log would (bytes 0-7 are not under the CRC).
        patched = base.to_bytes(8, "big", signed=True) + batch[8:]
        self.partitions.setdefault(partition, []).append(patched)
        self.next_offset[partition] = base + header.record_count
        return base

    def read_batches(self, partition: int) -> Iterator[bytes]:
        yield from self.partitions.get(partition, [])

