"""Profile Moldau under the workloads with py-spy (sampling, attached by pid).

For each workload: the folded stacks (``<W>.txt``, input for flamegraph.pl or speedscope)
and the functions with the most samples, excluding idle time in the event loop
(``summary.json``).
py-spy comes from PyPI (``pip install py-spy``); it is installed on first use.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .brokers import start_broker
from .workloads import WORKLOADS, Sizes

# Samples whose innermost frame is the event loop waiting for I/O are idle time.
_IDLE = ("Runner.run (asyncio/runners.py", "run_forever", "select (selectors.py")


def py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(found).exists():
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "py-spy"],
                       check=True)
    return found


def summarize(folded: Path, top: int = 25, idle: tuple[str, ...] = _IDLE) -> dict[str, Any]:
    """Self and inclusive sample shares per function from py-spy's raw (folded) output;
    samples whose innermost frame starts with one of ``idle`` are not counted as busy."""
    self_n: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = busy = 0
    for line in folded.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        n = int(count)
        total += n
        frames = stack.split(";")
        if any(frames[-1].startswith(i) for i in idle):
            continue
        busy += n
        self_n[frames[-1]] += n
        for f in set(frames):
            incl[f] += n

    def share(c: collections.Counter[str]) -> list[tuple[str, float]]:
        return [(f, round(n / busy * 100, 1)) for f, n in c.most_common(top)] if busy else []

    return {"samples": total, "busy_share": round(busy / total, 3) if total else 0,
            "self_pct_of_busy": share(self_n), "inclusive_pct_of_busy": share(incl)}


def run(workloads: list[str], sizes: Sizes, cpus: str | None, out_dir: Path,
        log: Callable[[str], None]) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    spy = py_spy()
    summary: dict[str, Any] = {}
    broker = start_broker("moldau", cpus)
    try:
        for w in workloads:
            raw = out_dir / f"{w}.txt"
            # Unpinned: on the clients' core py-spy would be starved of CPU and drop samples.
            proc = subprocess.Popen(["taskset", "-c", f"0-{(os.cpu_count() or 1) - 1}", spy,
                                     "record", "-p", str(broker.pid), "-o", str(raw),
                                     "-f", "raw", "-r", "250", "--nonblocking"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1.0)
            result = WORKLOADS[w](broker, sizes)
            proc.send_signal(signal.SIGINT)
            proc.wait(60)
            summary[w] = {"result": result, "profile": summarize(raw)}
            log(f"profiled {w}: {raw}")
    finally:
        broker.close()
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary
