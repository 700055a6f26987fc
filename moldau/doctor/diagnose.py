"""From observations to findings: why each broker can or cannot be reached, and the fixes.

Pure functions: :func:`diagnose` takes :class:`~.model.Observations` and returns a
:class:`~.model.Report`. No sockets, no clock, no environment, so every rule below is
unit-tested from hand-written observations.

The rules follow what goes wrong in the seeds:

* a bootstrap address works, but the broker advertises an address this machine cannot
  resolve or reach (Docker host names, AWS internal names, pre-NAT addresses): per broker,
  the reason in plain words and three fixes — the ``advertised.listeners`` line for the
  broker (naming the listener the bootstrap address belongs to), a ``broker.address.map``
  entry for moldau clients, and ``moldau proxy`` for clients that cannot be changed — plus,
  when another listener of the same broker advertises addresses that work from here, the
  simplest fix of all: bootstrap through that listener;
* an advertised address that answers as another node id, or another cluster;
* bootstrap addresses that belong to different listeners (or clusters), which hand out
  different broker lists on each metadata refresh (seed 001);
* the cluster as a whole (:mod:`.cluster`): no active controller, offline partitions and the
  brokers to start again, brokers registered in ZooKeeper that this listener leaves out.
"""

from __future__ import annotations

from collections.abc import Iterable

from .cluster import cluster_findings, with_start_fixes
from .model import (
    BrokerCheck,
    BrokerListeners,
    BrokerStatus,
    Endpoint,
    Finding,
    Fix,
    ListenerEntry,
    Observations,
    Outcome,
    Probe,
    Report,
    Severity,
    format_address,
)

# Finding codes per outcome of dialling an advertised address.
OUTCOME_CODES = {
    Outcome.DNS: "unresolvable",
    Outcome.REFUSED: "refused",
    Outcome.TIMEOUT: "timeout",
    Outcome.UNREACHABLE: "unreachable",
    Outcome.NOT_KAFKA: "not-kafka",
    Outcome.ERROR: "error",
}

PROXY_PORT_BASE = 19090
PROXY_NOTE = (
    "for clients you cannot change (kcat, confluent-kafka, Java, Spark or Flink jobs): run the "
    "proxy on this side of the network; it reaches the brokers (through the address map), "
    f"serves broker n on 127.0.0.1:{PROXY_PORT_BASE}+n and rewrites the broker addresses in "
    "Metadata, FindCoordinator and DescribeCluster answers to its own. Point the clients' "
    "bootstrap.servers at the ports it prints (\"clients bootstrap from ...\"). For other "
    "machines add --listen-host 0.0.0.0 --advertised-host NAME-THEY-USE"
)


def proxy_command(bootstrap: str, address_map: str = "") -> str:
    """The ``moldau proxy`` command line that fronts the cluster reached at ``bootstrap``."""
    command = f"moldau proxy --bootstrap-server {bootstrap}"
    if address_map:
        command += f" --address-map {address_map}"
    return f"{command} --port-base {PROXY_PORT_BASE}"


# --- plain-words explanations ------------------------------------------------------------


def explain_failure(probe: Probe, timeout_s: float | None = None) -> str:
    """Why dialling ``probe``'s address failed, in one sentence."""
    host = probe.host
    ips = [ip for ip in probe.resolved if ip != host]
    but = f"{host!r} resolves to {', '.join(ips)}, but " if ips else ""
    detail = f" ({probe.detail})" if probe.detail else ""
    if probe.outcome is Outcome.DNS:
        return f"the name {host!r} does not resolve on this machine{detail}"
    if probe.outcome is Outcome.REFUSED:
        return (f"{but}nothing accepts connections on {probe.address} (connection refused): "
                "no broker listens on that address and port, the port is not forwarded, or a "
                "firewall rejects it")
    if probe.outcome is Outcome.TIMEOUT:
        within = f" within {timeout_s:g} s" if timeout_s else ""
        return (f"{but}the connection to {probe.address} got no answer{within}: the address "
                "is not reachable from this network (a firewall drops the packets, or it is "
                "a private address behind NAT)")
    if probe.outcome is Outcome.UNREACHABLE:
        return (f"{but}there is no route to {probe.address} from this machine{detail}: it is "
                "an address of another network")
    if probe.outcome is Outcome.NOT_KAFKA:
        return (f"a TCP connection to {probe.address} opened but no Kafka answer came back"
                f"{detail}: another service listens there, the listener expects TLS/SASL, "
                "or a port forward leads to the wrong place")
    return f"connecting to {probe.address} failed{detail}"


def _after_bootstrap(endpoint: Endpoint, listener: str | None, bootstrap: list[str],
                     outcome: Outcome) -> str:
    via = f" on listener {listener}" if listener else ""
    boot = ", ".join(bootstrap) if bootstrap else "the bootstrap address"
    if outcome is Outcome.DNS:
        symptom = f"kcat reports \"Failed to resolve '{endpoint.address}'\""
    else:
        symptom = f"kcat and librdkafka log connection errors for {endpoint.address}"
    return (f"The cluster advertises broker {endpoint.node_id} as {endpoint.address}{via} (the "
            f"listener {boot} belongs to). Bootstrap works, but every request after it — "
            f"produce, fetch, the consumer group coordinator — goes to {endpoint.address} and "
            f"fails: {symptom}, the Java client says \"Connection to node {endpoint.node_id} "
            f"({endpoint.address}) could not be established\".")


# --- helpers -----------------------------------------------------------------------------


def _signature(probe: Probe) -> tuple[str | None, frozenset[tuple[int, str, int]]]:
    return probe.cluster_id, frozenset(e.key() for e in probe.brokers)


def _broker_list(probe: Probe) -> str:
    if not probe.brokers:
        return "no brokers"
    return ", ".join(f"{e.node_id} at {e.address}" for e in sorted(probe.brokers,
                                                                  key=Endpoint.key))


def _listeners_of(node_id: int, probes: Iterable[Probe]) -> BrokerListeners | None:
    for probe in probes:
        if probe.ok and probe.answered_node == node_id and probe.listeners is not None:
            return probe.listeners
    return None


def _replace_listener(entries: tuple[ListenerEntry, ...], name: str, host: str,
                      port: int) -> str:
    replaced = [ListenerEntry(name, host, port) if e.name == name else e for e in entries]
    return ",".join(str(e) for e in replaced)


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


# --- the diagnosis -----------------------------------------------------------------------


def diagnose(obs: Observations, *, timeout_s: float | None = None) -> Report:
    """Findings and per-broker status for one doctor run."""
    findings: list[Finding] = []
    ok_boot = [p for p in obs.bootstrap if p.ok]
    findings += _bootstrap_findings(obs.bootstrap, timeout_s)
    if not ok_boot:
        findings += cluster_findings(None, obs.zookeeper)
        return Report(obs, (), tuple(findings))
    findings += _mixed_bootstrap(ok_boot, obs.brokers)
    statuses = []
    everything = [*obs.bootstrap, *(c.direct for c in obs.brokers),
                  *(c.mapped for c in obs.brokers if c.mapped is not None),
                  *(p for _, p in obs.alternatives)]
    for check in obs.brokers:
        status, found = _check_broker(check, obs, ok_boot, everything, timeout_s)
        statuses.append(status)
        findings += found
    if len(obs.brokers) > 1:
        findings = with_start_fixes(findings, obs.brokers, statuses)
    findings += cluster_findings(obs.cluster, obs.zookeeper, statuses)
    return Report(obs, tuple(statuses), tuple(findings))


