"""Text and JSON renderings of a doctor :class:`~.model.Report`."""

from __future__ import annotations

import json
import textwrap

from .model import Probe, Report, Severity, to_jsonable

WIDTH = 100


def _wrap(text: str, indent: str) -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=indent,
                         break_on_hyphens=False, break_long_words=False) or [indent]


def _bootstrap_line(probe: Probe) -> str:
    if not probe.ok:
        return f"FAILED ({probe.outcome.value}): {probe.detail}"
    who = f"node {probe.answered_node}" if probe.answered_node is not None else "a broker"
    parts = [f"ok: {who} of cluster {probe.cluster_id}"]
    listener = probe.listener_name()
    if listener:
        parts.append(f"listener {listener}")
    ips = [ip for ip in probe.resolved if ip != probe.host]
    parts.append(f"{', '.join(ips) + ', ' if ips else ''}{probe.elapsed_ms} ms")
    return ", ".join(parts)


def render_text(report: Report) -> str:
    """The human-readable report printed by ``moldau doctor``."""
    obs = report.observations
    lines = ["Bootstrap"]
    width = max((len(p.address) for p in obs.bootstrap), default=0)
    for probe in obs.bootstrap:
        lines.append(f"  {probe.address:<{width}}  {_bootstrap_line(probe)}")
        if probe.ok:
            listed = ", ".join(f"{e.node_id} at {e.address}" for e in probe.brokers)
            lines.append(f"  {'':<{width}}  advertises: {listed or 'no brokers'}")
    if obs.address_map:
        lines.append(f"  address map: {obs.address_map}")
    if report.brokers:
        lines.append("")
        lines.append("Brokers (advertised addresses, dialled as a client would)")
        labels = [f"{s.endpoint.node_id} at {s.endpoint.address}" for s in report.brokers]
        width = max(len(label) for label in labels)
        for label, status in zip(labels, report.brokers, strict=True):
            listener = f" [{status.listener}]" if status.listener else ""
            lines.append(f"  {label:<{width}}{listener}  {status.summary}")
    alternatives = [(e, p) for e, p in obs.alternatives]
    if alternatives:
        lines.append("")
        lines.append("Other listeners of failing brokers")
        for entry, probe in alternatives:
            state = "ok" if probe.ok else f"FAILED ({probe.outcome.value})"
            lines.append(f"  {entry}  {state}")
    problems = [f for f in report.findings if f.severity is not Severity.INFO]
    if problems:
        lines.append("")
        lines.append("Problems")
        for finding in problems:
            lines.append(f"  {finding.severity.value.upper()}: {finding.subject} "
                         f"[{finding.code}]")
            lines += _wrap(finding.message, "    ")
            if finding.fixes:
                lines.append("    Fixes:")
                for number, fix in enumerate(finding.fixes, 1):
                    lines.append(f"      {number}. {fix.action}")
                    if fix.note:
                        lines += _wrap(fix.note, "         ")
    lines.append("")
    lines.append(_summary(report))
    return "\n".join(lines) + "\n"


def _summary(report: Report) -> str:
    total = len(report.brokers)
    down = sum(1 for s in report.brokers if not s.reachable)
    via_map = sum(1 for s in report.brokers if s.reachable and s.via_map)
    boot_ok = sum(1 for p in report.observations.bootstrap if p.ok)
    if not boot_ok:
        text = "No bootstrap address answered."
    elif down:
        text = f"{down} of {total} broker(s) unreachable."
    else:
        text = f"All {total} broker(s) reachable" + (
            f" ({via_map} only through the address map)." if via_map else ".")
    errors = sum(1 for f in report.findings if f.severity is Severity.ERROR)
    warnings = sum(1 for f in report.findings if f.severity is Severity.WARNING)
    return f"{text} {errors} error(s), {warnings} warning(s). Exit status {report.exit_code}."


def render_json(report: Report) -> str:
    """``--json``: the observations, per-broker status and findings as one JSON object."""
    body = {
        "ok": report.ok,
        "exit_code": report.exit_code,
        "bootstrap": to_jsonable(report.observations.bootstrap),
        "brokers": to_jsonable(report.brokers),
        "checks": to_jsonable(report.observations.brokers),
        "alternatives": [{"listener": str(e), "probe": to_jsonable(p)}
                         for e, p in report.observations.alternatives],
        "address_map": report.observations.address_map,
        "findings": to_jsonable(report.findings),
    }
    return json.dumps(body, indent=2, sort_keys=False) + "\n"
