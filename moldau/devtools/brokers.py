"""One ``moldau serve`` child process of a local cluster, configured as a person would.

A :class:`BrokerSpec` says what a broker is (id, listeners by name and security protocol,
inter-broker listener, rack, extra keys); :class:`BrokerNode` turns it into a configuration
with real ports and runs it. Two configuration styles, the two ways the seeds run Kafka:

* ``properties``: a ``server.properties`` file (``moldau serve --config FILE``), as on a
  machine of one's own (seed 001's server0/1/2.properties);
* ``env``: no file at all, only ``KAFKA_*`` environment variables (``KAFKA_BROKER_ID``,
  ``KAFKA_ZOOKEEPER_CONNECT``, ``KAFKA_LISTENERS``, ``KAFKA_ADVERTISED_LISTENERS``,
  ``KAFKA_LISTENER_SECURITY_PROTOCOL_MAP``, ...), as seed 003's ``docker run -e`` lines do.

Ports are picked free on 127.0.0.1 (or given) before the start and kept across restarts, so
a broker comes back at the address clients already know. Processes are stopped by their own
pid, never by name.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..protocol import properties
from .processes import ChildProcess, child_env, die_with_parent
from .tail import complete_lines

#: The broker's start-up line (moldau/broker/server.py): its cluster id and bound listeners.
STARTED = re.compile(
    r"started \(cluster id (?P<cluster>[^)]*)\); listening on (?P<listeners>[^ ,]+(?:, [^ ,]+)*)"
)


def parse_started(line: str) -> tuple[str, dict[str, int]] | None:
    """The cluster id and the bound port of every listener (by name) that a broker's
    start-up line reports; None for any other line. Give it complete lines only
    (:func:`~.tail.complete_lines`): a half-written one would cut a port short."""
    match = STARTED.search(line)
    if match is None:
        return None
    ports = {part.split("://")[0]: int(part.rsplit(":", 1)[1])
             for part in match["listeners"].split(", ")}
    return match["cluster"], ports

#: Keys every broker of a local cluster gets unless its spec says otherwise. Transactions are
#: not replicated yet (their coordinator still writes with the leader's append only), so the
#: transaction log keeps one replica; ``__consumer_offsets`` gets Kafka's replication factor
#: through :func:`internal_topic_defaults`, capped at the cluster's size.
LOCAL_DEFAULTS: dict[str, str] = {
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
}

#: Kafka's ``offsets.topic.replication.factor``.
OFFSETS_REPLICATION_FACTOR = 3


def internal_topic_defaults(brokers: int) -> dict[str, str]:
    """``offsets.topic.replication.factor`` for a local cluster of ``brokers`` brokers:
    Kafka's 3, or all the brokers when there are fewer (a dev cluster of one or two), since
    the coordinator answers COORDINATOR_NOT_AVAILABLE until that many brokers are alive.
    With 3 replicas committed group offsets survive the loss of the coordinator's broker."""
    return {"offsets.topic.replication.factor":
            str(max(1, min(OFFSETS_REPLICATION_FACTOR, brokers)))}


_BIND_FAILURES = ("Address already in use", "address already in use", "Errno 98")
#: What a broker says when its id is still registered by another ZooKeeper session
#: (moldau/broker/zk/node.py), e.g. its own previous life, killed a moment ago.
_ID_TAKEN = "is already registered by a live broker"


class BrokerStartError(RuntimeError):
    """A broker exited or did not say it started; the message holds the end of its log."""

    def __init__(self, message: str, *, port_taken: bool = False,
                 id_taken: bool = False) -> None:
        super().__init__(message)
        self.port_taken = port_taken
        self.id_taken = id_taken


def properties_text(settings: Mapping[str, str]) -> str:
    """``key=value`` lines a person can read (``listeners=PLAINTEXT://127.0.0.1:9092``, not
    ``Properties.store``'s ``PLAINTEXT\\://...``); an item that needs escaping to survive
    ``Properties.load`` is escaped the way ``store`` does it."""
    lines = ["# Written by moldau.devtools (moldau dev-cluster); edits are overwritten.\n"]
    for key, value in settings.items():
        plain = (value == value.strip() and not any(c in value for c in "\\\n\r\t\f")
                 and not any(c in key for c in " =:#!\\\t\n\r\f"))
        lines.append(f"{key}={value}\n" if plain else properties.dump({key: value}))
    return "".join(lines)


