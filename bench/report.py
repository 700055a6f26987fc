"""Markdown tables from a suite result, and the issue-5 targets checked against them."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

BEGIN = "<!-- bench:begin (written by python -m bench.run --update-docs) -->"
END = "<!-- bench:end -->"


def _get(d: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(d, dict) or key not in d:
            return None
        d = d[key]
    return d


def _rate(r: Any) -> str:
    if not isinstance(r, dict):
        return "-"
    if "error" in r:
        return "failed: " + str(r["error"])[:60]
    return f"{r['records_per_s']:,.0f} ({r['mb_per_s']:.1f} MB/s)"


def brief(workload: str, r: Any) -> str:
    """One line for the progress log."""
    if not isinstance(r, dict):
        return str(r)
    if "error" in r:
        return f"FAILED {r['error']}"
    if workload in ("W4", "W5"):
        e = r["end_to_end_ms"]
        return (f"{r['achieved_rate']:,.0f} msg/s, e2e p50 {e['p50']} p99 {e['p99']} "
                f"p99.9 {e['p99.9']} ms, publish p99 {r['publish_ms']['p99']} ms")
    if workload == "W6":
        return ", ".join(f"{p} partitions: {_rate(v)}" for p, v in r.items())
    extra = f", broker {r['broker_cpu_s_per_gb']} CPU-s/GB" if "broker_cpu_s_per_gb" in r else ""
    return _rate(r) + extra


def _ms(r: Any, *path: str) -> str:
    v = _get(r, *path)
    return "-" if v is None else f"{v:.2f}"


ROWS: list[tuple[str, str, Callable[[dict[str, Any]], str]]] = [
    ("W1 produce 100 B, 6 partitions, acks=1", "records/s (MB/s)",
     lambda b: _rate(b.get("W1"))),
    ("", "producer latency p50 / p99 ms",
     lambda b: f"{_ms(b, 'W1', 'latency_ms', 'p50')} / {_ms(b, 'W1', 'latency_ms', 'p99')}"),
    ("", "broker CPU-s per GB ingested",
     lambda b: _num(_get(b, "W1", "broker_cpu_s_per_gb"))),
    ("", "CPU use: broker / all client processes", lambda b: _cpu(b.get("W1"))),
    ("W2 produce 1 KiB, 6 partitions, acks=all", "records/s (MB/s)",
     lambda b: _rate(b.get("W2"))),
    ("", "broker CPU-s per GB ingested",
     lambda b: _num(_get(b, "W2", "broker_cpu_s_per_gb"))),
    ("", "CPU use: broker / all client processes", lambda b: _cpu(b.get("W2"))),
    ("W3 consume 2,000,000 x 100 B", "records/s (MB/s)", lambda b: _rate(b.get("W3"))),
    ("", "CPU use: broker / all client processes", lambda b: _cpu(b.get("W3"))),
    ("W4 end-to-end, 10,000 msg/s x 1 KiB", "p50 / p99 / p99.9 ms",
     lambda b: " / ".join(_ms(b, "W4", "end_to_end_ms", p) for p in ("p50", "p99", "p99.9"))),
    ("", "CPU use: broker / all client processes", lambda b: _cpu(b.get("W4"))),
    ("W5 OMB 1 topic x 100 partitions, 1 KiB, acks=all, 50,000 msg/s", "achieved msg/s",
     lambda b: f"{_get(b, 'W5', 'achieved_rate') or 0:,.0f}" if "W5" in b else "-"),
    ("", "publish p50 / p99 ms",
     lambda b: f"{_ms(b, 'W5', 'publish_ms', 'p50')} / {_ms(b, 'W5', 'publish_ms', 'p99')}"),
    ("", "end-to-end p50 / p99 ms",
     lambda b: f"{_ms(b, 'W5', 'end_to_end_ms', 'p50')} / "
               f"{_ms(b, 'W5', 'end_to_end_ms', 'p99')}"),
    ("", "CPU use: broker / all client processes", lambda b: _cpu(b.get("W5"))),
    ("W6 = W1 with 1 partition", "records/s, % of W1 (CPU broker / clients)",
     lambda b: _w6(b, "1")),
    ("W6 = W1 with 100 partitions", "records/s, % of W1 (CPU broker / clients)",
     lambda b: _w6(b, "100")),
    ("W6 = W1 with 1,000 partitions", "records/s, % of W1 (CPU broker / clients)",
     lambda b: _w6(b, "1000")),
    ("1,000 idle connections", "broker RSS before → with (MB)",
     lambda b: f"{_num(_get(b, 'idle', 'rss_before_mb'), 0)} → "
               f"{_num(_get(b, 'idle', 'rss_with_mb'), 0)}"
     if "idle" in b else "-"),
    ("Start (empty broker, to first ApiVersions)", "seconds",
     lambda b: _num(b.get("start_s"))),
]


def _num(v: Any, digits: int = 2) -> str:
    return f"{v:,.{digits}f}" if isinstance(v, (int, float)) else "-"


def _cpu(r: Any) -> str:
    """Broker and client CPU over the run, as shares of one core."""
    if not isinstance(r, dict) or "broker" not in r:
        return "-"
    wall = r["broker"]["wall_s"] or 1
    client = r.get("client_cpu_s")
    client_s = f"{client / wall * 100:.0f}%" if client is not None else "-"
    return f"{r['broker']['cpu_util'] * 100:.0f}% / {client_s}"


def _w6(b: dict[str, Any], parts: str) -> str:
    r = _get(b, "W6", parts)
    base = _get(b, "W1", "records_per_s")
    if not isinstance(r, dict) or "error" in r:
        return _rate(r)
    share = f", {r['records_per_s'] / base * 100:.0f}%" if base else ""
    return f"{r['records_per_s']:,.0f}{share} (CPU {_cpu(r)})"


def markdown(result: dict[str, Any]) -> str:
    brokers = list(result["brokers"])
    m = result["machine"]
    lines = [
        f"Run {result['date']} (`{result['command']}`, {result['duration_s']:.0f} s): "
        f"{m['cpus']} x {m['cpu_model']}, {m['memory_gb']} GiB, Linux {m['kernel']}, "
        f"Python {m['python']}, librdkafka {m['librdkafka']}; load average at start "
        f"{', '.join(f'{x:.1f}' for x in m['load_average_at_start'])}.",
        f"CPU split: {_split(result)}."
        + (f" Figures are medians of {result['repeat']} passes (the brokers take turns; each "
           f"pass is in the JSON)." if result.get("repeat", 1) > 1 else ""),
        "",
        "| Workload | Metric | " + " | ".join(brokers) + " |",
        "|---|---|" + "---|" * len(brokers),
    ]
    for label, metric, fn in ROWS:
        cells = []
        for name in brokers:
            b = result["brokers"][name]
            try:
                cells.append(fn(b) if "error" not in b else "failed")
            except (KeyError, TypeError, ZeroDivisionError):
                cells.append("-")
        if all(c in ("-", "- / -", "- / - / -", "None → None", "- (-)") for c in cells):
            continue
        lines.append(f"| {label} | {metric} | " + " | ".join(cells) + " |")
    base = result.get("baseline")
    if base:
        lines += ["", "Loopback baseline (raw sockets, same run): "
                  + "; ".join(f"{k}: one stream {v['stream']['mb_per_s']:,.0f} MB/s, "
                              f"1 KiB round trip p50 {v['ping_pong_1k']['rtt_ms']['p50']} / "
                              f"p99 {v['ping_pong_1k']['rtt_ms']['p99']} / "
                              f"p99.9 {v['ping_pong_1k']['rtt_ms']['p99.9']} ms"
                              for k, v in base.items()) + "."]
    rs = result.get("restart")
    if rs and "error" not in rs:
        lines += ["", f"Restart (moldau, {rs['log_gb']} GB of log written at "
                      f"{rs['fill']['mb_per_s']} MB/s by a raw 1 MiB-batch producer): "
                      f"after kill -9 {rs['restart_after_kill9_s']} s, clean shutdown "
                      f"{rs['shutdown_s']} s, restart after clean shutdown "
                      f"{rs['restart_clean_s']} s; log end offsets intact: "
                      f"{rs['offsets_intact']}."]
    elif rs:
        lines += ["", f"Restart test failed: {rs['error']}"]
    targets = check_targets(result)
    if targets:
        lines += ["", "| Target (issue 5) | Measured | Met |", "|---|---|---|"]
        lines += [f"| {t} | {v} | {_verdict(ok, v)} |" for t, v, ok in targets]
    return "\n".join(lines) + "\n"


def _verdict(ok: bool, measured: str) -> str:
    if ok:
        return "yes"
    share = re.search(r"\((\d+)%\)$", measured)  # "mine vs peer (NN%)"
    if share and int(share.group(1)) >= 99:
        return "no (within 1%: a tie within run-to-run noise)"
    return "no"


def _split(result: dict[str, Any]) -> str:
    split = result.get("cpu_split")
    if not isinstance(split, dict):
        return "none (brokers and clients share both cores)"
    return (f"broker pinned to CPU {split['broker']}, all client processes to CPU "
            f"{','.join(map(str, split['clients']))} (taskset), for every broker; W4/W5 "
            f"{split['latency_workloads']}")


def check_targets(result: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """Issue 5's targets as (target, measured, met) rows (only those this run measured)."""
    b = result["brokers"]
    mo = b.get("moldau", {})
    peers = {k: v for k, v in b.items() if k != "moldau" and "error" not in v}
    out: list[tuple[str, str, bool]] = []

    def best_peer(path: tuple[str, ...], higher: bool) -> tuple[str, float] | None:
        vals = [(k, _get(v, *path)) for k, v in peers.items()]
        vals = [(k, x) for k, x in vals if isinstance(x, (int, float))]
        if not vals:
            return None
        return (max if higher else min)(vals, key=lambda kv: kv[1])

    for label, path in [("W1", ("W1", "records_per_s")), ("W2", ("W2", "records_per_s")),
                        ("W3", ("W3", "records_per_s")), ("W5 rate", ("W5", "achieved_rate")),
                        ("W6 1", ("W6", "1", "records_per_s")),
                        ("W6 100", ("W6", "100", "records_per_s")),
                        ("W6 1000", ("W6", "1000", "records_per_s"))]:
        mine = _get(mo, *path)
        peer = best_peer(path, True)
        if isinstance(mine, (int, float)) and peer:
            bar = peer[1]
            target = _get(mo, "W5", "target_rate") if label == "W5 rate" else None
            if target:  # a fixed-rate workload: reaching the target is the best there is
                bar = min(bar, target) * 0.999
            out.append((f"{label}: moldau ≥ best peer", f"{mine:,.0f} vs {peer[0]} "
                        f"{peer[1]:,.0f} ({mine / peer[1] * 100:.0f}%)", mine >= bar))
    for label, path in [("W4 p99", ("W4", "end_to_end_ms", "p99")),
                        ("W4 p99.9", ("W4", "end_to_end_ms", "p99.9")),
                        ("W5 publish p99", ("W5", "publish_ms", "p99")),
                        ("W5 end-to-end p99", ("W5", "end_to_end_ms", "p99"))]:
        mine = _get(mo, *path)
        peer = best_peer(path, False)
        if isinstance(mine, (int, float)) and peer:
            out.append((f"{label}: moldau ≤ best peer", f"{mine:.2f} ms vs {peer[0]} "
                        f"{peer[1]:.2f} ms", mine <= peer[1]))
    p99 = _get(mo, "W4", "end_to_end_ms", "p99")
    if isinstance(p99, (int, float)):
        out.append(("W4 p99 ≤ 5 ms", f"{p99:.2f} ms", p99 <= 5))
    w2 = _get(mo, "W2", "broker_cpu_s_per_gb")
    if isinstance(w2, (int, float)):
        out.append(("W2 ≤ 1.5 broker CPU-s per GB", f"{w2:.2f}", w2 <= 1.5))
    w1 = _get(mo, "W1", "records_per_s")
    w6 = _get(mo, "W6", "1000", "records_per_s")
    if isinstance(w1, (int, float)) and isinstance(w6, (int, float)) and w1:
        out.append(("W6: 1,000 partitions ≥ 70% of 6-partition throughput",
                    f"{w6 / w1 * 100:.0f}%", w6 / w1 >= 0.7))
    delta = _get(mo, "idle", "rss_delta_mb")
    if isinstance(delta, (int, float)):
        out.append(("1,000 idle connections < 200 MB RSS",
                    f"+{delta:.0f} MB (total {_num(_get(mo, 'idle', 'rss_with_mb'), 0)} MB)",
                    delta < 200))
    rs = result.get("restart")
    if isinstance(rs, dict) and "restart_clean_s" in rs:
        out.append((f"restart after clean shutdown with {rs['log_gb']} GB < 3 s",
                    f"{rs['restart_clean_s']} s", rs["restart_clean_s"] < 3))
    return out


def update_docs(table: str, path: Path) -> None:
    """Replace the generated block in docs/benchmarks.md (inserted under the broker
    comparison heading the first time)."""
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    block = f"{BEGIN}\n{table}{END}"
    if BEGIN in text:
        text = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: block, text,
                      flags=re.S)
    else:
        heading = "## Broker comparison (issue 5)"
        if heading in text:
            text = text.replace(heading, f"{heading}\n\n{block}\n", 1)
        else:
            text += f"\n{heading}\n\n{block}\n"
    path.write_text(text)


def main() -> None:
    """``python -m bench.report RESULT.json [--update-docs]``: the table from a saved run."""
    import argparse
    import json

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("result", help="bench/results/suite-<time>.json")
    parser.add_argument("--update-docs", action="store_true")
    args = parser.parse_args()
    table = markdown(json.loads(Path(args.result).read_text()))
    print(table)
    if args.update_docs:
        update_docs(table, Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md")


if __name__ == "__main__":
    main()
