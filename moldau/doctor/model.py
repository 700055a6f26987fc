"""What ``moldau doctor`` observes and what it concludes, as plain records.

Observations (:class:`Probe`, :class:`BrokerCheck`, :class:`Observations`) are produced by
:mod:`.probe` from real connections; the diagnosis (:mod:`.diagnose`) turns them into
:class:`Finding` and :class:`Fix` records without any I/O, so every conclusion can be unit
tested from hand-written observations. Everything converts to JSON-ready dicts with
:func:`to_jsonable` for ``moldau doctor --json``.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any


def format_address(host: str, port: int) -> str:
    """``host:port``, IPv6 literals in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class Outcome(enum.StrEnum):
    """How far one connection attempt got."""

    OK = "ok"  # resolved, connected, answered ApiVersions and Metadata
    DNS = "dns"  # the host name does not resolve here
    REFUSED = "refused"  # resolved; nothing accepts connections on that port
    TIMEOUT = "timeout"  # resolved; the TCP connection got no answer (dropped, filtered)
    UNREACHABLE = "unreachable"  # resolved; no route to that address (EHOSTUNREACH, ...)
    NOT_KAFKA = "not-kafka"  # TCP connected, but no Kafka answer (wrong port, TLS, proxy)
    ERROR = "error"  # anything else (the detail says what)


class Severity(enum.StrEnum):
    ERROR = "error"  # a client will fail; makes the exit status non-zero
    WARNING = "warning"  # works for some clients or some of the time
    INFO = "info"


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A broker as a Metadata response lists it."""

    node_id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> str:
        return format_address(self.host, self.port)

    def key(self) -> tuple[int, str, int]:
        return (self.node_id, self.host.lower(), self.port)


@dataclass(frozen=True, slots=True)
class ListenerEntry:
    """One ``NAME://host:port`` entry of ``listeners`` or ``advertised.listeners``."""

    name: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class BrokerListeners:
    """A broker's listener settings, read with DescribeConfigs (None when not readable)."""

    listeners: tuple[ListenerEntry, ...] = ()
    advertised: tuple[ListenerEntry, ...] = ()  # as configured; empty = same as listeners
    protocol_map: tuple[tuple[str, str], ...] = ()

    def effective_advertised(self) -> tuple[ListenerEntry, ...]:
        """``advertised.listeners`` as the broker applies it (defaults to ``listeners``)."""
        if self.advertised:
            return self.advertised
        return self.listeners


@dataclass(frozen=True, slots=True)
class Probe:
    """One attempt to reach an address and ask it who it is and what it advertises."""

    host: str
    port: int
    outcome: Outcome
    detail: str = ""  # the error in the OS's or broker's words
    resolved: tuple[str, ...] = ()  # IP addresses the name resolved to
    elapsed_ms: int = 0
    cluster_id: str | None = None
    brokers: tuple[Endpoint, ...] = ()  # the Metadata broker list as this address sees it
    controller_id: int = -1
    answered_node: int | None = None  # the node id that answered (None when unknown)
    listeners: BrokerListeners | None = None  # the answering node's listener configs

    @property
    def address(self) -> str:
        return format_address(self.host, self.port)

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.OK

    def endpoint_of(self, node_id: int | None) -> Endpoint | None:
        """The endpoint this address's Metadata gives for ``node_id``."""
        for endpoint in self.brokers:
            if endpoint.node_id == node_id:
                return endpoint
        return None

    def listener_name(self) -> str | None:
        """Name of the listener this address reaches, when the broker's configs say it.

        The broker answers Metadata with its endpoint for the listener a request arrived on,
        so the advertised entry equal to that endpoint names the listener. Behind a port
        forward the bound port can differ from the advertised one, so a bound listener on
        the dialled port is the fallback.
        """
        if self.listeners is None:
            return None
        own = self.endpoint_of(self.answered_node)
        if own is not None:
            matches = [e for e in self.listeners.effective_advertised()
                       if e.host.lower() == own.host.lower() and e.port == own.port]
            if len(matches) == 1:
                return matches[0].name
        bound = [e for e in self.listeners.listeners if e.port == self.port]
        if len(bound) == 1:
            return bound[0].name
        return None


@dataclass(frozen=True, slots=True)
class BrokerCheck:
    """The probes of one advertised broker endpoint."""

    endpoint: Endpoint  # as advertised
    direct: Probe  # dialling the advertised address as an unmodified client does
    mapped: Probe | None = None  # dialling the broker.address.map target, when it differs
    listener: str | None = None  # listener name the endpoint was advertised for


# -- the cluster as a whole (moldau.doctor.cluster has the rules) ----------------------------

LEADER_NOT_AVAILABLE = 5
LISTENER_NOT_FOUND = 72


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """One partition as Metadata lists it."""

    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    offline_replicas: tuple[int, ...] = ()
    error_code: int = 0

    @property
    def offline(self) -> bool:
        """No leader anywhere (Kafka's "offline partition"). A leader that merely has no
        endpoint on this listener (LISTENER_NOT_FOUND) is not offline: other listeners'
        clients use it."""
        return self.leader < 0 and self.error_code != LISTENER_NOT_FOUND

    @property
    def name(self) -> str:
        return f"{self.topic}/{self.partition}"


