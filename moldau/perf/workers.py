"""Helpers shared by the perf tools' worker-process orchestration."""

from __future__ import annotations

import queue
import time
from typing import Any


def split(total: int, parts: int) -> list[int]:
    """``total`` divided into ``parts`` near-equal integers."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def wait_ready(procs: list[Any], ready: Any, timeout_s: float) -> None:
    """Wait until every worker connected; raise with the workers' complaints otherwise."""
    deadline = time.monotonic() + timeout_s
    problems: list[str] = []
    waiting = len(procs)
    while waiting:
        try:
            wid, problem = ready.get(timeout=0.2)
        except queue.Empty:
            dead = [p for p in procs if p.exitcode is not None]
            if dead:
                raise RuntimeError(f"a perf worker exited (code {dead[0].exitcode}) before "
                                   "it was ready") from None
            if time.monotonic() > deadline:
                raise RuntimeError("perf workers did not connect in time") from None
            continue
        waiting -= 1
        if problem:
            problems.append(f"worker {wid}: {problem}")
    if problems:
        raise RuntimeError("; ".join(problems))
