"""The broker benchmark suite: Moldau, Tansu and noida-db side by side, in one run.

    .venv/bin/python -m bench.run            # everything (< 20 minutes)
    .venv/bin/python -m bench.run --quick    # W1, W3, W4 (< 3 minutes)
    .venv/bin/python -m bench.run --profile  # py-spy profiles of moldau under W1-W4

Each broker is started on a free loopback port, runs every workload in turn and is stopped
before the next one starts; the full suite makes two such passes over the brokers (they take
turns) and the table shows per-figure medians (``--repeat``; every pass is in the JSON).

CPU split (2-core machine): the broker is pinned to CPU 1 and every client process to CPU 0
for the throughput workloads (W1-W3, W6), the same for all brokers; the latency workloads
(W4, W5) run unpinned (see ``--latency-pinned``), because a process pinned to one core of a
shared machine waits for that core's time slice (the loopback baseline shows the effect).
Results go to bench/results/suite-<time>.json and .md; ``--update-docs`` also rewrites the
table in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from . import baseline, idle, pyspy_profile, report, restart
from .brokers import BROKERS, BenchBroker, pin_self, start_broker
from .common import RESULTS
from .workloads import WORKLOADS, Sizes

BROKER_CPU = "1"
CLIENT_CPUS = {0}


def _sizes(quick: bool) -> Sizes:
    if quick:
        return Sizes(w1_records=1_000_000, w4_seconds=8.0)
    return Sizes()


def _affinity(broker: BenchBroker, cpus: set[int] | None) -> None:
    """Move every thread of the broker to ``cpus`` (all CPUs when None)."""
    target = cpus or set(range(os.cpu_count() or 1))
    for task in Path(f"/proc/{broker.pid}/task").iterdir():
        try:
            os.sched_setaffinity(int(task.name), target)
        except OSError:
            pass


def run_broker(name: str, workloads: list[str], sizes: Sizes, args: argparse.Namespace,
               log: Any) -> dict[str, Any]:
    """Start ``name``, run ``workloads`` against it, stop it."""
    out: dict[str, Any] = {}
    broker = start_broker(name, BROKER_CPU if args.pin else None,
                          root=Path(args.workdir) if args.workdir else None)
    out["start_s"] = round(broker.started_in_s, 3)
    try:
        for w in workloads:
            latency = w in ("W4", "W5")
            unpinned = latency and not args.latency_pinned and args.pin
            if unpinned:
                _affinity(broker, None)
                pin_self(set(range(os.cpu_count() or 1)))
            t0 = time.monotonic()
            try:
                out[w] = WORKLOADS[w](broker, sizes)
            except Exception as exc:  # a broker failing a workload is a result, not a crash
                out[w] = {"error": f"{type(exc).__name__}: {exc}"}
                traceback.print_exc()
            finally:
                if unpinned:
                    _affinity(broker, {int(BROKER_CPU)})
                    pin_self(CLIENT_CPUS)
            log(f"  {name} {w}: {report.brief(w, out[w])} ({time.monotonic() - t0:.0f} s)")
        if "idle" in args.extras:
            out["idle"] = idle.idle_connections("127.0.0.1", broker.port, broker.pid,
                                                sizes.idle_connections)
            log(f"  {name} idle: {out['idle']}")
    finally:
        out["shutdown_s"] = round(broker.stop(), 3)
        broker.close()
    return out


def median_of(passes: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-field medians of several passes' results (numbers; nested dicts field by field;
    anything else from the first pass)."""
    first = passes[0]
    out: dict[str, Any] = {}
    for key, value in first.items():
        values = [p.get(key) for p in passes]
        if isinstance(value, dict) and all(isinstance(v, dict) for v in values):
            out[key] = median_of(values)  # type: ignore[arg-type]
        elif (isinstance(value, (int, float)) and not isinstance(value, bool)
              and all(isinstance(v, (int, float)) for v in values)):
            out[key] = statistics.median(values)  # type: ignore[type-var]
        else:
            out[key] = value
    return out


