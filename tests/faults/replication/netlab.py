"""Each broker in a network namespace of its own, for the ``partition-leader`` fault.

SAFETY RULE (/work/shared/FACTS.md, tests/net/README.md): nothing here runs in the machine's
network namespace. ``python -m tests.faults.replication --netns`` re-executes itself with
``unshare --net --mount`` (:func:`reexec_private`), and :class:`FaultLab` builds on
:class:`tests.net.lab.Lab`, whose constructor refuses (``UnsafeEnvironment``) unless the
process is in such a private namespace holding only ``lo``. Inside it:

- a bridge ``br0`` in a lab namespace ``net``, subnet 10.77.0.0/24 (exists only in the lab);
- the runner's own (private) namespace joined to it as 10.77.0.2: ZooKeeper's three nodes
  bind that address, and the runner's producers, consumers and kazoo client use it;
- broker ``i`` in lab namespace ``b<i>`` as 10.77.0.(10+i), started through a tiny wrapper
  ``ip netns exec <ns> python ...`` (``ip netns exec`` execs, so the broker's pid is the
  wrapper's and kill -9 / SIGSTOP reach it).

:meth:`FaultLab.isolate` cuts broker ``i`` off from the other brokers, and only from them:
an nftables table in its namespace drops every packet to or from their addresses (a drop,
not a reject, so connections hang as in a real partition); ZooKeeper and the clients, at
10.77.0.2, still reach it. :meth:`FaultLab.heal` deletes the table.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from moldau.devtools.brokers import BrokerNode
from moldau.testing.cluster import BrokerCluster
from tests.net.lab import INNER_ENV, OUTER_MNT_ENV, OUTER_NET_ENV, Lab, _ns_inode, sh

__all__ = ["FaultLab", "LabBrokerCluster", "reexec_private"]

SUBNET = "10.77.0"
TABLE = "moldau_partition"


def reexec_private(argv: Sequence[str]) -> int:
    """Run ``python -m tests.faults.replication ARGV`` again inside a fresh network and mount
    namespace (as tests/net/lab.py's ``netlab`` does for a test); its exit status."""
    command = ["unshare", "--net", "--mount", "--propagation", "private"]
    if os.geteuid() != 0:
        command.append("--map-root-user")
    env = dict(os.environ)
    env[INNER_ENV] = "1"
    env[OUTER_NET_ENV] = str(_ns_inode("net"))
    env[OUTER_MNT_ENV] = str(_ns_inode("mnt"))
    command += ["--", sys.executable, "-m", "tests.faults.replication", *argv]
    return subprocess.call(command, env=env, cwd=Path(__file__).resolve().parents[3])


class FaultLab:
    """The lab of one run: see the module docstring."""

    def __init__(self, brokers: int, work_dir: Path) -> None:
        self.lab = Lab()  # refuses outside a private namespace
        self.host = f"{SUBNET}.2"
        try:
            self.net = self.lab.netns("net")
            self.lab.bridge(self.net, "br0", None)
            # the runner's own namespace (private, made by unshare) joins the bridge
            port = f"{self.lab.prefix[-8:]}c"
            sh("ip", "link", "add", "ctl0", "type", "veth", "peer", "name", port,
               "netns", self.net.name)
            sh("ip", "addr", "add", f"{self.host}/24", "dev", "ctl0")
            sh("ip", "link", "set", "ctl0", "up")
            self.net.ip("link", "set", port, "master", "br0")
            self.net.ip("link", "set", port, "up")
            self.namespaces = {}
            self.pythons = {}
            work_dir.mkdir(parents=True, exist_ok=True)
            for i in range(1, brokers + 1):
                ns = self.lab.netns(f"b{i}")
                self.lab.attach(self.net, "br0", ns, "eth0", f"{self.broker_host(i)}/24")
                self.namespaces[i] = ns
                wrapper = work_dir / f"python-in-b{i}"
                wrapper.write_text(f"#!/bin/sh\nexec ip netns exec {ns.name} "
                                   f"{sys.executable} \"$@\"\n")
                wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
                self.pythons[i] = str(wrapper)
        except BaseException:
            self.lab.close()
            raise
        self.isolated: set[int] = set()

    @staticmethod
    def broker_host(broker_id: int) -> str:
        return f"{SUBNET}.{10 + broker_id}"

    def isolate(self, broker_id: int) -> list[str]:
        """Drop everything between broker ``broker_id`` and the other brokers."""
        others = sorted(self.broker_host(i) for i in self.namespaces if i != broker_id)
        addresses = ", ".join(others)
        self.namespaces[broker_id].nft(
            f"table inet {TABLE} {{\n"
            f"  chain input {{ type filter hook input priority 0; "
            f"ip saddr {{ {addresses} }} drop; }}\n"
            f"  chain output {{ type filter hook output priority 0; "
            f"ip daddr {{ {addresses} }} drop; }}\n"
            f"}}\n")
        self.isolated.add(broker_id)
        return others

    def heal(self, broker_id: int) -> None:
        if broker_id in self.isolated:
            self.namespaces[broker_id].nft(f"delete table inet {TABLE}\n")
            self.isolated.discard(broker_id)

    def heal_all(self) -> None:
        for broker_id in sorted(self.isolated):
            self.heal(broker_id)

    def close(self) -> None:
        self.lab.close()


class LabBrokerCluster(BrokerCluster):
    """A :class:`BrokerCluster` whose broker ``i`` runs in the lab's namespace ``b<i>``."""

    def __init__(self, *args: Any, pythons: dict[int, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pythons = pythons

    def start(self, timeout: float = 120.0) -> LabBrokerCluster:
        """:meth:`LocalCluster.start` with an existing ZooKeeper, each broker's process
        started by its namespace's wrapper."""
        self.base_dir.mkdir(parents=True, exist_ok=True)
        try:
            connect = self.zookeeper_connect
            self.brokers = {
                spec.broker_id: BrokerNode(spec, self.base_dir, connect, style=self.style,
                                           defaults=self.defaults, isolate=self.isolate,
                                           python=self.pythons[spec.broker_id])
                for spec in self.specs
            }
            self._start_brokers(list(self.brokers.values()), timeout)
            self.wait_registered(timeout=timeout)
        except BaseException:
            self.stop()
            raise
        return self