def _bootstrap_findings(probes: tuple[Probe, ...], timeout_s: float | None) -> list[Finding]:
    failed = [p for p in probes if not p.ok]
    if not failed:
        return []
    severity = Severity.ERROR if len(failed) == len(probes) else Severity.WARNING
    found = []
    for probe in failed:
        if severity is Severity.ERROR:
            impact = "No bootstrap address answers, so no client can reach the cluster."
        else:
            impact = ("Clients skip it and use another bootstrap address, but it slows every "
                      "start and hides a wrong entry.")
        found.append(Finding(
            severity, f"bootstrap-{OUTCOME_CODES.get(probe.outcome, 'error')}",
            f"bootstrap {probe.address}",
            f"{explain_failure(probe, timeout_s)}. {impact}",
            (Fix("bootstrap", f"--bootstrap-server {probe.address}",
                 "check this entry: is a broker running there, and is its host and port "
                 "reachable from this machine (forwarded port, security group, firewall)?"),),
        ))
    return found


def _mixed_bootstrap(ok_boot: list[Probe], checks: tuple[BrokerCheck, ...]) -> list[Finding]:
    groups: dict[tuple[str | None, frozenset[tuple[int, str, int]]], list[Probe]] = {}
    for probe in ok_boot:
        groups.setdefault(_signature(probe), []).append(probe)
    if len(groups) < 2:
        return []
    clusters = {key[0] for key in groups}
    lines = []
    for members in groups.values():
        names = sorted({p.listener_name() or "?" for p in members})
        listener = "" if names == ["?"] else f" (listener {', '.join(names)})"
        lines.append(f"{', '.join(p.address for p in members)}{listener} -> cluster "
                     f"{members[0].cluster_id}, brokers {_broker_list(members[0])}")
    failing = {c.endpoint.key() for c in checks if not (c.direct.ok or
                                                        (c.mapped and c.mapped.ok))}
    # Prefer the group whose advertised brokers all work from here, then the biggest one.
    best = max(groups.values(), key=lambda members: (
        not any(e.key() in failing for e in members[0].brokers), len(members)))
    fix = Fix("bootstrap", f"--bootstrap-server {','.join(p.address for p in best)}",
              "list bootstrap addresses of one listener (and one cluster) only")
    if len(clusters) > 1:
        return [Finding(
            Severity.ERROR, "different-clusters", "bootstrap list",
            "The bootstrap addresses belong to different clusters: " + "; ".join(lines)
            + ". A client takes whichever answers first, so it may talk to either cluster.",
            (fix,))]
    return [Finding(
        Severity.ERROR, "mixed-listeners", "bootstrap list",
        "The bootstrap addresses belong to different listeners, which advertise different "
        "broker lists: " + "; ".join(lines) + ". A broker answers Metadata with the "
        "addresses of the listener the request arrived on, and a client refreshes metadata "
        "from whichever address it picks, so the brokers it knows change from one refresh to "
        "the next (seed 001).", (fix,))]


