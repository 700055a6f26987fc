"""``moldau metadata``: the cluster as one broker describes it, in ``kcat -L`` format.

    moldau metadata -b localhost:9092 [-t TOPIC] [--json]

The listing is kcat's, line for line, so walkthroughs written for ``kcat -L`` (seed 000) read
the same with either tool::

    Metadata for all topics (from broker 1: localhost:9092/1):
     1 brokers:
      broker 1 at localhost:9092 (controller)
     1 topics:
      topic "orders" with 2 partitions:
        partition 0, leader 1, replicas: 1, isrs: 1

The first line says where the answer came from: ``broker N: host:port/N`` when the bootstrap
address is one the broker advertises, ``-1: host:port/bootstrap`` when it is not — the case
where clients connect fine and then fail, because everything after bootstrap goes to the
advertised addresses listed under "brokers". With ``--address-map``, each rewritten broker
line also says which address a client would connect to instead.

Only the bootstrap broker is contacted; ``moldau doctor`` checks every advertised address.
Unlike kcat, asking for a topic that does not exist does not create it.

``--cluster`` adds what kcat does not show: the cluster id, the active controller, offline
replicas per partition, partitions without a leader marked OFFLINE and their count.
``--zookeeper HOST:PORT[/chroot]`` (implies ``--cluster``) also reads the brokers'
registrations (``/brokers/ids/<id>``, read-only), which list the endpoints of every listener
of every broker — a client sees only the listener it connected to — and ``/controller``.
Without these flags the text and JSON stay kcat's, byte for byte.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from moldau.client import AddressMap
from moldau.doctor import Registration, ZkView
from moldau.doctor.zookeeper import read_zookeeper
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode

from .common import (
    CliError,
    add_connection_options,
    add_tool_parser,
    open_bootstrap,
    require_bootstrap,
    run,
)

# librdkafka's rd_kafka_err2str() texts for errors a Metadata answer carries, so error lines
# match kcat's ("Broker: Leader not available").
_RDKAFKA_TEXT = {
    ErrorCode.unknown_topic_or_partition: "Unknown topic or partition",
    ErrorCode.leader_not_available: "Leader not available",
    ErrorCode.not_leader_or_follower: "Not leader for partition",
    ErrorCode.replica_not_available: "Replica not available",
    ErrorCode.invalid_topic_exception: "Invalid topic",
    ErrorCode.topic_authorization_failed: "Topic authorization failed",
    ErrorCode.unknown_server_error: "Unknown error",
    ErrorCode.kafka_storage_error: "Disk error when trying to access log file on the disk",
}


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_tool_parser(
        subparsers, "metadata", help="list brokers, topics and partitions (like kcat -L)",
        description="List the brokers, topics and partitions of a cluster as the bootstrap "
                    "broker describes them, in kcat -L's format. The broker lines show the "
                    "addresses the brokers advertise: the ones every client connects to after "
                    "bootstrap. The first line names the broker that answered: 'N: host:port/N' "
                    "when the bootstrap address is one the broker advertises, "
                    "'-1: host:port/bootstrap' when it is not.",
        epilog="examples:\n  moldau metadata -b localhost:9092\n"
               "  moldau metadata -b localhost:9092 -t orders --json\n"
               "  moldau metadata -b localhost:9092 --cluster\n"
               "  moldau metadata -b localhost:9092 --zookeeper zk1:2181/moldau\n"
               "  moldau metadata -b 203.0.113.7:9092 --address-map '10.0.0.5:9092=203.0.113.7"
               ":9092'",
    )
    add_connection_options(parser)
    parser.add_argument("-t", "--topic", help="describe only this topic")
    parser.add_argument("-J", "--json", action="store_true",
                        help="print JSON (the layout of kcat -L -J)")
    parser.add_argument("--cluster", action="store_true",
                        help="also show the cluster id, the active controller, offline "
                             "replicas, and partitions without a leader (OFFLINE) with their "
                             "count")
    parser.add_argument("--zookeeper", metavar="HOST:PORT[,...][/CHROOT]",
                        help="read the brokers' registrations from ZooKeeper (read-only; the "
                             "brokers' zookeeper.connect) to list every listener of every "
                             "broker and the controller; implies --cluster")
    parser.add_argument("-L", action="store_true", help=argparse.SUPPRESS)  # kcat habit
    parser.set_defaults(func=main)


def error_text(code: int) -> str:
    """``Broker: <description>`` as librdkafka words a broker error code."""
    try:
        error = ErrorCode(code)
    except ValueError:
        return f"Broker: Unknown error code {code}"
    text = _RDKAFKA_TEXT.get(error) or error.name.replace("_", " ").capitalize()
    return f"Broker: {text}"


def _address(host: str, port: int) -> str:
    return f"{host}:{port}"


async def fetch(args: argparse.Namespace) -> dict[str, Any]:
    """Ask the first reachable bootstrap server for metadata; a plain-data listing."""
    conn = await open_bootstrap(args)
    try:
        version = conn.versions.require(ApiKey.METADATA, 1, what="metadata listing")
        response = await conn.request(ApiKey.METADATA, {
            "topics": None if args.topic is None else [{"name": args.topic, "topic_id": None}],
            "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        }, version=version)
    finally:
        conn.close()
        await conn.wait_closed()
    brokers = [(b.node_id, b.host, b.port) for b in response.brokers]
    origin_id = -1
    for node_id, host, port in brokers:
        if (host.lower(), port) == (conn.host.lower(), conn.port):
            origin_id = node_id
    origin = _address(conn.host, conn.port) + (f"/{origin_id}" if origin_id >= 0
                                               else "/bootstrap")
    return {
        "origin_id": origin_id,
        "origin": origin,
        "cluster_id": getattr(response, "cluster_id", None),
        "offline_replicas": {(t.name, p.partition_index): list(getattr(p, "offline_replicas",
                                                                        None) or [])
                             for t in response.topics for p in t.partitions},
        "controller_id": getattr(response, "controller_id", -1),
        "brokers": brokers,
        "topics": [
            (t.name, int(t.error_code), [
                (p.partition_index, int(p.leader_id), list(p.replica_nodes), list(p.isr_nodes),
                 int(p.error_code))
                for p in t.partitions
            ])
            for t in response.topics
        ],
    }


def _offline(meta: dict[str, Any], name: str, index: int) -> list[int]:
    return list(meta.get("offline_replicas", {}).get((name, index), []))


def _is_offline(leader: int, error: int) -> bool:
    # A leader without an endpoint on this listener (LISTENER_NOT_FOUND) still serves the
    # clients of its own listeners: not offline.
    return leader < 0 and error != ErrorCode.listener_not_found


def offline_partitions(meta: dict[str, Any]) -> list[tuple[str, int]]:
    """(topic, partition) of every partition without a leader."""
    return [(name, index) for name, _error, partitions in meta["topics"]
            for index, leader, _r, _i, perror in partitions if _is_offline(leader, perror)]


def active_controller(meta: dict[str, Any], zk: ZkView | None) -> int:
    """``/controller`` when ZooKeeper was read (the Metadata answer names the answering
    broker when the controller has no endpoint on this listener), else Metadata's id."""
    if zk is not None and not zk.error:
        return -1 if zk.controller_id is None else zk.controller_id
    return int(meta["controller_id"])


