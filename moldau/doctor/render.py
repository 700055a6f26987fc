"""Text and JSON renderings of a doctor :class:`~.model.Report`."""

from __future__ import annotations

import json
import textwrap

from .cluster import controller_of, down_brokers, names
from .model import ClusterView, Probe, Report, Severity, ZkView, to_jsonable

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
    lines += _cluster_lines(report)
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


def _cluster_lines(report: Report) -> list[str]:
    view, zk = report.observations.cluster, report.observations.zookeeper
    lines: list[str] = []
    if view is not None:
        lines += ["", f"Cluster (Metadata of all topics from {view.source})"]
        if view.error:
            lines.append(f"  FAILED: {view.error}")
        else:
            lines += _view_lines(view, zk, report)
    if zk is not None:
        lines += ["", f"ZooKeeper {zk.connect} (registrations: every listener of every broker)"]
        if zk.error:
            lines.append(f"  FAILED: {zk.error}")
        for reg in zk.registrations:
            endpoints = ", ".join(str(e) for e in reg.endpoints) or "no endpoints"
            rack = f"  rack {reg.rack}" if reg.rack else ""
            problem = f"  ({reg.problem})" if reg.problem else ""
            lines.append(f"  broker {reg.broker_id}  {endpoints}{rack}{problem}")
    return lines


def _view_lines(view: ClusterView, zk: ZkView | None, report: Report) -> list[str]:
    controller = controller_of(view, zk)
    registered = (sorted(zk.registered_ids) if zk is not None and not zk.error
                  else sorted(view.broker_ids))
    reachable = sorted(s.endpoint.node_id for s in report.brokers if s.reachable)
    offline = view.offline_partitions
    where = "in ZooKeeper" if zk is not None and not zk.error else "in Metadata"
    down = sorted(set(down_brokers(view, zk)) | {
        r for p in view.partitions if not p.offline for r in p.offline_replicas})
    gone = f"; down (hold replicas): {', '.join(map(str, down))}" if down else ""
    active = f"broker {controller}" if controller >= 0 else "NONE (no active controller)"
    return [
        f"  cluster id   {view.cluster_id or (zk.cluster_id if zk else None) or '?'}",
        f"  controller   {active}",
        f"  brokers      {len(registered)} registered {where} "
        f"({', '.join(map(str, registered)) or 'none'}), {len(reachable)} reachable from here"
        f"{gone}",
        f"  partitions   {len(view.partitions)}, {len(offline)} offline (no leader)"
        + (f": {names(offline)}" if offline else ""),
    ]


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
    view = report.observations.cluster
    if view is not None and view.offline_partitions:
        text += f" {len(view.offline_partitions)} partition(s) offline."
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
        "cluster": _cluster_json(report),
        "zookeeper": to_jsonable(report.observations.zookeeper),
        "findings": to_jsonable(report.findings),
    }
    return json.dumps(body, indent=2, sort_keys=False) + "\n"


def _cluster_json(report: Report) -> dict[str, object] | None:
    view, zk = report.observations.cluster, report.observations.zookeeper
    if view is None:
        return None
    body = to_jsonable(view)
    body["active_controller"] = controller_of(view, zk)
    body["offline_partitions"] = [p.name for p in view.offline_partitions]
    body["registered"] = sorted(zk.registered_ids if zk is not None and not zk.error
                                else view.broker_ids)
    body["reachable"] = sorted(s.endpoint.node_id for s in report.brokers if s.reachable)
    return body  # type: ignore[no-any-return]