def _check_broker(check: BrokerCheck, obs: Observations, ok_boot: list[Probe],
                  everything: list[Probe], timeout_s: float | None
                  ) -> tuple[BrokerStatus, list[Finding]]:
    endpoint, direct, mapped = check.endpoint, check.direct, check.mapped
    subject = f"broker {endpoint.node_id} at {endpoint.address}"
    boot_cluster = ok_boot[0].cluster_id
    findings: list[Finding] = []

    identity = _identity_problem(endpoint, direct, boot_cluster)
    if direct.ok and identity is None:
        summary = f"ok ({_resolution(direct)}{direct.elapsed_ms} ms)"
        findings += _listener_mismatch(check, ok_boot)
        return BrokerStatus(endpoint, True, False, check.listener, summary), findings
    if direct.ok and identity is not None:
        code, message = identity
        findings.append(Finding(Severity.ERROR, code, subject, message,
                                _fixes(check, obs, ok_boot, everything)))
        return BrokerStatus(endpoint, False, False, check.listener,
                            f"WRONG BROKER: {message}"), findings

    reason = explain_failure(direct, timeout_s)
    bootstrap = [p.address for p in ok_boot if endpoint.key() in {e.key() for e in p.brokers}]
    context = _after_bootstrap(endpoint, check.listener, bootstrap, direct.outcome)
    if mapped is not None and mapped.ok and _identity_problem(endpoint, mapped,
                                                              boot_cluster) is None:
        message = (f"{_capital(reason)}. It is reachable only through the address map "
                   f"({endpoint.address} -> {mapped.address}): moldau clients given the "
                   f"same --address-map work, unmodified clients (kcat, confluent-kafka, "
                   f"Java) do not. {context}")
        fixes = tuple(f for f in _fixes(check, obs, ok_boot, everything)
                      if f.kind != "address-map")
        findings.append(Finding(Severity.WARNING, "only-via-map", subject, message, fixes))
        summary = (f"ok through --address-map {endpoint.address}={mapped.address} "
                   f"({_resolution(mapped)}{mapped.elapsed_ms} ms); direct: "
                   f"{_short(direct)}")
        return BrokerStatus(endpoint, True, True, check.listener, summary), findings

    message = f"{_capital(reason)}. {context}"
    if mapped is not None:
        why = (explain_failure(mapped, timeout_s) if not mapped.ok else
               (_identity_problem(endpoint, mapped, boot_cluster) or ("", ""))[1])
        message += f" The --address-map target {mapped.address} does not work either: {why}."
    findings.append(Finding(Severity.ERROR, OUTCOME_CODES.get(direct.outcome, "error"),
                            subject, message, _fixes(check, obs, ok_boot, everything)))
    return BrokerStatus(endpoint, False, False, check.listener,
                        f"FAILED: {_short(direct)}"), findings


def _identity_problem(endpoint: Endpoint, probe: Probe,
                      cluster_id: str | None) -> tuple[str, str] | None:
    """(code, message) when ``probe`` reached a broker other than ``endpoint``'s."""
    if not probe.ok:
        return None
    if cluster_id is not None and probe.cluster_id is not None and probe.cluster_id != cluster_id:
        who = f"node {probe.answered_node}" if probe.answered_node is not None else "a broker"
        return ("wrong-cluster",
                f"{probe.address} answers as {who} of cluster {probe.cluster_id}, not of "
                f"cluster {cluster_id} that advertised it as broker {endpoint.node_id}: the "
                "advertised address (or a port forward or NAT rule to it) leads to another "
                "cluster")
    if probe.answered_node is not None and probe.answered_node != endpoint.node_id:
        return ("wrong-node",
                f"{probe.address} answers as node {probe.answered_node}, but the cluster "
                f"advertises it for broker {endpoint.node_id}: clients would send broker "
                f"{endpoint.node_id}'s requests to node {probe.answered_node}, which answers "
                "NOT_LEADER_OR_FOLLOWER or NOT_COORDINATOR forever. Usually an "
                "advertised.listeners line copied between brokers, or a port forward or NAT "
                "rule pointing at the wrong broker")
    return None


def _listener_mismatch(check: BrokerCheck, ok_boot: list[Probe]) -> list[Finding]:
    """The advertised address works, but leads to a listener with another broker list."""
    reporters = [p for p in ok_boot if check.endpoint.key() in {e.key() for e in p.brokers}]
    if not reporters or not check.direct.brokers:
        return []
    if _signature(check.direct)[1] == _signature(reporters[0])[1]:
        return []
    theirs = check.direct.listener_name()
    ours = check.listener
    names = (f" (listener {theirs}, not {ours})" if theirs and ours and theirs != ours else "")
    return [Finding(
        Severity.WARNING, "listener-mismatch",
        f"broker {check.endpoint.node_id} at {check.endpoint.address}",
        f"{check.endpoint.address} works, but it reaches a listener{names} that advertises "
        f"brokers {_broker_list(check.direct)} instead of {_broker_list(reporters[0])}: "
        "metadata refreshed through this broker changes the client's broker list. Make the "
        "advertised address of each listener lead to that same listener.",
    )]


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _resolution(probe: Probe) -> str:
    ips = [ip for ip in probe.resolved if ip != probe.host]
    return f"{probe.host} -> {', '.join(ips)}, " if ips else ""