def _unlisted(meta: dict[str, Any], zk: ZkView | None) -> list[Registration]:
    """Registered brokers the answering broker left out (no endpoint on this listener)."""
    if zk is None or zk.error:
        return []
    listed = {node_id for node_id, _h, _p in meta["brokers"]}
    return [r for r in zk.registrations if r.broker_id not in listed]


def _listeners(reg: Registration) -> str:
    text = ", ".join(str(e) for e in reg.endpoints) or "no endpoints"
    if reg.rack:
        text += f", rack {reg.rack}"
    if reg.problem:
        text += f" ({reg.problem})"
    return text


def format_listing(meta: dict[str, Any], topic: str | None, address_map: AddressMap, *,
                   cluster: bool = False, zk: ZkView | None = None) -> str:
    """The listing in kcat -L's text format; ``cluster`` adds the cluster id, controller,
    offline replicas and offline partitions, ``zk`` every listener of every broker."""
    cluster = cluster or zk is not None
    controller = active_controller(meta, zk) if cluster else meta["controller_id"]
    lines = [f"Metadata for {topic or 'all topics'} (from broker {meta['origin_id']}: "
             f"{meta['origin']}):"]
    if cluster:
        active = f"broker {controller}" if controller >= 0 else "NONE (no active controller)"
        lines.append(f" cluster id: {meta.get('cluster_id') or '?'}, controller: {active}")
        if zk is not None and zk.error:
            lines.append(f" ZooKeeper not read: {zk.error}")
    lines.append(f" {len(meta['brokers'])} brokers:")
    for node_id, host, port in meta["brokers"]:
        line = f"  broker {node_id} at {_address(host, port)}"
        if node_id == controller:
            line += " (controller)"
        mapped = address_map.apply(host, port)
        if mapped != (host, port):
            line += f"  -> connect via {_address(*mapped)} (--address-map)"
        lines.append(line)
        reg = zk.registration(node_id) if zk is not None and not zk.error else None
        if reg is not None:
            lines.append(f"      listeners: {_listeners(reg)}")
    for reg in _unlisted(meta, zk):
        marker = " (controller)" if reg.broker_id == controller else ""
        lines.append(f"  broker {reg.broker_id}{marker} registered, not on this listener")
        lines.append(f"      listeners: {_listeners(reg)}")
    lines.append(f" {len(meta['topics'])} topics:")
    for name, error, partitions in meta["topics"]:
        line = f'  topic "{name}" with {len(partitions)} partitions:'
        if error:
            line += " " + error_text(error)
            if error == ErrorCode.leader_not_available:
                line += " (try again)"
        lines.append(line)
        for index, leader, replicas, isrs, perror in partitions:
            line = (f"    partition {index}, leader {leader}, replicas: "
                    f"{','.join(map(str, replicas))}, isrs: {','.join(map(str, isrs))}")
            offline = _offline(meta, name, index)
            if cluster and offline:
                line += f", offline replicas: {','.join(map(str, offline))}"
            if perror:
                line += ", " + error_text(perror)
            if cluster and _is_offline(leader, perror):
                line += " (OFFLINE)"
            lines.append(line)
    if cluster:
        lines.append(f" {len(offline_partitions(meta))} offline partitions (no leader)")
    return "\n".join(lines) + "\n"


