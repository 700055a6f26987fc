"""Helpers shared by the perf tools' worker-process orchestration."""

from __future__ import annotations

import queue
import time
from collections.abc import Callable
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


def gather_results(procs: list[Any], results: Any, interval_s: float, what: str,
                   tick: Callable[[], None] | None = None) -> list[dict[str, Any]]:
    """The result every worker puts on ``results``, calling ``tick()`` every ``interval_s``
    while some are outstanding; raises when a worker (a ``what``) died without reporting."""
    gathered: list[dict[str, Any]] = []
    while len(gathered) < len(procs):
        try:
            gathered.append(results.get(timeout=interval_s))
            continue
        except queue.Empty:
            pass
        dead = [p for p in procs if p.exitcode not in (None, 0)]
        if dead and results.empty():
            raise RuntimeError(f"{what} exited with code {dead[0].exitcode}")
        if tick is not None:
            tick()
    return gathered


def join_workers(procs: list[Any], timeout_s: float) -> None:
    """Wait up to ``timeout_s`` for each worker to exit; kill those that do not."""
    for p in procs:
        p.join(timeout_s)
        if p.is_alive():
            p.kill()
