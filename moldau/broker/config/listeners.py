"""Kafka's listener model: parsing and validating listeners and advertised listeners.

Pure functions. Rules (and messages) follow Kafka's KafkaConfig validation:

* ``listeners`` entries are ``NAME://host:port``; names and ports must be distinct.
* ``advertised.listeners`` defaults to ``listeners`` minus controller listeners; its names
  must be a subset of the listener names; it may not advertise 0.0.0.0; an empty host means
  the machine's canonical host name.
* every listener name needs a security protocol in ``listener.security.protocol.map``.
* ``inter.broker.listener.name`` (or the listener for ``security.inter.broker.protocol``)
  must be an advertised listener; setting both keys is an error.
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass

from .types import ConfigError

SUPPORTED_PROTOCOLS = ("PLAINTEXT",)
KNOWN_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

_LISTENER_RE = re.compile(r"^(?P<name>[A-Za-z0-9_\-]+)://(?P<host>\[[^\]]*\]|[^:/]*):(?P<port>-?\d+)$")


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One listener: a name, a host (empty = all interfaces), a port and its protocol."""

    name: str
    host: str
    port: int
    protocol: str = "PLAINTEXT"

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


def parse_protocol_map(key: str, raw: str) -> dict[str, str]:
    """Parse ``NAME:PROTOCOL,...``."""
    mapping: dict[str, str] = {}
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name or not protocol:
            raise ConfigError(
                f"Invalid value {raw!r} for configuration {key}: entry {item!r} is not of "
                f"the form NAME:PROTOCOL (e.g. INTERNAL:PLAINTEXT)"
            )
        if protocol not in KNOWN_PROTOCOLS:
            raise ConfigError(
                f"Invalid value {raw!r} for configuration {key}: {protocol!r} is not a "
                f"security protocol; expected one of {', '.join(KNOWN_PROTOCOLS)}"
            )
        if name in mapping:
            raise ConfigError(
                f"Invalid value {raw!r} for configuration {key}: listener name {name} "
                f"appears twice"
            )
        mapping[name] = protocol
    return mapping


def parse_listeners(
    key: str, raw: str, protocol_map: dict[str, str], *, distinct_ports: bool
) -> list[Endpoint]:
    """Parse a ``listeners``/``advertised.listeners`` value into endpoints."""
    endpoints: list[Endpoint] = []
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        match = _LISTENER_RE.match(item)
        if match is None:
            raise ConfigError(
                f"Invalid value {raw!r} for configuration {key}: {item!r} is not of the form "
                f"NAME://host:port (e.g. PLAINTEXT://localhost:9092, INTERNAL://:19092)"
            )
        name = match["name"].upper()
        host = match["host"].strip("[]")
        port = int(match["port"])
        if not 0 <= port <= 65535:
            raise ConfigError(
                f"Invalid value {raw!r} for configuration {key}: port {port} of listener "
                f"{name} is outside 0-65535"
            )
        protocol = protocol_map.get(name)
        if protocol is None:
            raise ConfigError(
                f"Invalid value {raw!r} for configuration {key}: no security protocol is "
                f"defined for listener {name}. Add {name}:PLAINTEXT to "
                f"listener.security.protocol.map"
            )
        if protocol not in SUPPORTED_PROTOCOLS:
            raise ConfigError(
                f"Invalid value {raw!r} for configuration {key}: listener {name} uses "
                f"{protocol}, which Moldau does not support yet; use PLAINTEXT"
            )
        endpoints.append(Endpoint(name, host, port, protocol))
    names = [e.name for e in endpoints]
    for name in set(names):
        if names.count(name) > 1:
            raise ConfigError(
                f"Invalid value {raw!r} for configuration {key}: each listener must have a "
                f"different name; {name} appears {names.count(name)} times"
            )
    if distinct_ports:
        ports = [e.port for e in endpoints if e.port != 0]
        for port in set(ports):
            if ports.count(port) > 1:
                raise ConfigError(
                    f"Invalid value {raw!r} for configuration {key}: each listener must have "
                    f"a different port; {port} is used {ports.count(port)} times"
                )
    return endpoints