def key_to_env(key: str) -> str:
    """``advertised.listeners`` -> ``KAFKA_ADVERTISED_LISTENERS``, the inverse of the Docker
    images' mapping (``.`` -> ``_``, ``_`` -> ``__``, ``-`` -> ``___``)."""
    body = key.replace("_", "\1").replace("-", "\0").replace(".", "_")
    return "KAFKA_" + body.replace("\1", "__").replace("\0", "___").upper()


@dataclass
class BrokerSpec:
    """What one broker of a local cluster is.

    ``listeners`` maps listener name to security protocol (``{"PLAINTEXT": "PLAINTEXT",
    "TEXT": "PLAINTEXT"}`` is seed 001's server1); each gets a port on ``host``. ``ports``
    fixes ports by listener name (the rest are picked free). ``settings`` are extra keys
    (``broker.rack``, ``zookeeper.session.timeout.ms``, ...) that win over the generated ones.
    """

    broker_id: int
    listeners: Mapping[str, str] = field(default_factory=lambda: {"PLAINTEXT": "PLAINTEXT"})
    inter_broker_listener: str | None = None
    rack: str | None = None
    settings: Mapping[str, str] = field(default_factory=dict)
    ports: Mapping[str, int] = field(default_factory=dict)
    host: str = "127.0.0.1"