def machine() -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    import confluent_kafka

    return {"cpus": os.cpu_count(), "cpu_model": cpu, "memory_gb": round(mem / 2**30, 1),
            "kernel": platform.release(), "python": platform.python_version(),
            "librdkafka": confluent_kafka.libversion()[0],
            "confluent_kafka": confluent_kafka.version()[0],
            "load_average_at_start": os.getloadavg()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="W1, W3, W4 only (< 3 minutes)")
    parser.add_argument("--repeat", type=int, default=0,
                        help="passes over all brokers; the table shows medians (default: 2 for "
                             "the full suite, 1 for --quick or --workloads)")
    parser.add_argument("--brokers", default=",".join(BROKERS),
                        help="comma-separated subset of moldau,tansu,noida")
    parser.add_argument("--workloads",
                        help="comma-separated subset of W1..W6, idle, restart, baseline")
    parser.add_argument("--no-pin", dest="pin", action="store_false",
                        help="do not pin brokers and clients to separate CPUs")
    parser.add_argument("--latency-pinned", action="store_true",
                        help="keep the CPU pinning for W4/W5 too")
    parser.add_argument("--restart-gb", type=float, default=5.0,
                        help="log size for the restart test (default 5; 0 skips it)")
    parser.add_argument("--profile", action="store_true",
                        help="profile moldau under W1-W4 with py-spy instead of comparing")
    parser.add_argument("--update-docs", action="store_true",
                        help="rewrite the broker comparison table in docs/benchmarks.md")
    parser.add_argument("--workdir", help="where brokers keep their data (default: /tmp)")
    args = parser.parse_args(argv)

    brokers = [b.strip() for b in args.brokers.split(",") if b.strip()]
    extras = {"idle", "restart", "baseline"}
    if args.workloads:
        chosen = [w.strip() for w in args.workloads.split(",") if w.strip()]
        unknown = [w for w in chosen if w.upper() not in WORKLOADS and w.lower() not in extras]
        if unknown:
            parser.error(f"unknown workloads {unknown}; known: {', '.join(WORKLOADS)}, "
                         f"{', '.join(sorted(extras))}")
        workloads = [w.upper() for w in chosen if w.upper() in WORKLOADS]
        args.extras = {w.lower() for w in chosen if w.lower() in extras}
    elif args.quick:
        workloads = ["W1", "W3", "W4"]
        args.extras = {"baseline"}
    else:
        workloads = list(WORKLOADS)
        args.extras = extras
    sizes = _sizes(args.quick)
    if args.pin:
        pin_self(CLIENT_CPUS)
    # A normal installation has compiled bytecode; this sandbox may forbid writing it
    # (PYTHONDONTWRITEBYTECODE), which would make every Moldau start compile from source.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ.setdefault("PYTHONPYCACHEPREFIX", str(RESULTS / ".pycache"))
    RESULTS.mkdir(exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    started = time.monotonic()

    def log(msg: str) -> None:
        print(f"[{time.monotonic() - started:6.0f}s] {msg}", flush=True)

    if args.profile:
        out = pyspy_profile.run(workloads if args.workloads else ["W1", "W2", "W3", "W4"], sizes,
                          BROKER_CPU if args.pin else None, RESULTS / f"profile-{stamp}", log)
        print(json.dumps(out, indent=2))
        return 0

    result: dict[str, Any] = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "command": " ".join(["python -m bench.run", *(argv if argv is not None
                                                       else sys.argv[1:])]),
        "machine": machine(), "quick": args.quick, "pinned": args.pin,
        "cpu_split": ({"broker": BROKER_CPU, "clients": sorted(CLIENT_CPUS),
                       "latency_workloads": "pinned" if args.latency_pinned else "unpinned"}
                      if args.pin else "none"),
        "sizes": sizes.__dict__, "brokers": {},
    }
    if "baseline" in args.extras:
        result["baseline"] = {"pinned": baseline.measure(BROKER_CPU if args.pin else None),
                              "unpinned": baseline.measure(None)}
        log(f"loopback baseline: {result['baseline']}")
    repeat = args.repeat if args.repeat else (1 if args.quick or args.workloads else 2)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in brokers}
    for rep in range(repeat):  # brokers take turns, so drifting machine load hits all alike
        for name in brokers:
            log(f"{name}: starting" + (f" (pass {rep + 1} of {repeat})" if repeat > 1 else ""))
            try:
                runs[name].append(run_broker(name, workloads, sizes, args, log))
            except Exception as exc:
                traceback.print_exc()
                runs[name].append({"error": f"{type(exc).__name__}: {exc}"})
    result["repeat"] = repeat
    result["passes"] = runs
    for name, passes in runs.items():
        good = [p for p in passes if "error" not in p]
        result["brokers"][name] = median_of(good) if good else passes[0]
    if "restart" in args.extras and args.restart_gb > 0 and "moldau" in brokers:
        log(f"moldau: restart with {args.restart_gb:g} GB of log")
        try:
            result["restart"] = restart.measure(BROKER_CPU if args.pin else None,
                                                int(args.restart_gb * 1e9),
                                                Path(args.workdir) if args.workdir else None)
        except Exception as exc:
            traceback.print_exc()
            result["restart"] = {"error": f"{type(exc).__name__}: {exc}"}
        log(f"restart: {result['restart']}")
    result["duration_s"] = round(time.monotonic() - started, 1)
    json_path = RESULTS / f"suite-{stamp}.json"
    json_path.write_text(json.dumps(result, indent=2))
    table = report.markdown(result)
    (RESULTS / f"suite-{stamp}.md").write_text(table)
    print(table)
    log(f"wrote {json_path} and {json_path.with_suffix('.md')}")
    if args.update_docs:
        report.update_docs(table, Path(__file__).resolve().parent.parent / "docs"
                           / "benchmarks.md")
        log("updated docs/benchmarks.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
