"""A real ZooKeeper (Debian's package, as :mod:`moldau.devtools.zookeeper` runs it) inside a
lab namespace, serving the namespace's own network address instead of 127.0.0.1.

The test process sits in the private namespace that holds only ``lo``, outside every lab
network, so it cannot ask the server ``srvr`` itself: the wait for the server runs inside the
ZooKeeper's namespace (``ip netns exec``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from moldau.devtools.zookeeper import ZooKeeperEnsemble, ZooKeeperNode, ZooKeeperUnavailable

from .lab import Lab, Netns

# Runs inside the namespace: poll ``srvr`` until the server says its mode.
_WAIT = """\
import sys, time
from moldau.devtools.zookeeper import server_mode
host, port, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
deadline = time.monotonic() + timeout
while time.monotonic() < deadline:
    mode = server_mode(port, host, timeout=1.0)
    if mode is not None:
        print(mode)
        sys.exit(0)
    time.sleep(0.1)
sys.exit(1)
"""


class LabZooKeeper(ZooKeeperEnsemble):
    """A standalone ZooKeeper in ``ns`` on ``host:port`` (``with LabZooKeeper(...) as zk``).

    The process is started with ``ip netns exec`` through the lab, so :meth:`Lab.close`
    stops it like every other lab process.
    """

    def __init__(self, lab: Lab, ns: Netns, host: str, port: int = 2181) -> None:
        super().__init__(1, lab.tmp / f"{ns.role}-zookeeper", client_ports=[port])
        self.lab = lab
        self.ns = ns
        self.host = host

    @property
    def connect_string(self) -> str:
        return ",".join(f"{self.host}:{node.client_port}" for node in self.nodes)

    def _config_text(self, node: ZooKeeperNode) -> str:
        text = super()._config_text(node)
        assert "clientPortAddress=127.0.0.1\n" in text, text
        return text.replace("clientPortAddress=127.0.0.1\n", f"clientPortAddress={self.host}\n")

    def _spawn(self, node: ZooKeeperNode) -> None:
        node.proc = self.lab.spawn(self.ns, self._command(node), log=node.out_path)

    def wait_serving(self, timeout: float = 60.0,
                     nodes: Iterable[ZooKeeperNode] | None = None) -> None:
        for node in list(self.nodes if nodes is None else nodes):
            probe = self.ns.run([sys.executable, "-c", _WAIT, self.host,
                                 str(node.client_port), str(timeout)], timeout=timeout + 30)
            if probe.returncode != 0:
                state = ("exited with " + str(node.proc.returncode)
                         if node.proc is not None and node.proc.poll() is not None
                         else "still running")
                raise ZooKeeperUnavailable(
                    f"ZooKeeper in {self.ns.role} not serving on {self.host}:"
                    f"{node.client_port} after {timeout:.0f} s ({state}):\n"
                    f"{probe.stderr[-2000:]}\n{node.log_tail()}")
