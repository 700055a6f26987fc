"""``broker.address.map``: rewrite broker addresses the cluster advertises.

A broker behind NAT advertises an address (``10.10.0.11:9092``) that a client outside cannot
reach; the client can reach a translated one (``203.0.113.11:9092``). Kafka's Java client has
no setting for this (people patch ``Metadata`` and ``AbstractCoordinator``); here it is a
setting applied to every broker address the client learns: Metadata brokers, FindCoordinator
answers and DescribeCluster brokers. Bootstrap addresses are the user's own and are not mapped.

Syntax, comma separated entries of ``ADVERTISED=REACHABLE``::

    10.10.0.11:9092=203.0.113.11:9092   exact host and port
    10.10.0.11:9092=gw.example.com       exact host and port, port kept
    10.10.0.12=203.0.113.12              any port of that host, port kept

IPv6 literals go in brackets: ``[fd00::1]:9092=[2001:db8::1]:19092``. Host names compare
case-insensitively. An exact ``host:port`` entry wins over a host-only entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .errors import ConfigError

_EXPECTED = (
    "expected ADVERTISED=REACHABLE, each side host:port or host "
    "(e.g. 10.10.0.11:9092=203.0.113.11:9092 or 10.10.0.12=203.0.113.12)"
)


def _split_host_port(text: str, entry: str) -> tuple[str, int | None]:
    """Split ``host``, ``host:port``, ``[v6]`` or ``[v6]:port``; port None when absent."""
    text = text.strip()
    if not text:
        raise ConfigError(f"broker.address.map entry {entry!r} has an empty side; {_EXPECTED}")
    if text.startswith("["):
        close = text.find("]")
        if close < 0:
            raise ConfigError(
                f"broker.address.map entry {entry!r}: unclosed '[' in {text!r}; {_EXPECTED}"
            )
        host, rest = text[1:close], text[close + 1 :]
        if not host:
            raise ConfigError(f"broker.address.map entry {entry!r}: empty host in {text!r}")
        if not rest:
            return host.lower(), None
        if not rest.startswith(":"):
            raise ConfigError(
                f"broker.address.map entry {entry!r}: unexpected {rest!r} after {text[:close+1]!r}"
            )
        port_text = rest[1:]
    else:
        if text.count(":") > 1:
            raise ConfigError(
                f"broker.address.map entry {entry!r}: {text!r} looks like an IPv6 address; "
                "write it in brackets, e.g. [fd00::1]:9092"
            )
        host, sep, port_text = text.partition(":")
        if not host:
            raise ConfigError(f"broker.address.map entry {entry!r}: empty host in {text!r}")
        if not sep:
            return host.lower(), None
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ConfigError(
            f"broker.address.map entry {entry!r}: port {port_text!r} in {text!r} is not a "
            "number between 1 and 65535"
        )
    return host.lower(), int(port_text)


def _format(host: str, port: int | None) -> str:
    shown = f"[{host}]" if ":" in host else host
    return shown if port is None else f"{shown}:{port}"


@dataclass(frozen=True)
class AddressMap:
    """A parsed ``broker.address.map``; :meth:`apply` rewrites one address."""

    exact: Mapping[tuple[str, int], tuple[str, int | None]] = field(default_factory=dict)
    hosts: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, spec: str | Mapping[str, str] | AddressMap | None) -> AddressMap:
        """Parse the setting (a string, or a dict of ADVERTISED -> REACHABLE)."""
        if spec is None:
            return cls()
        if isinstance(spec, AddressMap):
            return spec
        if isinstance(spec, Mapping):
            pairs = [(f"{k}={v}", str(k), str(v)) for k, v in spec.items()]
        elif isinstance(spec, str):
            pairs = []
            for raw in spec.split(","):
                entry = raw.strip()
                if not entry:
                    continue
                if entry.count("=") != 1:
                    raise ConfigError(
                        f"broker.address.map entry {entry!r} needs exactly one '='; {_EXPECTED}"
                    )
                left, right = entry.split("=")
                pairs.append((entry, left, right))
        else:
            raise ConfigError(
                f"broker.address.map must be a string or a dict, not {type(spec).__name__}"
            )
        exact: dict[tuple[str, int], tuple[str, int | None]] = {}
        hosts: dict[str, str] = {}
        for entry, left, right in pairs:
            src_host, src_port = _split_host_port(left, entry)
            dst_host, dst_port = _split_host_port(right, entry)
            if src_port is None:
                if dst_port is not None:
                    raise ConfigError(
                        f"broker.address.map entry {entry!r}: a host-only source keeps each "
                        "broker's port, so the target cannot name a port; write "
                        f"{_format(src_host, None)}:PORT={right.strip()} for each port instead"
                    )
                if hosts.get(src_host, dst_host) != dst_host:
                    raise ConfigError(
                        f"broker.address.map maps {src_host!r} twice "
                        f"(to {hosts[src_host]!r} and {dst_host!r})"
                    )
                hosts[src_host] = dst_host
            else:
                key = (src_host, src_port)
                if exact.get(key, (dst_host, dst_port)) != (dst_host, dst_port):
                    raise ConfigError(
                        f"broker.address.map maps {_format(*key)} twice "
                        f"(to {_format(*exact[key])} and {_format(dst_host, dst_port)})"
                    )
                exact[key] = (dst_host, dst_port)
        return cls(exact, hosts)

    def __bool__(self) -> bool:
        return bool(self.exact or self.hosts)

    def apply(self, host: str, port: int) -> tuple[str, int]:
        """The address to connect to for a broker that advertises ``host:port``."""
        lowered = host.lower()
        target = self.exact.get((lowered, port))
        if target is not None:
            new_host, new_port = target
            return new_host, port if new_port is None else new_port
        mapped = self.hosts.get(lowered)
        if mapped is not None:
            return mapped, port
        return host, port

    def __str__(self) -> str:
        items = [f"{_format(*src)}={_format(*dst)}" for src, dst in self.exact.items()]
        items += [f"{_format(src, None)}={_format(dst, None)}" for src, dst in self.hosts.items()]
        return ",".join(items)
