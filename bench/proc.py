"""CPU time and memory of a process from /proc (Linux), sampled in the background."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

_TICK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` (all its threads) so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def rss_bytes(pid: int) -> int:
    """Resident set size of ``pid`` in bytes."""
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * _PAGE


@dataclass
class Usage:
    """CPU and memory of a process over a measured interval."""

    cpu_s: float
    wall_s: float
    rss_start: int
    rss_peak: int
    rss_end: int

    @property
    def cpu_util(self) -> float:
        """Fraction of one core the process used."""
        return self.cpu_s / self.wall_s if self.wall_s else 0.0

    def to_json(self) -> dict[str, float]:
        return {"cpu_s": round(self.cpu_s, 3), "wall_s": round(self.wall_s, 3),
                "cpu_util": round(self.cpu_util, 3),
                "rss_start_mb": round(self.rss_start / 2**20, 1),
                "rss_peak_mb": round(self.rss_peak / 2**20, 1),
                "rss_end_mb": round(self.rss_end / 2**20, 1)}


class Sampler:
    """Measures a process while a ``with`` block runs: CPU delta, RSS peak (every 100 ms)."""

    def __init__(self, pid: int, period_s: float = 0.1) -> None:
        self.pid = pid
        self.period = period_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._peak = 0
        self.usage: Usage | None = None

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            try:
                self._peak = max(self._peak, rss_bytes(self.pid))
            except OSError:
                return

    def __enter__(self) -> Sampler:
        self._cpu0 = cpu_seconds(self.pid)
        self._t0 = time.monotonic()
        self._rss0 = rss_bytes(self.pid)
        self._peak = self._rss0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        try:
            cpu, rss = cpu_seconds(self.pid), rss_bytes(self.pid)
        except OSError:
            cpu, rss = self._cpu0, 0
        self.usage = Usage(cpu - self._cpu0, time.monotonic() - self._t0, self._rss0,
                           max(self._peak, rss), rss)
