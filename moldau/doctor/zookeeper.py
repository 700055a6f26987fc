"""Reading a cluster's registrations from ZooKeeper, read-only, as ``zkCli.sh get`` would.

A client sees brokers only through the listener it connected to; the registrations under
``/brokers/ids`` list the endpoints of every listener of every live broker, which is where a
Kafka operator looks (``zookeeper-shell.sh ... get /brokers/ids/1``). ``moldau metadata
--zookeeper`` and ``moldau doctor --zookeeper`` read ``/cluster/id``, ``/controller`` and
``/brokers/ids/*`` with kazoo and never write.

The znode JSON is decoded here rather than with ``moldau.broker.zk.layout`` because tools
may not import the broker (tests/unit/test_layers.py) and because the contract differs: the
broker's decoder refuses data Kafka would refuse, while a diagnostic tool must show whatever
it finds and say what it could not read. tests/unit/doctor/test_cluster.py decodes the
broker's own encoder's output with this module, so the two cannot drift apart.
"""

from __future__ import annotations

import json
import logging
import re
import warnings
from typing import Any

from .model import ListenerEntry, Registration, ZkView

# kazoo logs every failed connection attempt; the tool reports the outcome once, in ZkView.error.
_QUIET = logging.getLogger("moldau.doctor.kazoo")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False

_ENDPOINT = re.compile(r"([^:/]+)://\[?([0-9a-zA-Z\-%._:]*?)\]?:(-?[0-9]+)")


def decode_registration(data: bytes | None, broker_id: int) -> Registration:
    """``/brokers/ids/<id>`` JSON (versions 1-5) as a :class:`Registration`; never raises."""
    try:
        obj: Any = json.loads(data or b"")
    except (ValueError, UnicodeDecodeError) as exc:
        return Registration(broker_id, problem=f"not JSON: {exc}")
    if not isinstance(obj, dict):
        return Registration(broker_id, problem=f"not a JSON object: {obj!r}")
    rack = obj.get("rack") if isinstance(obj.get("rack"), str) else None
    raw = obj.get("endpoints")
    if not isinstance(raw, list):
        # Version 1 had only host and port, on the PLAINTEXT protocol.
        host, port = obj.get("host"), obj.get("port")
        if isinstance(host, str) and isinstance(port, int):
            return Registration(broker_id, (ListenerEntry("PLAINTEXT", host, port),), rack)
        return Registration(broker_id, rack=rack, problem="no 'endpoints' list")
    endpoints = []
    unreadable = []
    for text in raw:
        match = _ENDPOINT.fullmatch(text) if isinstance(text, str) else None
        if match is None:
            unreadable.append(repr(text))
            continue
        endpoints.append(ListenerEntry(match[1].upper(), match[2], int(match[3])))
    problem = f"unreadable endpoint(s) {', '.join(unreadable)}" if unreadable else ""
    return Registration(broker_id, tuple(endpoints), rack, problem)


def _text(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", "replace")


def read_zookeeper(connect: str, timeout_s: float = 5.0) -> ZkView:
    """``/cluster/id``, ``/controller`` and every ``/brokers/ids/<id>`` under ``connect``
    (``host:port[,host:port...][/chroot]``, the brokers' ``zookeeper.connect``). Blocking;
    failures come back as :attr:`ZkView.error` in plain words."""
    from kazoo.client import KazooClient
    from kazoo.exceptions import KazooException, NoNodeError
    from kazoo.handlers.threading import KazooTimeoutError

    client = KazooClient(hosts=connect, timeout=timeout_s, read_only=True,
                         connection_retry={"max_tries": 1, "delay": 0.2}, logger=_QUIET)
    try:
        # kazoo warns about a missing chroot; the error below says it in the tool's words
        warnings.filterwarnings("ignore", "No chroot path exists", UserWarning)
        try:
            client.start(timeout=timeout_s)
        except KazooTimeoutError:
            return ZkView(connect, error=f"cannot connect to ZooKeeper at {connect} within "
                                         f"{timeout_s:g} s (--timeout): is it running, and "
                                         "is the host:port list right?")
        try:
            ids = sorted(int(c) for c in client.get_children("/brokers/ids") if c.isdigit())
        except NoNodeError:
            return ZkView(connect, error=f"no /brokers/ids under {connect}: no Kafka cluster "
                                         "registers there; check the chroot (the part after "
                                         "the last port, e.g. /moldau) against the brokers' "
                                         "zookeeper.connect")
        registrations = []
        for broker_id in ids:
            try:
                data, _stat = client.get(f"/brokers/ids/{broker_id}")
            except NoNodeError:
                continue  # its session ended between the listing and the read
            registrations.append(decode_registration(data, broker_id))
        return ZkView(connect, _cluster_id(client), _controller(client), tuple(registrations))
    except (KazooException, KazooTimeoutError) as exc:
        return ZkView(connect, error=f"reading ZooKeeper at {connect} failed: "
                                     f"{type(exc).__name__} {exc}".strip())
    finally:
        client.stop()
        client.close()


def _json_field(client: Any, path: str, key: str, kind: type) -> Any:
    """``key`` of the JSON object in znode ``path``, when it is there and of ``kind``."""
    from kazoo.exceptions import NoNodeError

    try:
        data, _stat = client.get(path)
        value = json.loads(_text(data)).get(key)
    except (NoNodeError, ValueError, AttributeError):
        return None
    return value if isinstance(value, kind) else None


def _cluster_id(client: Any) -> str | None:
    return _json_field(client, "/cluster/id", "id", str)


def _controller(client: Any) -> int | None:
    return _json_field(client, "/controller", "brokerid", int)


__all__ = ["decode_registration", "read_zookeeper"]
