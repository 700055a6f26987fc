"""Gathering observations: dial each address the way a client would, step by step.

One probe resolves the host name, opens a TCP connection (classifying a failure as refused,
timed out or unreachable), then speaks Kafka over a second connection made by the moldau
client: ApiVersions, Metadata (broker list and cluster id, no topics) and DescribeConfigs of
the ``BROKER`` resource of each listed node id. Only the node that answers can describe its
own broker configs, so the one resource that succeeds tells which node answered, and its
``listeners``/``advertised.listeners`` tell which listener the address belongs to.

:func:`observe` runs the whole sequence: bootstrap addresses, then every advertised
endpoint (and its ``broker.address.map`` target), then, for brokers that failed, the
advertised addresses of their other listeners. Probes of one round run concurrently.
"""

from __future__ import annotations

import asyncio
import errno
import re
import socket
import time
from collections.abc import Iterable
from typing import Any

from moldau.client import AddressMap, BrokerConnection, BrokerError, KafkaConnectionError
from moldau.client.errors import ClientError
from moldau.protocol.api_keys import ApiKey

from .model import (
    BrokerCheck,
    BrokerListeners,
    ClusterView,
    Endpoint,
    ListenerEntry,
    Observations,
    Outcome,
    PartitionInfo,
    Probe,
    parse_listener_list,
    parse_protocol_map,
)
from .zookeeper import read_zookeeper

BROKER_RESOURCE = 4
LISTENER_KEYS = ["listeners", "advertised.listeners", "listener.security.protocol.map"]
_UNREACHABLE = {errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EADDRNOTAVAIL}
_EXPECTED_ID = re.compile(r"expected (-?\d+)")
_WILDCARD_HOSTS = {"", "0.0.0.0", "::", "[::]"}


async def _resolve(host: str, port: int, timeout_s: float) -> list[str]:
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(timeout_s):
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    seen: list[str] = []
    for info in infos:
        ip = str(info[4][0])
        if ip not in seen:
            seen.append(ip)
    return seen


async def _tcp_connect(ip: str, port: int, timeout_s: float) -> None:
    async with asyncio.timeout(timeout_s):
        _reader, writer = await asyncio.open_connection(ip, port)
    writer.close()
    try:
        await writer.wait_closed()
    except OSError:
        pass


def _classify(exc: BaseException) -> tuple[Outcome, str]:
    if isinstance(exc, TimeoutError):
        return Outcome.TIMEOUT, "no answer to the TCP connection request"
    if isinstance(exc, ConnectionRefusedError):
        return Outcome.REFUSED, "connection refused"
    if isinstance(exc, OSError) and exc.errno in _UNREACHABLE:
        return Outcome.UNREACHABLE, exc.strerror or str(exc)
    if isinstance(exc, OSError):
        return Outcome.ERROR, exc.strerror or str(exc)
    return Outcome.ERROR, str(exc) or type(exc).__name__


async def probe_address(host: str, port: int, *, timeout_s: float = 5.0,
                        client_id: str = "moldau-doctor") -> Probe:
    """Resolve, connect and ask ``host:port`` who it is; never raises for network errors."""
    started = time.monotonic()

    def done(outcome: Outcome, detail: str = "", **more: Any) -> Probe:
        return Probe(host, port, outcome, detail, elapsed_ms=more.pop(
            "elapsed_ms", int((time.monotonic() - started) * 1000)), **more)

    try:
        resolved = await _resolve(host, port, timeout_s)
    except socket.gaierror as exc:
        return done(Outcome.DNS, exc.strerror or str(exc))
    except TimeoutError:
        return done(Outcome.DNS, f"no answer from the name service within {timeout_s:g} s")
    except OSError as exc:
        return done(Outcome.DNS, exc.strerror or str(exc))

    first_error: tuple[Outcome, str] | None = None
    for ip in resolved:
        try:
            await _tcp_connect(ip, port, timeout_s)
        except (OSError, TimeoutError) as exc:
            first_error = first_error or _classify(exc)
            continue
        first_error = None
        break
    connect_ms = int((time.monotonic() - started) * 1000)
    if first_error is not None:
        return done(first_error[0], first_error[1], resolved=tuple(resolved))

    conn = BrokerConnection(host, port, client_id=client_id,
                            connect_timeout_ms=max(1, int(timeout_s * 1000)),
                            request_timeout_ms=max(1, int(timeout_s * 1000)))
    try:
        await conn.connect()
        metadata = await _metadata(conn)
        brokers = tuple(Endpoint(b.node_id, b.host, b.port, getattr(b, "rack", None))
                        for b in metadata.brokers)
        answered, listeners = await _identify(conn, [b.node_id for b in brokers])
        if answered is None and len(brokers) == 1:
            # A broker always lists itself on the listener it is asked on.
            answered = brokers[0].node_id
        return done(Outcome.OK, resolved=tuple(resolved), elapsed_ms=connect_ms,
                    cluster_id=getattr(metadata, "cluster_id", None),
                    brokers=brokers, controller_id=getattr(metadata, "controller_id", -1),
                    answered_node=answered, listeners=listeners)
    except KafkaConnectionError as exc:
        return done(Outcome.NOT_KAFKA, _kafka_detail(exc, timeout_s), resolved=tuple(resolved))
    except (BrokerError, ClientError, OSError) as exc:
        return done(Outcome.ERROR, str(exc), resolved=tuple(resolved))
    finally:
        conn.close()