@dataclass(frozen=True, slots=True)
class ClusterView:
    """Metadata for all topics, as one bootstrap address answers it."""

    source: str  # the address that answered
    cluster_id: str | None = None
    controller_id: int = -1
    brokers: tuple[Endpoint, ...] = ()
    partitions: tuple[PartitionInfo, ...] = ()
    error: str = ""  # why there is no view (the request failed)
    # Topic -> min.insync.replicas (DescribeConfigs); topics missing here count as 1.
    min_isr: tuple[tuple[str, int], ...] = ()

    def min_isr_of(self, topic: str) -> int:
        return dict(self.min_isr).get(topic, 1)

    @property
    def offline_partitions(self) -> tuple[PartitionInfo, ...]:
        return tuple(p for p in self.partitions if p.offline)

    @property
    def broker_ids(self) -> frozenset[int]:
        return frozenset(e.node_id for e in self.brokers)


@dataclass(frozen=True, slots=True)
class Registration:
    """``/brokers/ids/<id>``: a live broker and the endpoint of each of its listeners."""

    broker_id: int
    endpoints: tuple[ListenerEntry, ...] = ()
    rack: str | None = None
    problem: str = ""  # set when the znode could not be read as a registration


@dataclass(frozen=True, slots=True)
class ZkView:
    """What ZooKeeper says about the cluster (``--zookeeper``)."""

    connect: str
    cluster_id: str | None = None
    controller_id: int | None = None  # None: no /controller znode (no active controller)
    registrations: tuple[Registration, ...] = ()
    error: str = ""  # why ZooKeeper could not be read

    @property
    def registered_ids(self) -> frozenset[int]:
        return frozenset(r.broker_id for r in self.registrations)

    def registration(self, broker_id: int) -> Registration | None:
        return next((r for r in self.registrations if r.broker_id == broker_id), None)


@dataclass(frozen=True, slots=True)
class Observations:
    """Everything one ``moldau doctor`` run saw."""

    bootstrap: tuple[Probe, ...]
    brokers: tuple[BrokerCheck, ...] = ()
    # Other listeners' advertised addresses, probed when a broker failed: a listener whose
    # addresses work from here is the simplest fix (bootstrap through it).
    alternatives: tuple[tuple[ListenerEntry, Probe], ...] = ()
    address_map: str = ""  # the --address-map given (empty: none)
    # Metadata for all topics from the first bootstrap address that answered (the cluster as
    # its clients see it), and ZooKeeper's registrations when --zookeeper was given.
    cluster: ClusterView | None = None
    zookeeper: ZkView | None = None


@dataclass(frozen=True, slots=True)
class Fix:
    """One way to fix a finding."""

    kind: str  # "bootstrap", "advertised.listeners", "address-map" or "proxy"
    action: str  # the line to set or the command to run
    note: str = ""  # where it goes, when to prefer it, what it changes for others


@dataclass(frozen=True, slots=True)
class Finding:
    """A problem (or a note) with the reason in plain words and the fixes."""

    severity: Severity
    code: str  # stable identifier for scripts, e.g. "unresolvable", "mixed-listeners"
    subject: str  # what it is about: "broker 0 at kafka0:29092", "bootstrap list"
    message: str
    fixes: tuple[Fix, ...] = ()


@dataclass(frozen=True, slots=True)
class BrokerStatus:
    """One line of the per-broker summary."""

    endpoint: Endpoint
    reachable: bool  # reachable the way a client with the given options connects
    via_map: bool  # reachable only through the address map
    listener: str | None
    summary: str


@dataclass(frozen=True, slots=True)
class Report:
    """The diagnosis: per-broker status plus findings; ``ok`` decides the exit status."""

    observations: Observations
    brokers: tuple[BrokerStatus, ...] = ()
    findings: tuple[Finding, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return not any(f.severity is Severity.ERROR for f in self.findings)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1


def to_jsonable(value: Any) -> Any:
    """Records, enums and tuples to plain JSON values (for ``--json``)."""
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
        for name in ("address", "ok", "exit_code"):
            attr = getattr(type(value), name, None)
            if isinstance(attr, property):
                out[name] = to_jsonable(getattr(value, name))
        return out
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    return value


def parse_listener_list(text: str | None) -> tuple[ListenerEntry, ...]:
    """Parse ``NAME://host:port,...`` as DescribeConfigs renders ``listeners`` values.

    Entries that do not parse are skipped: the doctor reads what a broker reports and must
    not fail on a format it does not expect.
    """
    entries = []
    for raw in (text or "").split(","):
        item = raw.strip()
        name, sep, rest = item.partition("://")
        if not sep or not name:
            continue
        if rest.startswith("["):
            host, _, tail = rest[1:].partition("]")
            port_text = tail[1:] if tail.startswith(":") else ""
        else:
            host, _, port_text = rest.rpartition(":")
        if not port_text.isdigit():
            continue
        entries.append(ListenerEntry(name, host, int(port_text)))
    return tuple(entries)


def parse_protocol_map(text: str | None) -> tuple[tuple[str, str], ...]:
    """Parse ``NAME:PROTOCOL,...`` (``listener.security.protocol.map``)."""
    pairs = []
    for raw in (text or "").split(","):
        name, sep, protocol = raw.strip().partition(":")
        if sep and name:
            pairs.append((name, protocol))
    return tuple(pairs)
