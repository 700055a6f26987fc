"""Real Apache ZooKeeper for local clusters and tests: one standalone server or an N-node ensemble.

Debian's ``zookeeper`` package (3.8) is run directly, without its init scripts::

    java -cp <node dir>:/usr/share/java/zookeeper.jar:<slf4j-log4j12>:<log4j-1.2> \\
        org.apache.zookeeper.server.quorum.QuorumPeerMain <node dir>/zoo.cfg

``zookeeper.jar``'s manifest ``Class-Path`` already names every library the server needs
(netty, jute, slf4j-api, metrics, jetty, jackson, snappy, commons-cli/io); it names no SLF4J
binding, so without the two logging jars the server logs nothing at all. Each node gets its own
directory: ``zoo.cfg``, ``log4j.properties`` (everything to ``zookeeper.log`` there), ``java.out``
(the JVM's own stdout/stderr) and ``data/`` (``myid``, snapshots, transaction logs).

Every port (client, quorum, election) is picked free on 127.0.0.1 at start; the client port binds
127.0.0.1 only (``clientPortAddress``), the AdminServer (which would bind 8080) is off, and the
four-letter words used to wait for a node (``ruok``, ``srvr``, ``stat``, ``mntr``) are
whitelisted. Nodes are stopped by their own pid, never by name.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .processes import ChildProcess, die_with_parent, free_ports

JAVA_DIR = Path("/usr/share/java")
ZOOKEEPER_JAR = JAVA_DIR / "zookeeper.jar"
#: The SLF4J 1.7 binding to log4j 1.2 that the Debian package ships but leaves off the classpath.
LOGGING_JARS = (JAVA_DIR / "slf4j-log4j12.jar", JAVA_DIR / "log4j-1.2.jar")
ZKCLI = Path("/usr/share/zookeeper/bin/zkCli.sh")
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
INSTALL_HINT = ("install Debian's zookeeper package (`apt-get install -y zookeeper`; "
                "`make test-deps` does it) and a Java runtime")

#: Small heap, serial GC and the C1 compiler only: a test server holds a few hundred znodes, and
#: on a shared 2-core machine start-up time matters more than peak throughput.
DEFAULT_JVM_OPTIONS = (
    "-Xms16m", "-Xmx192m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
    "-Djava.awt.headless=true", "-Dzookeeper.jmx.log4j.disable=true",
)

_LOG4J = """\
log4j.rootLogger=INFO, FILE
log4j.appender.FILE=org.apache.log4j.FileAppender
log4j.appender.FILE.File={log}
log4j.appender.FILE.Append=true
log4j.appender.FILE.layout=org.apache.log4j.PatternLayout
log4j.appender.FILE.layout.ConversionPattern=%d{{ISO8601}} %-5p [myid:{server_id}] [%t] - %m%n
"""


class ZooKeeperUnavailable(RuntimeError):
    """ZooKeeper is not installed, or a node did not start; the message says why and what to do."""


def java_binary() -> str:
    """The ``java`` to run ZooKeeper with: ``$JAVA_HOME/bin/java`` or the first on ``PATH``."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise ZooKeeperUnavailable(f"no `java` on PATH (and JAVA_HOME unset): {INSTALL_HINT}")
    return found


def classpath(conf_dir: Path | None = None) -> str:
    """The server's classpath: the node's config dir (for log4j.properties), ZooKeeper's jar
    (its manifest pulls in the rest) and the SLF4J-to-log4j binding."""
    missing = [str(jar) for jar in (ZOOKEEPER_JAR, *LOGGING_JARS) if not jar.exists()]
    if missing:
        raise ZooKeeperUnavailable(f"missing {', '.join(missing)}: {INSTALL_HINT}")
    parts = [str(conf_dir)] if conf_dir is not None else []
    return ":".join([*parts, str(ZOOKEEPER_JAR), *(str(jar) for jar in LOGGING_JARS)])


def installed() -> bool:
    """Whether ZooKeeper and java are on this machine (what ``install_clients`` checks)."""
    return all(jar.exists() for jar in (ZOOKEEPER_JAR, *LOGGING_JARS)) and bool(
        os.environ.get("JAVA_HOME") or shutil.which("java"))