class BrokerNode(ChildProcess):
    """A ``moldau serve`` process for one :class:`BrokerSpec`, in ``<base>/broker-<id>/``:
    ``server.properties`` (properties style), ``data/`` (``log.dirs``), ``broker.log``.
    ``pid``, ``running()``, ``wait_stopped()`` and ``kill()`` (no shutdown at all: its
    ZooKeeper session lingers until it expires) come from :class:`~.processes.ChildProcess`."""

    def __init__(self, spec: BrokerSpec, base_dir: str | os.PathLike[str],
                 zookeeper_connect: str, *, style: str = "properties",
                 defaults: Mapping[str, str] = LOCAL_DEFAULTS, isolate: bool = False,
                 python: str = sys.executable) -> None:
        if style not in ("properties", "env"):
            raise ValueError(f"style is 'properties' or 'env', got {style!r}")
        self.spec = spec
        self.broker_id = spec.broker_id
        self.dir = Path(base_dir) / f"broker-{spec.broker_id}"
        self.zookeeper_connect = zookeeper_connect
        self.style = style
        self.defaults = dict(defaults)
        self.isolate = isolate
        self.python = python
        self.ports: dict[str, int] = dict(spec.ports)
        self.proc: subprocess.Popen[bytes] | None = None
        self.cluster_id = ""
        self.bound: dict[str, int] = {}

    # -- where things are --------------------------------------------------------------------

    @property
    def data_dir(self) -> Path:
        return self.dir / "data"

    @property
    def config_path(self) -> Path:
        return self.dir / "server.properties"

    @property
    def log_path(self) -> Path:
        """The broker's stdout and stderr (its log lines)."""
        return self.dir / "broker.log"

    def address(self, listener: str | None = None) -> str:
        """``host:port`` of a listener (the first one by default)."""
        name = listener or next(iter(self.spec.listeners))
        return f"{self.spec.host}:{self.ports[name]}"

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, lines: int = 40, start: int = 0) -> str:
        text = self.log_path.read_bytes()[start:] if self.log_path.exists() else b""
        return "\n".join(text.decode(errors="replace").splitlines()[-lines:])

    # -- configuration -----------------------------------------------------------------------

    def settings(self) -> dict[str, str]:
        """Every key this broker is started with (ports must have been assigned)."""
        spec = self.spec
        endpoints = ",".join(f"{name}://{spec.host}:{self.ports[name]}"
                             for name in spec.listeners)
        values = dict(self.defaults)
        values.update({
            "broker.id": str(spec.broker_id),
            "zookeeper.connect": self.zookeeper_connect,
            "listeners": endpoints,
            "advertised.listeners": endpoints,
            "log.dirs": str(self.data_dir),
        })
        if any(name != protocol for name, protocol in spec.listeners.items()):
            values["listener.security.protocol.map"] = ",".join(
                f"{name}:{protocol}" for name, protocol in spec.listeners.items())
        if spec.inter_broker_listener is not None:
            values["inter.broker.listener.name"] = spec.inter_broker_listener
        if spec.rack is not None:
            values["broker.rack"] = spec.rack
        values.update({key: str(value) for key, value in spec.settings.items()})
        return values

    def environment(self) -> dict[str, str]:
        """The ``KAFKA_*`` variables of the ``env`` style (empty for ``properties``)."""
        if self.style != "env":
            return {}
        return {key_to_env(key): value for key, value in self.settings().items()}

    def command(self) -> list[str]:
        base = [self.python, "-m", "moldau.cli.main", "serve"]
        return base if self.style == "env" else [*base, "--config", str(self.config_path)]

    def assign_ports(self, free: list[int]) -> None:
        """Give every listener without a port one from ``free`` (consumed)."""
        for name in self.spec.listeners:
            if name not in self.ports:
                self.ports[name] = free.pop()

    def ports_needed(self) -> int:
        return sum(1 for name in self.spec.listeners if name not in self.ports)

    def forget_picked_ports(self) -> None:
        """Drop picked ports (a retry after a port was taken picks new ones)."""
        self.ports = dict(self.spec.ports)

    # -- process -----------------------------------------------------------------------------

    def spawn(self) -> int:
        """Write the configuration and start the process; the log offset its lines start at."""
        self.dir.mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self.style == "properties":
            self.config_path.write_text(properties_text(self.settings()))
        # a KAFKA_* variable of the caller's shell would override this broker's settings
        env = {name: value for name, value in child_env().items()
               if not name.startswith("KAFKA_")}
        env.update(self.environment())
        start_at = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(
                self.command(), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=env, cwd=self.dir, start_new_session=self.isolate,
                preexec_fn=die_with_parent if self.isolate else None)
        self.cluster_id = ""
        self.bound = {}
        return start_at

    def poll_started(self, start_at: int) -> bool:
        """True once the start-up line is in the log (from ``start_at``); raises
        :class:`BrokerStartError` if the process has exited."""
        for line in complete_lines(self.log_path, start_at):
            started = parse_started(line)
            if started is not None:
                self.cluster_id, self.bound = started
                return True
        if self.proc is not None and self.proc.poll() is not None:
            tail = self.log_tail(start=start_at)
            raise BrokerStartError(
                f"broker {self.broker_id} exited with {self.proc.returncode} while starting "
                f"(log {self.log_path}):\n{tail}",
                port_taken=any(text in tail for text in _BIND_FAILURES),
                id_taken=_ID_TAKEN in tail)
        return False

    def start(self, timeout: float = 60.0) -> BrokerNode:
        """Start (on this node's ports) and wait for the start-up line."""
        start_at = self.spawn()
        self.wait_started(start_at, timeout)
        return self

    def wait_started(self, start_at: int, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.poll_started(start_at):
            if time.monotonic() > deadline:
                self.kill()
                raise BrokerStartError(
                    f"broker {self.broker_id} did not log its start-up line within "
                    f"{timeout:.0f} s (log {self.log_path}):\n{self.log_tail(start=start_at)}")
            time.sleep(0.05)

    def signal(self, signum: int) -> None:
        """Send ``signum`` to this broker's process (by its pid)."""
        if self.proc is None or self.proc.poll() is not None:
            raise RuntimeError(f"broker {self.broker_id} is not running")
        self.proc.send_signal(signum)

    def terminate(self) -> None:
        """SIGTERM without waiting (a controlled shutdown starts); see :meth:`wait_stopped`."""
        if self.running():
            assert self.proc is not None
            self.proc.send_signal(signal.SIGCONT)  # a paused broker could not act on SIGTERM
            self.proc.send_signal(signal.SIGTERM)

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (a clean, controlled shutdown), kill -9 after ``timeout`` s."""
        self.terminate()
        return self.wait_stopped(timeout)
