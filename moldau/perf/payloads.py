"""Record payloads for the perf tools, built before the clock starts.

Every payload in a pool is distinct random bytes (so batches do not compress to nothing and a
broker cannot deduplicate them); workers draw from their own pools, seeded by worker id.
"""

from __future__ import annotations

import random
import struct
from pathlib import Path

_TS = struct.Struct(">q")


def random_payloads(size: int, count: int, seed: int) -> list[bytes]:
    """``count`` distinct payloads of ``size`` random bytes."""
    rng = random.Random(seed)
    block = rng.randbytes(size * count + 8)
    # Overlapping windows of one random block are distinct and cheap to build.
    step = size if size else 1
    return [block[i * step : i * step + size] for i in range(count)]


def file_payloads(path: str | Path, delimiter: str = "\n") -> list[bytes]:
    """Payloads read from a file, split at ``delimiter`` (kafka-producer-perf-test's
    ``--payload-file`` / ``--payload-delimiter``); empty pieces are dropped."""
    data = Path(path).read_bytes()
    pieces = [p for p in data.split(delimiter.encode()) if p]
    if not pieces:
        raise ValueError(f"payload file {path} holds no payloads (delimiter {delimiter!r})")
    return pieces


def stamp(payload: bytes, now_ns: int) -> bytes:
    """``payload`` with its first 8 bytes replaced by a monotonic timestamp (end-to-end tests)."""
    return _TS.pack(now_ns) + payload[8:]


def stamp_of(value: bytes) -> int:
    """The timestamp :func:`stamp` wrote."""
    return _TS.unpack_from(value)[0]
