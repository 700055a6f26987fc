"""Latency histogram with ~0.2 % resolution, cheap enough to record every record.

Values are microseconds. Below 1,024 µs every value has its own bucket; above, a bucket spans
1/512 of its magnitude (log-linear, like HdrHistogram with 3 significant digits), so a minute
of latencies fits in ~17,000 counters. Histograms from several worker processes merge by
adding counters.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

_EXACT = 1024
_SUB = 512


def bucket_of(us: int) -> int:
    """Bucket index of a latency in microseconds (negative values count as 0)."""
    if us < _EXACT:
        return us if us > 0 else 0
    e = us.bit_length() - 10
    return e * _SUB + (us >> e)


def bucket_value(index: int) -> float:
    """Representative (mid-point) value in microseconds of bucket ``index``."""
    if index < _EXACT:
        return float(index)
    e = index // _SUB - 1
    m = index - e * _SUB
    return (m << e) + (1 << e) / 2


@dataclass
class LatencyHistogram:
    """Counts of latencies (µs) with count, sum and max kept exactly."""

    counts: list[int] = field(default_factory=list)
    count: int = 0
    total_us: int = 0
    max_us: int = 0

    def record(self, us: int) -> None:
        idx = bucket_of(us)
        counts = self.counts
        if idx >= len(counts):
            counts.extend([0] * (idx + 1 - len(counts)))
        counts[idx] += 1
        self.count += 1
        self.total_us += us
        if us > self.max_us:
            self.max_us = us

    def record_many(self, values_us: Iterable[int]) -> None:
        for us in values_us:
            self.record(us)

    def merge(self, other: LatencyHistogram) -> None:
        if len(other.counts) > len(self.counts):
            self.counts.extend([0] * (len(other.counts) - len(self.counts)))
        for i, c in enumerate(other.counts):
            if c:
                self.counts[i] += c
        self.count += other.count
        self.total_us += other.total_us
        self.max_us = max(self.max_us, other.max_us)

    @property
    def avg_ms(self) -> float:
        return self.total_us / self.count / 1000 if self.count else 0.0

    @property
    def max_ms(self) -> float:
        return self.max_us / 1000

    def percentile_ms(self, p: float) -> float:
        """The ``p``-th percentile (0-100) in milliseconds (0 when empty)."""
        if not self.count:
            return 0.0
        rank = max(1, int(p / 100 * self.count + 0.999999))
        seen = 0
        for i, c in enumerate(self.counts):
            seen += c
            if seen >= rank:
                return min(bucket_value(i), self.max_us) / 1000
        return self.max_us / 1000

    def to_dict(self) -> dict[str, object]:
        """Compact form for passing between processes (sparse counts)."""
        return {"counts": {i: c for i, c in enumerate(self.counts) if c},
                "count": self.count, "total_us": self.total_us, "max_us": self.max_us}

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> LatencyHistogram:
        sparse: dict[int, int] = {int(k): int(v) for k, v in data["counts"].items()}  # type: ignore[attr-defined]
        counts = [0] * (max(sparse) + 1 if sparse else 0)
        for i, c in sparse.items():
            counts[i] = c
        return cls(counts, int(data["count"]), int(data["total_us"]),  # type: ignore[arg-type]
                   int(data["max_us"]))  # type: ignore[arg-type]
