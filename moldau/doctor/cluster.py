"""The cluster as a whole: controller, registered brokers, partitions without a leader.

:class:`ClusterView` is one Metadata answer for all topics (what every client sees through
the listener it bootstrapped on); :class:`ZkView` is what ZooKeeper says (``/cluster/id``,
``/controller``, ``/brokers/ids/<id>`` with the endpoints of *every* listener), read only
when ``--zookeeper`` is given. :func:`cluster_findings` turns them into findings without any
I/O, like the rules of :mod:`.diagnose`:

* no active controller (Metadata's controller id -1, or no ``/controller`` znode);
* offline partitions — no leader, so clients get LEADER_NOT_AVAILABLE — and the brokers that
  hold their replicas, to be started again (by id);
* under-replicated partitions (a replica out of the ISR or offline), naming each broker
  missing from an ISR and whether it runs (check its log) or not (start it);
* partitions whose ISR is smaller than their topic's ``min.insync.replicas`` (acks=all
  produces fail with NOT_ENOUGH_REPLICAS);
* brokers registered in ZooKeeper that this listener does not show (they have no endpoint
  for it: clients of this listener cannot reach them, seed 001).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from .model import (
    BrokerCheck,
    BrokerStatus,
    ClusterView,
    Finding,
    Fix,
    Outcome,
    PartitionInfo,
    Severity,
    ZkView,
)

#: How many partitions a finding names before it says "and N more".
NAMED_PARTITIONS = 10


def names(partitions: Iterable[PartitionInfo], limit: int = NAMED_PARTITIONS) -> str:
    """``t/0, t/3, u/1`` (the first ``limit``, then "and N more")."""
    listed = [p.name for p in partitions]
    text = ", ".join(listed[:limit])
    if len(listed) > limit:
        text += f" and {len(listed) - limit} more"
    return text


def down_brokers(view: ClusterView, zk: ZkView | None = None) -> dict[int, list[PartitionInfo]]:
    """Broker id -> offline partitions it holds a replica of, for brokers that are not alive
    (neither in Metadata's broker list nor registered in ZooKeeper)."""
    alive = set(view.broker_ids)
    if zk is not None and not zk.error:
        alive |= zk.registered_ids
    held: dict[int, list[PartitionInfo]] = {}
    for partition in view.offline_partitions:
        gone = set(partition.offline_replicas) | (set(partition.replicas) - alive)
        for broker_id in sorted(gone):
            held.setdefault(broker_id, []).append(partition)
    return dict(sorted(held.items()))


def controller_of(view: ClusterView, zk: ZkView | None) -> int:
    """The active controller: ``/controller`` when ZooKeeper was read, else Metadata's id."""
    if zk is not None and not zk.error:
        return -1 if zk.controller_id is None else zk.controller_id
    return view.controller_id


def cluster_findings(view: ClusterView | None, zk: ZkView | None = None,
                     statuses: Iterable[BrokerStatus] = ()) -> list[Finding]:
    """Findings about the cluster as a whole (none when it is healthy)."""
    findings: list[Finding] = []
    if zk is not None and zk.error:
        findings.append(Finding(
            Severity.ERROR, "zookeeper-unreadable", f"ZooKeeper {zk.connect}", zk.error,
            (Fix("zookeeper", f"--zookeeper {zk.connect}",
                 "give the brokers' zookeeper.connect value (host:port list and chroot) "
                 "exactly as in their server.properties"),)))
    if view is None or view.error:
        return findings
    controller = controller_of(view, zk)
    if controller < 0:
        where = (f"ZooKeeper has no /controller znode under {zk.connect}"
                 if zk is not None and not zk.error else
                 f"{view.source} answers Metadata with controller id -1")
        findings.append(Finding(
            Severity.ERROR, "no-controller", "controller",
            f"No broker is the active controller ({where}). Until one is elected topics "
            "cannot be created, deleted or changed, and partitions of a broker that stops get "
            "no new leader. A live broker takes the role within seconds of the previous "
            "controller's ZooKeeper session ending.",
            (Fix("controller", "check the brokers' logs for ZooKeeper errors",
                 "every broker competes for /controller; if none wins, none is connected to "
                 "ZooKeeper (zookeeper.connect, the ensemble's health) or none is running"),)))
    findings += _offline_findings(view, zk)
    findings += _missing_on_listener(view, zk, list(statuses))
    return findings


def with_start_fixes(findings: list[Finding], checks: Iterable[BrokerCheck],
                     statuses: Iterable[BrokerStatus]) -> list[Finding]:
    """Put "start broker N" first among the fixes of a broker whose address refuses
    connections while other brokers of the cluster answer: in a cluster the likeliest cause
    is a broker that stopped (kill -9 leaves its registration, and Metadata still lists it,
    until its ZooKeeper session expires), not a wrong ``advertised.listeners``."""
    if not any(s.reachable and not s.via_map for s in statuses):
        return findings
    refused = {f"broker {c.endpoint.node_id} at {c.endpoint.address}": c.endpoint.node_id
               for c in checks if c.direct.outcome is Outcome.REFUSED
               and not (c.mapped is not None and c.mapped.ok)}
    updated = []
    for finding in findings:
        node = refused.get(finding.subject)
        if node is not None and finding.code == "refused":
            start = Fix("start-broker", f"start broker {node} if it is not running",
                        "other brokers of the cluster answer from here, so the likeliest "
                        "cause is that this one stopped; a broker killed without a clean "
                        "shutdown stays listed until its ZooKeeper session expires "
                        "(zookeeper.session.timeout.ms), then its partitions go offline")
            finding = dataclasses.replace(finding, fixes=(start, *finding.fixes))
        updated.append(finding)
    return updated


def _offline_findings(view: ClusterView, zk: ZkView | None) -> list[Finding]:
    findings: list[Finding] = []
    offline = view.offline_partitions
    if offline:
        held = down_brokers(view, zk)
        fixes = [Fix("start-broker", f"start broker {broker_id}",
                     f"it holds replicas of {names(parts)}; they come back with their data "
                     "once it has registered in ZooKeeper again (same broker.id, log.dirs "
                     "and zookeeper.connect)")
                 for broker_id, parts in held.items()]
        orphaned = [p for p in offline if not any(p in parts for parts in held.values())]
        if orphaned:
            fixes.append(Fix(
                "controller", "check the controller's log",
                f"{names(orphaned)} have live replicas but no leader: the controller has not "
                "elected one yet (or the replicas left the ISR and "
                "unclean.leader.election.enable=false keeps them from leading)"))
        who = (f"; their replicas are on broker(s) {', '.join(map(str, held))}, not "
               "running (not registered in ZooKeeper)" if held else "")
        findings.append(Finding(
            Severity.ERROR, "offline-partitions", "partitions",
            f"{len(offline)} partition(s) have no leader (offline): {names(offline)}{who}. "
            "Clients get LEADER_NOT_AVAILABLE for them: producers retry until they time out, "
            "consumers stop reading them; groups whose coordinator partition of "
            "__consumer_offsets is offline cannot join or commit.",
            tuple(fixes)))
    findings += _replication_findings(view, zk)
    return findings


def missing_from_isr(view: ClusterView) -> dict[int, list[PartitionInfo]]:
    """Broker id -> partitions (with a leader) whose replica on it is not in the ISR, or is
    offline: the partitions that broker leaves under-replicated."""
    held: dict[int, list[PartitionInfo]] = {}
    for p in view.partitions:
        if p.offline:
            continue
        for broker_id in sorted((set(p.replicas) - set(p.isr)) | set(p.offline_replicas)):
            held.setdefault(broker_id, []).append(p)
    return dict(sorted(held.items()))


def _replication_findings(view: ClusterView, zk: ZkView | None) -> list[Finding]:
    """Under-replicated partitions (warning: they work with fewer copies) and partitions
    whose ISR is below the topic's min.insync.replicas (error: acks=all produces fail)."""
    findings: list[Finding] = []
    missing = missing_from_isr(view)
    if missing:
        alive = set(view.broker_ids)
        if zk is not None and not zk.error:
            alive |= zk.registered_ids
        fixes = []
        for broker_id, parts in missing.items():
            if broker_id in alive:
                fixes.append(Fix(
                    "broker-log", f"check broker {broker_id}'s log",
                    f"it runs but is out of the ISR of {names(parts)}: it has not caught up "
                    "with the leaders within replica.lag.time.max.ms (a slow disk, a full "
                    "network, fetch errors in its log); it rejoins once it has caught up"))
            else:
                fixes.append(Fix(
                    "start-broker", f"start broker {broker_id}",
                    f"it is not running (not registered) and holds replicas of "
                    f"{names(parts)}; it catches up from the leaders and rejoins the ISR"))
        under = sorted({p for parts in missing.values() for p in parts},
                       key=lambda p: (p.topic, p.partition))
        findings.append(Finding(
            Severity.WARNING, "under-replicated-partitions", "partitions",
            f"{len(under)} partition(s) are under-replicated (fewer in-sync replicas than "
            f"replicas): {names(under)}; missing from the ISR: "
            + "; ".join(f"broker {b} ({len(parts)} partition(s))"
                        for b, parts in missing.items())
            + ". They work, with fewer copies: losing their remaining in-sync replicas loses "
              "data or takes them offline.",
            tuple(fixes)))
    below = [p for p in view.partitions
             if not p.offline and len(p.isr) < view.min_isr_of(p.topic)]
    if below:
        detail = ", ".join(f"{p.name} (ISR {','.join(map(str, p.isr)) or 'empty'}, "
                           f"min.insync.replicas={view.min_isr_of(p.topic)})"
                           for p in below[:NAMED_PARTITIONS])
        if len(below) > NAMED_PARTITIONS:
            detail += f" and {len(below) - NAMED_PARTITIONS} more"
        gone = sorted({b for p in below for b in set(p.replicas) - set(p.isr)})
        findings.append(Finding(
            Severity.ERROR, "under-min-isr-partitions", "partitions",
            f"{len(below)} partition(s) have fewer in-sync replicas than min.insync.replicas: "
            f"{detail}. Producers with acks=all get NOT_ENOUGH_REPLICAS for them until the "
            "ISR grows again; acks=1 and acks=0 still work.",
            tuple(Fix("start-broker", f"start broker {b} or check its log",
                      "the ISR grows when it has caught up with the leader")
                  for b in gone)))
    return findings


def _missing_on_listener(view: ClusterView, zk: ZkView | None,
                         statuses: list[BrokerStatus]) -> list[Finding]:
    if zk is None or zk.error:
        return []
    listener = next((s.listener for s in statuses if s.listener), None)
    hidden = [r for r in zk.registrations if r.broker_id not in view.broker_ids]
    if not hidden:
        return []
    lines = "; ".join(
        f"broker {r.broker_id}: {', '.join(map(str, r.endpoints)) or 'no endpoints'}"
        for r in hidden)
    on = f"listener {listener}" if listener else "the listener this tool bootstrapped on"
    return [Finding(
        Severity.WARNING, "missing-on-listener",
        f"broker(s) {', '.join(str(r.broker_id) for r in hidden)}",
        f"Registered in ZooKeeper but not listed by {view.source} on {on} ({lines}): a broker "
        "lists other brokers only with their endpoint for the listener the request arrived "
        "on, so clients of this listener cannot reach these brokers or the partitions they "
        "lead (LISTENER_NOT_FOUND).",
        (Fix("advertised.listeners", f"add {on.removeprefix('listener ')} to their "
             "listeners and advertised.listeners",
             "or bootstrap through a listener every broker has"),))]


__all__ = ["cluster_findings", "controller_of", "down_brokers", "missing_from_isr", "names",
           "with_start_fixes"]
