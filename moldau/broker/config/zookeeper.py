"""``zookeeper.connect``: the ZooKeeper ensemble a cluster node joins, parsed and checked.

The value is ZooKeeper's connect string, as Kafka takes it: a comma-separated list of
``host:port`` (the port defaults to 2181, as ZooKeeper's client does), optionally followed by
a chroot path that applies to all of them, e.g. ``zk1:2181,zk2:2181,zk3:2181/moldau``. A chroot
that does not exist yet is created when the broker connects, as Kafka does.

A bad value stops start-up with a message naming the key, the value and what is wrong,
because that is what an operator sees.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .types import bad

KEY = "zookeeper.connect"
DEFAULT_PORT = 2181


@dataclass(frozen=True)
class ZooKeeperConnect:
    """A parsed ``zookeeper.connect``: the servers and the chroot ("" for none)."""

    servers: tuple[tuple[str, int], ...]
    chroot: str = ""

    @property
    def hosts(self) -> str:
        """The server list without the chroot, ``host:port,...``."""
        return ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in self.servers)

    def __str__(self) -> str:
        return self.hosts + self.chroot


def parse_connect(text: str, key: str = KEY) -> ZooKeeperConnect:
    """Parse a ZooKeeper connect string; :class:`~.types.ConfigError` naming ``key`` and the
    value when it is not one."""
    raw = text.strip()
    if not raw:
        raise bad(key, text, "expected host:port[,host:port...][/chroot], e.g. "
                             "zk1:2181,zk2:2181,zk3:2181/moldau")
    hosts_part, slash, chroot = raw.partition("/")
    chroot = slash + chroot
    servers = []
    for item in hosts_part.split(","):
        servers.append(_server(key, text, item.strip()))
    if chroot == "/":
        chroot = ""  # ZooKeeper's client treats a lone "/" as no chroot
    if chroot:
        _check_chroot(key, text, chroot)
    return ZooKeeperConnect(tuple(servers), chroot)


def _server(key: str, text: str, item: str) -> tuple[str, int]:
    if not item:
        raise bad(key, text, "a server in the list is empty; expected "
                             "host:port[,host:port...][/chroot]")
    if item.startswith("["):  # [IPv6]:port
        host, close, rest = item[1:].partition("]")
        if not close or (rest and not rest.startswith(":")):
            raise bad(key, text, f"cannot parse server {item!r}; write IPv6 addresses as "
                                 f"[::1]:2181")
        port_text = rest[1:] if rest else ""
    else:
        host, _colon, port_text = item.partition(":")
    if not host or any(c.isspace() for c in host):
        raise bad(key, text, f"server {item!r} has no host name")
    port = DEFAULT_PORT
    if port_text:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise bad(key, text, f"server {item!r} has port {port_text!r}; expected a number "
                                 f"from 1 to 65535")
        port = int(port_text)
    return host, port


def _check_chroot(key: str, text: str, chroot: str) -> None:
    # ZooKeeper's PathUtils.validatePath: no trailing slash, no empty, "." or ".." segments.
    segments = chroot[1:].split("/")
    if chroot.endswith("/") or any(s in ("", ".", "..") for s in segments):
        raise bad(key, text, f"chroot {chroot!r} is not a valid ZooKeeper path (no empty, "
                             f"'.' or '..' parts, no trailing '/'), e.g. /moldau")
    if any(ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f for c in chroot):
        raise bad(key, text, f"chroot {chroot!r} contains a control character")


def check_connect(key: str, value: Any) -> None:
    """ConfigDef validator of ``zookeeper.connect`` (None: single-node mode)."""
    if value is not None:
        parse_connect(value, key)
