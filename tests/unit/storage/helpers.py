"""Shared helpers for storage tests: batch builders, a fake clock, fault-injecting filesystems."""

from __future__ import annotations

import os
import random

from moldau.protocol.records.batch import BatchHeader, iter_batches, validate_batches
from moldau.protocol.records.codec import build_batch, iter_decoded
from moldau.storage import AppendInfo, FileSystem, Log, LogConfig, load_log


class FakeClock:
    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


def make_batch(
    count: int = 1,
    ts: int = 1_000,
    *,
    value_size: int = 20,
    key: bytes | None = None,
    keys: list[bytes | None] | None = None,
    values: list[bytes | None] | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
    ts_step: int = 0,
) -> bytearray:
    """A RecordBatch v2 of ``count`` records, timestamps ``ts, ts+ts_step, ...``."""
    recs = []
    for i in range(count):
        k = keys[i] if keys is not None else key
        v = values[i] if values is not None else bytes([65 + i % 26]) * value_size
        recs.append((k, v, [], ts + i * ts_step))
    return bytearray(
        build_batch(
            recs,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            transactional=transactional,
            control=control,
        )
    )


def control_batch(producer_id: int, epoch: int, commit: bool, coordinator_epoch: int = 0,
                  ts: int = 1_000) -> bytearray:
    key = (0).to_bytes(2, "big") + (1 if commit else 0).to_bytes(2, "big")
    value = (0).to_bytes(2, "big") + coordinator_epoch.to_bytes(4, "big")
    return bytearray(build_batch([(key, value, [], ts)], producer_id=producer_id,
                                 producer_epoch=epoch, transactional=True, control=True))


def append(log: Log, buf: bytearray, epoch: int = 0, **kw: object) -> AppendInfo:
    return log.append(buf, validate_batches(buf), epoch, **kw)  # type: ignore[arg-type]


def headers_of(data: bytes | memoryview) -> list[BatchHeader]:
    return [h for _pos, h in iter_batches(data)]


def records_of(data: bytes | memoryview) -> list[tuple[int, bytes | None, bytes | None, int]]:
    return [(r.offset, r.key, r.value, r.timestamp)
            for b in iter_decoded(bytes(data)) for r in b.records]


def open_log(path: str, clock: FakeClock | None = None, fs: FileSystem | None = None,
             **cfg: object) -> Log:
    props = {k.replace("_", "."): v for k, v in cfg.items()}
    kwargs: dict[str, object] = {"time_ms": clock or FakeClock(), "rng": random.Random(7)}
    if fs is not None:
        kwargs["fs"] = fs
    return load_log(path, LogConfig.from_dict(props), **kwargs)  # type: ignore[arg-type]


def segment_files(path: str, suffix: str = ".log") -> list[str]:
    return sorted(n for n in os.listdir(path) if n.endswith(suffix))


class CountingFS(FileSystem):
    """Counts bytes read through pread (proves what a load did or did not scan)."""

    def __init__(self) -> None:
        self.bytes_read = 0
        self.preads = 0

    def pread(self, fd: int, size: int, offset: int) -> bytes:
        data = super().pread(fd, size, offset)
        self.bytes_read += len(data)
        self.preads += 1
        return data


class FailingFS(FileSystem):
    """Fails writes on demand: ``fail_writes`` raises after writing ``torn_bytes`` bytes."""

    def __init__(self) -> None:
        self.fail_writes = False
        self.torn_bytes = 0
        self.fail_truncate = False
        self.fail_fsync = False

    def pwrite(self, fd: int, data: bytes | bytearray | memoryview, offset: int) -> int:
        if self.fail_writes:
            if self.torn_bytes:
                os.pwrite(fd, memoryview(data)[: self.torn_bytes], offset)
            raise OSError(28, "No space left on device (injected)")
        return super().pwrite(fd, data, offset)

    def ftruncate(self, fd: int, size: int) -> None:
        if self.fail_truncate:
            raise OSError(5, "Input/output error (injected)")
        super().ftruncate(fd, size)

    def fsync(self, fd: int) -> None:
        if self.fail_fsync:
            raise OSError(5, "Input/output error (injected)")
        super().fsync(fd)