def four_letter_word(port: int, word: str, host: str = "127.0.0.1",
                     timeout: float = 2.0) -> str:
    """Send a four-letter word (``ruok``, ``srvr``, ``stat``, ``mntr``) and return the whole
    answer ("" if the server closed without one). Raises ``OSError`` if it cannot connect."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(word.encode("ascii"))
        chunks = []
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", errors="replace")


def server_mode(port: int, host: str = "127.0.0.1", timeout: float = 2.0) -> str | None:
    """``standalone``, ``leader`` or ``follower`` when the server serves clients; None when it
    is down, still starting, or has no quorum (``srvr`` then says it is "not currently serving
    requests": ``ruok`` would say ``imok`` even then, so it cannot tell)."""
    try:
        answer = four_letter_word(port, "srvr", host, timeout)
    except OSError:
        return None
    for line in answer.splitlines():
        if line.startswith("Mode: "):
            return line.split(":", 1)[1].strip()
    return None


@dataclass
class ZooKeeperNode(ChildProcess):
    """One ZooKeeper server of an ensemble (or the standalone server), and its process
    (``pid``, ``running()``, ``wait_stopped()``, ``kill()``: :class:`~.processes.ChildProcess`)."""

    server_id: int
    node_dir: Path
    client_port: int
    quorum_port: int
    election_port: int
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    host: str = "127.0.0.1"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.client_port}"

    @property
    def data_dir(self) -> Path:
        return self.node_dir / "data"

    @property
    def config_path(self) -> Path:
        return self.node_dir / "zoo.cfg"

    @property
    def log_path(self) -> Path:
        """ZooKeeper's own log (log4j)."""
        return self.node_dir / "zookeeper.log"

    @property
    def out_path(self) -> Path:
        """The JVM's stdout and stderr (start-up failures before log4j is set up land here)."""
        return self.node_dir / "java.out"

    def mode(self) -> str | None:
        """See :func:`server_mode`."""
        return server_mode(self.client_port, self.host) if self.running() else None

    def log_tail(self, lines: int = 30) -> str:
        """The last lines of the JVM output and the ZooKeeper log, for error messages."""
        parts = []
        for path in (self.out_path, self.log_path):
            if path.exists():
                text = path.read_text(errors="replace").splitlines()[-lines:]
                parts.append(f"--- {path} ---\n" + "\n".join(text))
        return "\n".join(parts)