def _kafka_detail(exc: KafkaConnectionError, timeout_s: float) -> str:
    if exc.reason == "timeout":
        return f"no answer to ApiVersions within {timeout_s:g} s"
    if exc.reason == "closed":
        return "the connection was closed without an answer"
    return str(exc)


async def _metadata(conn: BrokerConnection) -> Any:
    version = conn.versions.require(ApiKey.METADATA, 0, what="Metadata")
    return await conn.request(ApiKey.METADATA, {
        # v1+: an empty list asks for brokers only; v0 has no way to ask for no topics.
        "topics": [] if version >= 1 else None,
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }, version=version)


async def _identify(conn: BrokerConnection,
                    node_ids: list[int]) -> tuple[int | None, BrokerListeners | None]:
    """Which node answers on ``conn``, and its listener configs (DescribeConfigs BROKER)."""
    if not node_ids or not conn.versions.supports(ApiKey.DESCRIBE_CONFIGS):
        return None, None
    expected: int | None = None
    for attempt in range(2):
        ids = node_ids if attempt == 0 else [expected]
        try:
            response = await conn.request(ApiKey.DESCRIBE_CONFIGS, {
                "resources": [{"resource_type": BROKER_RESOURCE, "resource_name": str(node),
                               "configuration_keys": LISTENER_KEYS} for node in ids],
                "include_synonyms": False,
                "include_documentation": False,
            })
        except (BrokerError, ClientError):
            return None, None
        for result in response.results:
            if result.error_code == 0:
                values = {c.name: c.value for c in result.configs}
                return int(result.resource_name), BrokerListeners(
                    parse_listener_list(values.get("listeners")),
                    parse_listener_list(values.get("advertised.listeners")),
                    parse_protocol_map(values.get("listener.security.protocol.map")),
                )
            match = _EXPECTED_ID.search(result.error_message or "")
            if match:
                expected = int(match.group(1))
        # Kafka (and Moldau) name the expected id in the error: "Unexpected broker id,
        # expected 2 or empty string"; ask once more for that id.
        if expected is None or expected in ids:
            return expected, None
    return expected, None


async def _gather(probes: Iterable[Any]) -> list[Probe]:
    return list(await asyncio.gather(*probes))


