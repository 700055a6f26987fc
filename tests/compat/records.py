"""Test data and checks shared by the client modules: the records each client produces, the
comparison of what came back, and a look at the batches the broker stored."""

from __future__ import annotations

import random
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from moldau.protocol.records.batch import BatchHeader, iter_batches
from moldau.protocol.records.codec import iter_decoded

N_RECORDS = 10_000
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

Headers = list[tuple[str, bytes]]


@dataclass(frozen=True)
class Rec:
    """A record as produced or as read back (offset -1 when not known yet)."""

    key: bytes | None
    value: bytes | None
    headers: Headers = field(default_factory=list)
    timestamp: int = -1
    offset: int = -1


def now_ms() -> int:
    return int(time.time() * 1000)


def make_records(tag: str, n: int = N_RECORDS, *, base_ts: int | None = None,
                 headers: bool = True, binary: bool = True) -> list[Rec]:
    """``n`` deterministic records for ``tag``: keys (some null), values of mixed size and
    compressibility (some empty, some null), headers (none, several, repeated names, empty
    values), timestamps ``base_ts + i`` (when given) so ListOffsets by time has exact answers.

    ``binary=False`` keeps keys and values to printable UTF-8 without tabs or newlines (for
    kcat's delimited input) and never null.
    """
    rng = random.Random(f"moldau-compat-{tag}")
    out = []
    for i in range(n):
        if binary:
            # null keys and null values, but never both (clients refuse that)
            key = None if i % 97 == 0 and i % 499 else f"k{i:05d}-".encode() + rng.randbytes(
                i % 5)
            if i % 499 == 0:
                value: bytes | None = None
            elif i % 251 == 0:
                value = b""
            else:
                value = (f"{tag} value {i} ".encode() * (i % 9)) + rng.randbytes(i % 64)
        else:
            key = f"k{i:05d}-{tag}".encode()
            value = (f"{tag} valeur {i} é ✓ ".encode() * (1 + i % 9)
                     + rng.randbytes(i % 32).hex().encode())
        hdrs: Headers = []
        if headers:
            if i % 3 == 1:
                hdrs = [("trace", rng.randbytes(8)), ("idx", str(i).encode())]
            elif i % 3 == 2:
                hdrs = [("dup", b"a"), ("dup", b"b"), ("empty", b"")]
        ts = base_ts + i if base_ts is not None else -1
        out.append(Rec(key, value, hdrs, ts))
    return out


# Produce cases of the clients that can switch idempotence: every codec with it off and on.
IDEMPOTENCE_CASES = [(codec, idem) for idem in (False, True) for codec in CODECS]


def case_id(case: tuple[str, bool]) -> str:
    """Test id of a (codec, idempotent) case, e.g. ``gzip-idempotence-on``."""
    return f"{case[0]}-idempotence-{'on' if case[1] else 'off'}"


@dataclass
class Produced:
    """What a client module's ``produced`` fixture wrote, and the offsets acknowledged."""

    topic: str
    codec: str
    idempotent: bool
    base_ts: int
    records: list[Rec]
    offsets: list[int]


def records_to_produce(topic: str) -> tuple[int, list[Rec]]:
    """(base timestamp, records) of a ``produced`` fixture: N_RECORDS records for ``topic``
    stamped one millisecond apart from an hour ago."""
    base_ts = now_ms() - 3_600_000
    return base_ts, make_records(topic[:12], base_ts=base_ts)


def first_mismatch(got: Sequence[Rec], expected: Sequence[Rec], *,
                   check_timestamps: bool = True, first_offset: int = 0) -> str | None:
    """None when ``got`` is ``expected`` (byte-exact, in order, offsets contiguous from
    ``first_offset``), else a description of the first difference."""
    if len(got) != len(expected):
        return f"got {len(got)} records, expected {len(expected)}"
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        if g.offset != first_offset + i:
            return f"record {i}: offset {g.offset}, expected {first_offset + i}"
        for name in ("key", "value", "headers"):
            if getattr(g, name) != getattr(e, name):
                return (f"record {i} (offset {g.offset}): {name} {getattr(g, name)!r}, "
                        f"expected {getattr(e, name)!r}")
        if check_timestamps and e.timestamp >= 0 and g.timestamp != e.timestamp:
            return f"record {i}: timestamp {g.timestamp}, expected {e.timestamp}"
    return None


def stored_batches(log_dir: Path | None, topic: str, partition: int = 0) -> list[BatchHeader]:
    """Headers of every batch stored for the partition, read from the broker's segment files
    ([] when the endpoint exposes no log dir)."""
    if log_dir is None:
        return []
    out = []
    for segment in sorted((log_dir / f"{topic}-{partition}").glob("*.log")):
        data = segment.read_bytes()
        out.extend(header for _, header in iter_batches(data))
    return out


def stored_records(log_dir: Path | None, topic: str, partition: int = 0) -> list[Rec] | None:
    """The partition's records decoded from the segment files with Moldau's own codecs (CRC
    checked): proves that what a client's compression plugin wrote is standard Kafka."""
    if log_dir is None:
        return None
    out = []
    for segment in sorted((log_dir / f"{topic}-{partition}").glob("*.log")):
        for batch in iter_decoded(segment.read_bytes()):
            out.extend(Rec(r.key, r.value, list(r.headers), r.timestamp, r.offset)  # type: ignore[arg-type]
                       for r in batch.records)
    return out


def stored_codecs(log_dir: Path | None, topic: str, partition: int = 0) -> set[int] | None:
    """The set of codec ids the partition's batches are stored with (None: no log dir)."""
    if log_dir is None:
        return None
    return {h.compression for h in stored_batches(log_dir, topic, partition)}


def timestamp_cases(base_ts: int, n: int = N_RECORDS) -> Iterable[tuple[int, int | None]]:
    """(timestamp, expected offset) for records stamped ``base_ts + i``; None = past the end."""
    return [(base_ts - 1000, 0), (base_ts, 0), (base_ts + 1, 1), (base_ts + 4321, 4321),
            (base_ts + n - 1, n - 1), (base_ts + n, None)]