class ZooKeeperEnsemble:
    """A standalone ZooKeeper (``size=1``) or an ensemble of ``size`` servers on 127.0.0.1.

    ``tick_time_ms`` (ZooKeeper's default 2000) is 500 here so a lost leader is noticed fast;
    the session timeout bounds are set explicitly so a client may still ask for anything from
    1 s to 60 s (Kafka's ``zookeeper.session.timeout.ms`` default, 18 s, included) instead of
    ZooKeeper's 2-20 ticks. ``base_dir`` holds one directory per node; without one a temporary
    directory is used and removed by :meth:`close`.

    ``isolate`` starts every node in a session of its own, so a Ctrl-C at the terminal reaches
    only the parent (``moldau dev-cluster`` stops the brokers first, then ZooKeeper), and makes
    each node die with the thread that started it (Linux ``PR_SET_PDEATHSIG``): start such an
    ensemble from a thread that lives as long as it should.
    """

    def __init__(
        self,
        size: int = 1,
        base_dir: str | os.PathLike[str] | None = None,
        *,
        tick_time_ms: int = 500,
        init_limit: int = 20,
        sync_limit: int = 10,
        min_session_timeout_ms: int = 1000,
        max_session_timeout_ms: int = 60000,
        client_ports: Sequence[int] | None = None,
        jvm_options: Sequence[str] = DEFAULT_JVM_OPTIONS,
        java: str | None = None,
        isolate: bool = False,
        bind_host: str = "127.0.0.1",
    ) -> None:
        if size < 1:
            raise ValueError(f"an ensemble needs at least one server, got size={size}")
        if client_ports is not None and len(client_ports) != size:
            raise ValueError(f"client_ports names {len(client_ports)} ports for {size} servers")
        self.size = size
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if base_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix=f"moldau-zk-{os.getpid()}-")
            base_dir = self._tmp.name
        self.base_dir = Path(base_dir)
        self.tick_time_ms = tick_time_ms
        self.init_limit = init_limit
        self.sync_limit = sync_limit
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.fixed_client_ports = list(client_ports) if client_ports is not None else None
        self.jvm_options = list(jvm_options)
        self.java = java
        self.isolate = isolate
        #: the address every port binds (a test network's address instead of loopback)
        self.bind_host = bind_host
        self.nodes: list[ZooKeeperNode] = []

    # -- addresses ---------------------------------------------------------------------------

    @property
    def connect_string(self) -> str:
        """``127.0.0.1:p1,127.0.0.1:p2,...`` (what ``zookeeper.connect`` takes)."""
        return ",".join(node.address for node in self.nodes)

    def connect(self, chroot: str = "") -> str:
        """The connect string with a chroot (``/moldau``) appended, as Kafka's
        ``zookeeper.connect`` writes it."""
        if chroot and not chroot.startswith("/"):
            raise ValueError(f"a chroot starts with '/': {chroot!r}")
        return self.connect_string + chroot

    def node(self, server_id: int) -> ZooKeeperNode:
        return next(node for node in self.nodes if node.server_id == server_id)

    # -- start and stop ----------------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> ZooKeeperEnsemble:
        """Write each node's config, start every node and wait until all serve clients.

        A port picked free can be taken by another process before ZooKeeper binds it; a node
        that exits during start-up is retried with fresh ports (twice), unless the ports were
        given by the caller."""
        attempts = 1 if self.fixed_client_ports is not None else 3
        for attempt in range(1, attempts + 1):
            self._layout()
            for node in self.nodes:
                self._write_config(node)
                self._spawn(node)
            try:
                self.wait_serving(timeout)
                return self
            except ZooKeeperUnavailable:
                exited = any(node.proc is not None and node.proc.poll() is not None
                             for node in self.nodes)
                self.stop()
                if not exited or attempt == attempts:
                    raise
        raise AssertionError("unreachable")

    def wait_serving(self, timeout: float = 60.0,
                     nodes: Iterable[ZooKeeperNode] | None = None) -> None:
        """Wait until every node (or the given ones) answers ``srvr`` with a mode."""
        waiting = list(self.nodes if nodes is None else nodes)
        deadline = time.monotonic() + timeout
        while waiting:
            for node in list(waiting):
                if node.proc is not None and node.proc.poll() is not None:
                    raise ZooKeeperUnavailable(
                        f"ZooKeeper server {node.server_id} exited with {node.proc.returncode} "
                        f"while starting:\n{node.log_tail()}")
                if node.mode() is not None:
                    waiting.remove(node)
            if not waiting:
                return
            if time.monotonic() > deadline:
                names = ", ".join(f"{n.server_id} ({n.address})" for n in waiting)
                raise ZooKeeperUnavailable(
                    f"ZooKeeper server(s) {names} not serving after {timeout:.0f} s:\n"
                    + "\n".join(n.log_tail() for n in waiting))
            time.sleep(0.05)

    def stop_node(self, node: ZooKeeperNode, timeout: float = 15.0) -> int | None:
        """SIGTERM one node (kill -9 after ``timeout``); its exit status."""
        return node.wait_stopped(timeout)

    def kill_node(self, node: ZooKeeperNode) -> None:
        """kill -9 one node."""
        node.kill()

    def start_node(self, node: ZooKeeperNode, timeout: float = 60.0, *,
                   wait: bool = True) -> None:
        """(Re)start a stopped node on its old ports and data; wait until it serves."""
        if node.running():
            return
        self._spawn(node)
        if wait:
            self.wait_serving(timeout, [node])

    def leader(self) -> ZooKeeperNode:
        """The node that leads (the standalone server when ``size == 1``)."""
        for node in self.nodes:
            if node.mode() in ("leader", "standalone"):
                return node
        raise ZooKeeperUnavailable("no ZooKeeper node is leading: "
                                   + ", ".join(f"{n.server_id}={n.mode()}" for n in self.nodes))

    def heal(self, timeout: float = 60.0) -> None:
        """Restart every stopped node and wait until all serve (a shared ensemble is handed to
        the next test whole)."""
        for node in self.nodes:
            if not node.running():
                self.start_node(node, timeout, wait=False)
        self.wait_serving(timeout)

    def stop(self, timeout: float = 15.0) -> None:
        """Stop every node (SIGTERM, then kill -9 after ``timeout``)."""
        for node in self.nodes:
            self.stop_node(node, timeout)

    def close(self) -> None:
        """Stop everything and remove the temporary directory (if this object made it)."""
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> ZooKeeperEnsemble:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- files and processes -----------------------------------------------------------------

    def _layout(self) -> None:
        if self.fixed_client_ports is not None:
            client = list(self.fixed_client_ports)
            others = free_ports(2 * self.size)
        else:
            ports = free_ports(3 * self.size)
            client, others = ports[: self.size], ports[self.size:]
        self.nodes = [
            ZooKeeperNode(server_id=i + 1, node_dir=self.base_dir / f"zk-{i + 1}",
                          client_port=client[i], quorum_port=others[2 * i],
                          election_port=others[2 * i + 1], host=self.bind_host)
            for i in range(self.size)
        ]

    def _config_text(self, node: ZooKeeperNode) -> str:
        lines = [
            f"tickTime={self.tick_time_ms}",
            f"initLimit={self.init_limit}",
            f"syncLimit={self.sync_limit}",
            f"minSessionTimeout={self.min_session_timeout_ms}",
            f"maxSessionTimeout={self.max_session_timeout_ms}",
            f"dataDir={node.data_dir}",
            f"clientPort={node.client_port}",
            f"clientPortAddress={self.bind_host}",
            "admin.enableServer=false",
            "4lw.commands.whitelist=ruok,srvr,stat,mntr,conf",
        ]
        if self.size > 1:
            lines += [
                f"server.{peer.server_id}={peer.host}:{peer.quorum_port}:{peer.election_port}"
                for peer in self.nodes
            ]
        return "\n".join(lines) + "\n"

    def _write_config(self, node: ZooKeeperNode) -> None:
        node.data_dir.mkdir(parents=True, exist_ok=True)
        (node.data_dir / "myid").write_text(f"{node.server_id}\n")
        node.config_path.write_text(self._config_text(node))
        (node.node_dir / "log4j.properties").write_text(
            _LOG4J.format(log=node.log_path, server_id=node.server_id))

    def _command(self, node: ZooKeeperNode) -> list[str]:
        return [
            self.java or java_binary(),
            *self.jvm_options,
            f"-Dlog4j.configuration=file:{node.node_dir / 'log4j.properties'}",
            "-cp", classpath(node.node_dir),
            MAIN_CLASS, str(node.config_path),
        ]

    def _spawn(self, node: ZooKeeperNode) -> None:
        command = self._command(node)
        with open(node.out_path, "ab") as out:
            node.proc = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                cwd=node.node_dir, start_new_session=self.isolate,
                preexec_fn=die_with_parent if self.isolate else None)


def zkcli(server: str, *command: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run Debian's ``zkCli.sh -server SERVER COMMAND...`` (an operator's tool) and return its
    result; its stdout holds the command's answer after the connection chatter."""
    if not ZKCLI.exists():
        raise ZooKeeperUnavailable(f"missing {ZKCLI}: {INSTALL_HINT}")
    return subprocess.run([str(ZKCLI), "-server", server, *command], capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


@contextlib.contextmanager
def running_zookeeper(size: int = 1, **kwargs: Any) -> Iterator[ZooKeeperEnsemble]:
    """``with running_zookeeper(3) as zk: ...``: start, yield, stop and clean up."""
    ensemble = ZooKeeperEnsemble(size, **kwargs)
    try:
        yield ensemble.start()
    finally:
        ensemble.close()