def format_json(meta: dict[str, Any], topic: str | None, address_map: AddressMap, *,
                cluster: bool = False, zk: ZkView | None = None) -> str:
    """The listing in kcat -L -J's JSON layout; ``cluster``/``zk`` add keys to it (never
    change kcat's): ``clusterid``, ``controller``, per partition ``offline_replicas`` and
    ``offline``, ``offline_partitions`` (with their count) and per broker ``listeners``."""
    cluster = cluster or zk is not None
    registered = zk is not None and not zk.error
    brokers = []
    for node_id, host, port in meta["brokers"]:
        entry: dict[str, Any] = {"id": node_id, "name": _address(host, port)}
        mapped = address_map.apply(host, port)
        if mapped != (host, port):
            entry["connect"] = _address(*mapped)
        reg = zk.registration(node_id) if zk is not None and registered else None
        if reg is not None:
            entry["listeners"] = [str(e) for e in reg.endpoints]
            if reg.rack:
                entry["rack"] = reg.rack
        brokers.append(entry)
    topics = []
    for name, error, partitions in meta["topics"]:
        entry = {"topic": name}
        if error:
            entry["error"] = error_text(error)
        parts = []
        for index, leader, replicas, isrs, perror in partitions:
            part: dict[str, Any] = {"partition": index}
            if perror:
                part["error"] = error_text(perror)
            part.update({"leader": leader, "replicas": [{"id": r} for r in replicas],
                         "isrs": [{"id": r} for r in isrs]})
            if cluster:
                part["offline_replicas"] = [{"id": r} for r in _offline(meta, name, index)]
                part["offline"] = _is_offline(leader, perror)
            parts.append(part)
        entry["partitions"] = parts
        topics.append(entry)
    doc: dict[str, Any] = {
        "originating_broker": {"id": meta["origin_id"], "name": meta["origin"]},
        "query": {"topic": topic or "*"},
        "controllerid": meta["controller_id"],
        "brokers": brokers,
        "topics": topics,
    }
    if cluster:
        offline = offline_partitions(meta)
        doc.update({
            "clusterid": meta.get("cluster_id"),
            "controller": active_controller(meta, zk),
            "offline_partition_count": len(offline),
            "offline_partitions": [{"topic": t, "partition": p} for t, p in offline],
        })
    if zk is not None:
        doc["zookeeper"] = {
            "connect": zk.connect, "error": zk.error or None, "clusterid": zk.cluster_id,
            "controller": zk.controller_id,
            "brokers": [{"id": r.broker_id, "listeners": [str(e) for e in r.endpoints],
                         "rack": r.rack, **({"problem": r.problem} if r.problem else {})}
                        for r in zk.registrations],
        }
    return json.dumps(doc, separators=(",", ":")) + "\n"


def main(args: argparse.Namespace) -> int:
    async def go() -> int:
        require_bootstrap(args)
        try:
            address_map = AddressMap.parse(args.address_map)
        except ValueError as exc:
            raise CliError(f"--address-map: {exc}", 2) from None
        zk_job = (asyncio.ensure_future(asyncio.to_thread(read_zookeeper, args.zookeeper,
                                                          args.timeout))
                  if args.zookeeper else None)
        meta = await fetch(args)
        zk = await zk_job if zk_job is not None else None
        out = (format_json if args.json else format_listing)(
            meta, args.topic, address_map, cluster=args.cluster, zk=zk)
        sys.stdout.write(out)
        sys.stdout.flush()
        if zk is not None and zk.error:
            raise CliError(f"--zookeeper: {zk.error}")
        return 1 if args.topic and any(t[1] for t in meta["topics"]) else 0

    return run(go, "moldau metadata")