async def cluster_view(host: str, port: int, *, timeout_s: float = 5.0,
                       client_id: str = "moldau-doctor") -> ClusterView:
    """Metadata for all topics from ``host:port``: controller, brokers, every partition's
    leader, replicas, ISR and offline replicas. Never raises for network errors."""
    conn = BrokerConnection(host, port, client_id=client_id,
                            connect_timeout_ms=max(1, int(timeout_s * 1000)),
                            request_timeout_ms=max(1, int(timeout_s * 1000)))
    source = f"{host}:{port}"
    try:
        await conn.connect()
        version = conn.versions.require(ApiKey.METADATA, 1, what="Metadata")
        response = await conn.request(ApiKey.METADATA, {
            "topics": None, "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        }, version=version)
        min_isr = await _min_isr(conn, sorted(t.name for t in response.topics if t.name))
    except (KafkaConnectionError, BrokerError, ClientError, OSError) as exc:
        return ClusterView(source, error=str(exc) or type(exc).__name__)
    finally:
        conn.close()
    return ClusterView(
        source, getattr(response, "cluster_id", None), getattr(response, "controller_id", -1),
        tuple(Endpoint(b.node_id, b.host, b.port, getattr(b, "rack", None))
              for b in response.brokers),
        tuple(PartitionInfo(t.name, p.partition_index, int(p.leader_id),
                            tuple(p.replica_nodes), tuple(p.isr_nodes),
                            tuple(getattr(p, "offline_replicas", ()) or ()), int(p.error_code))
              for t in sorted(response.topics, key=lambda t: t.name or "")
              for p in sorted(t.partitions, key=lambda p: p.partition_index)),
        min_isr=min_isr,
    )


async def _min_isr(conn: BrokerConnection, topics: list[str]) -> tuple[tuple[str, int], ...]:
    """Each topic's ``min.insync.replicas`` (DescribeConfigs); empty when the broker does not
    serve it or refuses (the under-min-ISR check then assumes Kafka's default, 1)."""
    if not topics or not conn.versions.supports(ApiKey.DESCRIBE_CONFIGS):
        return ()
    try:
        response = await conn.request(ApiKey.DESCRIBE_CONFIGS, {
            "resources": [{"resource_type": 2, "resource_name": t,
                           "configuration_keys": ["min.insync.replicas"]} for t in topics],
            "include_synonyms": False, "include_documentation": False,
        })
    except BrokerError:
        return ()
    found = []
    for result in response.results:
        for entry in result.configs if not result.error_code else ():
            if entry.name == "min.insync.replicas" and (entry.value or "").isdigit():
                found.append((result.resource_name, int(entry.value)))
    return tuple(found)


async def observe(bootstrap: list[tuple[str, int]], *, address_map: AddressMap | None = None,
                  timeout_s: float = 5.0, zookeeper: str | None = None) -> Observations:
    """Probe the bootstrap addresses, every advertised broker, and alternatives; read the
    cluster's partitions through the first bootstrap address that answers, and ZooKeeper's
    registrations when ``zookeeper`` (the brokers' ``zookeeper.connect``) is given."""
    amap = address_map or AddressMap()
    zk_job = (asyncio.ensure_future(asyncio.to_thread(read_zookeeper, zookeeper, timeout_s))
              if zookeeper else None)
    boot = await _gather(probe_address(h, p, timeout_s=timeout_s) for h, p in bootstrap)
    first = next((p for p in boot if p.ok), None)
    cluster = (await cluster_view(first.host, first.port, timeout_s=timeout_s)
               if first is not None else None)
    zk = await zk_job if zk_job is not None else None

    endpoints: dict[tuple[int, str, int], tuple[Endpoint, str | None]] = {}
    for probe in boot:
        if not probe.ok:
            continue
        listener = probe.listener_name()
        for endpoint in probe.brokers:
            endpoints.setdefault(endpoint.key(), (endpoint, listener))
    ordered = sorted(endpoints.values(), key=lambda item: item[0].key())

    direct = await _gather(probe_address(e.host, e.port, timeout_s=timeout_s)
                           for e, _ in ordered)
    targets = [amap.apply(e.host, e.port) for e, _ in ordered]
    mapped_jobs = {i: probe_address(h, p, timeout_s=timeout_s)
                   for i, ((e, _), (h, p)) in enumerate(zip(ordered, targets, strict=True))
                   if (h.lower(), p) != (e.host.lower(), e.port)}
    mapped_results = dict(zip(mapped_jobs, await _gather(mapped_jobs.values()), strict=True))
    checks = [BrokerCheck(e, direct[i], mapped_results.get(i), listener)
              for i, (e, listener) in enumerate(ordered)]

    alternatives = await _alternatives(checks, [*boot, *direct, *mapped_results.values()],
                                       timeout_s)
    return Observations(tuple(boot), tuple(checks), tuple(alternatives), str(amap),
                        cluster, zk)


async def _alternatives(checks: list[BrokerCheck], seen: list[Probe],
                        timeout_s: float) -> list[tuple[ListenerEntry, Probe]]:
    failed = [c for c in checks
              if not c.direct.ok and not (c.mapped is not None and c.mapped.ok)]
    if not failed:
        return []
    known = {(p.host.lower(), p.port): p for p in seen}
    found: list[tuple[ListenerEntry, Probe | None]] = []
    for check in failed:
        configs = next((p.listeners for p in seen if p.ok and p.listeners is not None
                        and p.answered_node == check.endpoint.node_id), None)
        if configs is None:
            continue
        for entry in configs.effective_advertised():
            if entry.name == check.listener or entry.host in _WILDCARD_HOSTS:
                continue
            if any(entry == other for other, _ in found):
                continue
            found.append((entry, known.get((entry.host.lower(), entry.port))))
    fresh = await _gather(probe_address(e.host, e.port, timeout_s=timeout_s)
                          for e, p in found if p is None)
    results = iter(fresh)
    return [(e, p if p is not None else next(results)) for e, p in found]
