"""Progress reporting: a one-line bar on a terminal, Kafka-style interval lines otherwise."""

from __future__ import annotations

import shutil
import sys
from typing import TextIO


class ProgressBar:
    """Redraws one line on ``stream`` (a terminal): bar, percentage, rate, ETA."""

    def __init__(self, total: int, unit: str = "records", stream: TextIO | None = None) -> None:
        self.total = max(total, 1)
        self.unit = unit
        self.stream = stream or sys.stderr
        self._drawn = False

    def update(self, done: int, rate: float, mb_per_s: float) -> None:
        width = shutil.get_terminal_size((80, 20)).columns
        frac = min(done / self.total, 1.0)
        eta = (self.total - done) / rate if rate > 0 and done < self.total else 0.0
        tail = (f" {frac * 100:5.1f}% {done:,}/{self.total:,} {self.unit} "
                f"{rate:,.0f}/s {mb_per_s:.2f} MB/s ETA {eta:4.0f}s")
        bar_width = max(10, width - len(tail) - 3)
        filled = int(bar_width * frac)
        line = "[" + "#" * filled + "." * (bar_width - filled) + "]" + tail
        self.stream.write("\r" + line[: width - 1])
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()


def use_bar(stream: TextIO) -> bool:
    """A bar only makes sense on an interactive terminal."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