def canonical_host_name() -> str:
    """The machine's canonical host name, Kafka's choice for an empty advertised host."""
    return socket.getfqdn()


@dataclass(frozen=True)
class ListenerConfig:
    """Validated listener settings of one broker."""

    listeners: list[Endpoint]
    advertised: list[Endpoint]
    protocol_map: dict[str, str]
    inter_broker_listener: str
    controller_listeners: list[str]

    def advertised_for(self, name: str) -> Endpoint | None:
        for endpoint in self.advertised:
            if endpoint.name == name:
                return endpoint
        return None


def resolve_listener_config(
    *,
    listeners: str,
    advertised: str | None,
    protocol_map_raw: str,
    inter_broker_listener: str | None,
    inter_broker_protocol: str,
    inter_broker_protocol_explicit: bool,
    controller_listener_names: list[str],
) -> ListenerConfig:
    """Validate the listener keys together and resolve defaults."""
    protocol_map = parse_protocol_map("listener.security.protocol.map", protocol_map_raw)
    bound = parse_listeners("listeners", listeners, protocol_map, distinct_ports=True)
    if not bound:
        raise ConfigError(
            f"Invalid value {listeners!r} for configuration listeners: at least one listener "
            f"is needed, e.g. PLAINTEXT://localhost:9092"
        )
    controllers = [name.upper() for name in controller_listener_names]
    if advertised is None:
        adv = [
            Endpoint(e.name, e.host or canonical_host_name(), e.port, e.protocol)
            for e in bound
            if e.name not in controllers
        ]
        # 0.0.0.0 in listeners means "bind everything"; advertise the host name instead.
        adv = [
            Endpoint(e.name, canonical_host_name(), e.port, e.protocol)
            if e.host in ("0.0.0.0", "::")
            else e
            for e in adv
        ]
    else:
        adv = parse_listeners("advertised.listeners", advertised, protocol_map,
                              distinct_ports=False)
        bound_names = {e.name for e in bound}
        fixed = []
        for e in adv:
            if e.name not in bound_names:
                raise ConfigError(
                    f"Invalid value {advertised!r} for configuration advertised.listeners: "
                    f"listener {e.name} is not in listeners ({listeners}); advertised listener "
                    f"names must be equal to or a subset of the ones defined in listeners"
                )
            if e.host in ("0.0.0.0", "::"):
                raise ConfigError(
                    f"Invalid value {advertised!r} for configuration advertised.listeners: "
                    f"{e} uses the non-routable meta-address {e.host}; advertise a host name "
                    f"or IP address clients can reach, e.g. {e.name}://broker1.example.com:"
                    f"{e.port}"
                )
            fixed.append(e if e.host else Endpoint(e.name, canonical_host_name(), e.port,
                                                  e.protocol))
        adv = fixed
    if inter_broker_listener is not None and inter_broker_protocol_explicit:
        raise ConfigError(
            "Only one of inter.broker.listener.name and security.inter.broker.protocol should "
            "be set; remove security.inter.broker.protocol"
        )
    if inter_broker_listener is None:
        inter = inter_broker_protocol.upper()
    else:
        inter = inter_broker_listener.strip().upper()
    adv_names = {e.name for e in adv}
    if inter not in adv_names:
        key = (
            "inter.broker.listener.name"
            if inter_broker_listener is not None
            else "security.inter.broker.protocol"
        )
        raise ConfigError(
            f"Invalid value {inter!r} for configuration {key}: it must be a listener name "
            f"defined in advertised.listeners ({', '.join(sorted(adv_names)) or 'none'}); set "
            f"inter.broker.listener.name to one of them"
        )
    for name in controllers:
        if name not in {e.name for e in bound}:
            raise ConfigError(
                f"Invalid value {name!r} for configuration controller.listener.names: it is "
                f"not a listener in listeners ({listeners})"
            )
    return ListenerConfig(bound, adv, protocol_map, inter, controllers)