def _short(probe: Probe) -> str:
    labels = {
        Outcome.DNS: f"cannot resolve {probe.host!r}",
        Outcome.REFUSED: "connection refused",
        Outcome.TIMEOUT: "timed out",
        Outcome.UNREACHABLE: "no route to host",
        Outcome.NOT_KAFKA: "no Kafka answer",
        Outcome.ERROR: probe.detail or "error",
        Outcome.OK: "ok",
    }
    return labels[probe.outcome]


# --- fixes -------------------------------------------------------------------------------


def _reachable_address(check: BrokerCheck, ok_boot: list[Probe]) -> str | None:
    """An address of this broker's listener known to work from here, if any."""
    node = check.endpoint.node_id
    for probe in ok_boot:
        if probe.answered_node == node and (check.listener is None
                                            or probe.listener_name() in (None, check.listener)):
            return probe.address
    if check.mapped is not None and check.mapped.ok and check.mapped.answered_node in (None,
                                                                                       node):
        return check.mapped.address
    return None


def _fixes(check: BrokerCheck, obs: Observations, ok_boot: list[Probe],
           everything: list[Probe]) -> tuple[Fix, ...]:
    endpoint = check.endpoint
    node = endpoint.node_id
    fixes: list[Fix] = []

    for entry, probe in obs.alternatives:
        if probe.ok and probe.answered_node in (None, node) and entry.name != check.listener:
            fixes.append(Fix(
                "bootstrap", f"--bootstrap-server {probe.address}",
                f"simplest: broker {node}'s listener {entry.name} advertises {probe.address}, "
                "which answers from here; clients that bootstrap through it are sent "
                "addresses of that listener"))
            break

    reachable = _reachable_address(check, ok_boot)
    listener = check.listener or "<LISTENER>"
    target = reachable or f"<address of broker {node} reachable from here>:{endpoint.port}"
    configs = _listeners_of(node, everything)
    if configs is not None and check.listener and reachable:
        host, port = _split(reachable)
        line = _replace_listener(configs.effective_advertised(), check.listener, host, port)
        action = f"advertised.listeners={line}"
    else:
        action = (f"advertised.listeners={listener}://{target}  (keep the broker's other "
                  "entries as they are)")
    internal_note = (
        f"set on broker {node} and restart it. Every client of listener {listener} is then "
        f"sent this address, including clients on the broker's own network; if they cannot "
        f"reach it, keep {listener} for them and add a listener for clients here instead "
        f"(e.g. EXTERNAL://:PORT in listeners, EXTERNAL://HOST:PORT in advertised.listeners, "
        f"EXTERNAL:PLAINTEXT in listener.security.protocol.map, bootstrap with HOST:PORT); "
        f"see docs/operations.md")
    fixes.append(Fix("advertised.listeners", action, internal_note))

    if not (check.mapped is not None and check.mapped.ok):
        fixes.append(Fix(
            "address-map", f"--address-map {endpoint.address}={target}",
            "moldau clients only (moldau CLI tools, moldau.client: broker.address.map="
            f"{endpoint.address}={target}); rewrites the advertised address before "
            "connecting, nothing changes on the broker"))

    boot = ",".join(p.address for p in ok_boot)
    if check.mapped is not None and check.mapped.ok:
        upstream_map = obs.address_map
    elif reachable:
        upstream_map = f"{endpoint.address}={reachable}"
    else:
        upstream_map = f"{endpoint.address}={target}"
    fixes.append(Fix("proxy", proxy_command(boot, upstream_map), PROXY_NOTE))
    return tuple(fixes)


__all__ = ["diagnose", "explain_failure", "format_address", "proxy_command"]
