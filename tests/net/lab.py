"""A network-namespace lab for multi-network tests, and the guard that keeps it private.

SAFETY RULE (../../shared/FACTS.md): this machine's root network namespace has a real uplink,
so nothing here may run in it. Every test decorated with :func:`netlab` is re-executed by
pytest in a child process started with ``unshare --net --mount`` (a fresh network namespace
holding only ``lo``, and a private mount namespace). Inside, :func:`enter_private_namespace`
refuses to go on unless

* the process was started that way (``MOLDAU_NETLAB_INNER=1``),
* its network and mount namespaces differ from those of the pytest process that started it
  (and from pid 1's, when readable),
* the network namespace has no interface but ``lo``;

and then mounts private tmpfs file systems on ``/run/netns`` and ``/etc/netns``, so the lab
namespaces and their hosts files exist only in this mount namespace and vanish with it.
Lab namespaces are created from there with ``ip netns add``; they are new, empty network
namespaces joined only to each other by veth pairs, so no packet of a test can reach a real
network. Clients and brokers run inside them with ``ip netns exec``, which bind-mounts each
namespace's ``hosts``, ``nsswitch.conf`` (``hosts: files``) and empty ``resolv.conf``: names
come only from the test's own hosts files, and an unknown name fails at once instead of
waiting on DNS.

Cleanup (:meth:`Lab.close`, also on failure): every process started is stopped by its pid,
processes still inside a lab namespace are listed with ``ip netns pids`` and killed, the
namespaces are deleted, and the temporary directory is removed. The only trace outside the
test's own namespaces is the pair of empty directories ``/run/netns`` and ``/etc/netns``
(iproute2's standard locations, created when missing and used as mount points); they are
left in place because removing a mount point another run is using would detach its mounts.
"""

from __future__ import annotations

import functools
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from moldau.testing.processes import terminate

ROOT = Path(__file__).resolve().parents[2]
INNER_ENV = "MOLDAU_NETLAB_INNER"
OUTER_NET_ENV = "MOLDAU_NETLAB_OUTER_NETNS"
OUTER_MNT_ENV = "MOLDAU_NETLAB_OUTER_MNTNS"
TOOLS = ("unshare", "ip", "nft", "kcat")
INNER_TIMEOUT_S = 240


class UnsafeEnvironment(RuntimeError):
    """Raised instead of building a lab anywhere but a private network namespace."""


def _ns_inode(kind: str, pid: str = "self") -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/{kind}").st_ino
    except OSError:
        return None


def _interfaces() -> list[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True,
                         check=True).stdout
    return [line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if line]


# --- running a test inside a private namespace ------------------------------------------------


def missing_tools() -> list[str]:
    return [tool for tool in TOOLS if shutil.which(tool) is None]


def _run_inside(nodeid: str) -> None:
    """Re-run the pytest item ``nodeid`` in a fresh network + mount namespace."""
    missing = missing_tools()
    if missing:
        pytest.fail(f"network lab needs {', '.join(missing)} "
                    "(python -m moldau.testing.install_clients installs them)", pytrace=False)
    command = ["unshare", "--net", "--mount", "--propagation", "private"]
    if os.geteuid() != 0:
        command.append("--map-root-user")
    probe = subprocess.run([*command, "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.fail(f"cannot create a private network namespace here (the lab needs root or "
                    f"unprivileged user namespaces): {probe.stderr.strip()}", pytrace=False)
    env = dict(os.environ)
    env[INNER_ENV] = "1"
    env[OUTER_NET_ENV] = str(_ns_inode("net"))
    env[OUTER_MNT_ENV] = str(_ns_inode("mnt"))
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_CURRENT_TEST", None)
    command += ["--", sys.executable, "-m", "pytest", nodeid, "-q", "-rs", "-p",
                "no:cacheprovider", f"--timeout={INNER_TIMEOUT_S}", "--no-header"]
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=INNER_TIMEOUT_S + 30)
    except subprocess.TimeoutExpired:
        # The inner pytest and the lab processes it started share its process group.
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        pytest.fail(f"lab test timed out inside its namespace:\n{output[-8000:]}")
    if proc.returncode != 0:
        pytest.fail(f"inside the private namespace the test failed "
                    f"(exit {proc.returncode}):\n{output[-12000:]}", pytrace=False)
    print(output)
    summary = output.strip().splitlines()[-1] if output.strip() else ""
    if " passed" not in summary:
        pytest.fail(f"inner run did not pass: {summary}")


def netlab(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run the test in its own private network namespace (see the module docstring)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if os.environ.get(INNER_ENV) == "1":
            enter_private_namespace()
            return fn(*args, **kwargs)
        nodeid = os.environ["PYTEST_CURRENT_TEST"].rsplit(" ", 1)[0]
        _run_inside(nodeid)
        return None

    return pytest.mark.net(wrapper)


_entered = False


def enter_private_namespace() -> None:
    """Check that this process is in a private, empty network namespace; mount the lab dirs.

    Raises :class:`UnsafeEnvironment` (never builds anything) when a check fails.
    """
    global _entered
    if _entered:
        return
    if os.environ.get(INNER_ENV) != "1":
        raise UnsafeEnvironment("the network lab only runs in a process started by netlab() "
                                "inside unshare --net --mount")
    net, mnt = _ns_inode("net"), _ns_inode("mnt")
    outer_net, outer_mnt = os.environ.get(OUTER_NET_ENV), os.environ.get(OUTER_MNT_ENV)
    if net is None or mnt is None or not outer_net or not outer_mnt:
        raise UnsafeEnvironment("cannot identify this process's namespaces")
    if str(net) == outer_net or str(mnt) == outer_mnt:
        raise UnsafeEnvironment("refusing to run: this process shares the network or mount "
                                "namespace of the pytest process that started it")
    init_net = _ns_inode("net", "1")
    if init_net is not None and init_net == net:
        raise UnsafeEnvironment("refusing to run in the root network namespace")
    interfaces = _interfaces()
    if interfaces != ["lo"]:
        raise UnsafeEnvironment(f"refusing to run: the namespace has interfaces {interfaces}, "
                                "a private one has only lo")
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    for directory in ("/run/netns", "/etc/netns"):
        os.makedirs(directory, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755,size=16m", "lab", directory],
                       check=True)
    _entered = True


# --- the lab ----------------------------------------------------------------------------------


def sh(*argv: str, input: str | None = None, check: bool = True,
       timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """Run a setup command; a failure raises with its stderr."""
    result = subprocess.run(list(argv), input=input, capture_output=True, text=True,
                            timeout=timeout)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({result.returncode}): "
                           f"{result.stderr.strip() or result.stdout.strip()}")
    return result


@dataclass
class Netns:
    """One lab namespace: a machine or router of the scenario."""

    lab: Lab
    role: str
    name: str
    hosts: dict[str, str] = field(default_factory=dict)

    def ip(self, *args: str) -> None:
        sh("ip", "-n", self.name, *args)

    def exec_argv(self, argv: Sequence[str]) -> list[str]:
        return ["ip", "netns", "exec", self.name, *argv]

    def run(self, argv: Sequence[str], *, timeout: float = 60,
            env: Mapping[str, str] | None = None, input: str | None = None
            ) -> subprocess.CompletedProcess[str]:
        """Run a command inside the namespace and wait; never raises on a non-zero exit."""
        return subprocess.run(self.exec_argv(argv), capture_output=True, text=True,
                              timeout=timeout, env=_env(env), cwd=ROOT, input=input)

    def spawn(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
              log: Path | None = None) -> subprocess.Popen[bytes]:
        """Start a long-running process inside the namespace (stopped by Lab.close)."""
        return self.lab.spawn(self, argv, env=env, log=log)

    def set_hosts(self, hosts: Mapping[str, str]) -> None:
        """Write the namespace's /etc/hosts (name -> IPv4 address; localhost is 127.0.0.1).

        No ``::1 localhost`` line: DNAT rules here are IPv4, and a client trying ::1 first
        would miss them (FACTS.md pitfall).
        """
        self.hosts = {"localhost": "127.0.0.1", **hosts}
        lines = [f"{ip} {name}" for name, ip in self.hosts.items()]
        (self.lab.etc / self.name / "hosts").write_text("\n".join(lines) + "\n")

    def nft(self, ruleset: str) -> None:
        sh("ip", "netns", "exec", self.name, "nft", "-f", "-", input=ruleset)

    def sysctl(self, key: str, value: str) -> None:
        path = Path("/proc/sys") / key.replace(".", "/")
        sh("ip", "netns", "exec", self.name, "sh", "-c",
           f"test ! -e {path} || echo {value} > {path}")


def _env(extra: Mapping[str, str] | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in (INNER_ENV, OUTER_NET_ENV, OUTER_MNT_ENV, "PYTEST_CURRENT_TEST")}
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra or {})
    return env


class Lab:
    """Namespaces, links and processes of one scenario; ``with Lab() as lab:``."""

    def __init__(self) -> None:
        enter_private_namespace()
        self.prefix = f"ml{os.getpid()}{secrets.token_hex(2)}"
        self.etc = Path("/etc/netns")
        self.tmp = Path(tempfile.mkdtemp(prefix=f"{self.prefix}-"))
        self.namespaces: list[Netns] = []
        self.processes: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> Lab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- topology ----------------------------------------------------------------------

    def netns(self, role: str, hosts: Mapping[str, str] | None = None) -> Netns:
        """A new namespace with ``lo`` up, a hosts file, ``hosts: files`` and no DNS."""
        ns = Netns(self, role, f"{self.prefix}-{role}")
        sh("ip", "netns", "add", ns.name)
        self.namespaces.append(ns)
        ns.ip("link", "set", "lo", "up")
        directory = self.etc / ns.name
        directory.mkdir()
        (directory / "nsswitch.conf").write_text("hosts: files\n")
        (directory / "resolv.conf").write_text("")
        ns.set_hosts(hosts or {})
        return ns

    def link(self, a: Netns, a_if: str, a_addr: str | None, b: Netns, b_if: str,
             b_addr: str | None) -> None:
        """A veth pair between two namespaces (addresses in CIDR form, or None)."""
        sh("ip", "-n", a.name, "link", "add", a_if, "type", "veth", "peer", "name", b_if,
           "netns", b.name)
        for ns, ifname, addr in ((a, a_if, a_addr), (b, b_if, b_addr)):
            if addr:
                ns.ip("addr", "add", addr, "dev", ifname)
            ns.ip("link", "set", ifname, "up")

    def bridge(self, ns: Netns, name: str, addr: str | None) -> None:
        """A bridge in ``ns``; bridge netfilter is turned off (it drops hairpin NAT)."""
        ns.ip("link", "add", name, "type", "bridge")
        if addr:
            ns.ip("addr", "add", addr, "dev", name)
        ns.ip("link", "set", name, "up")
        ns.sysctl("net.bridge.bridge-nf-call-iptables", "0")
        ns.sysctl("net.bridge.bridge-nf-call-ip6tables", "0")

    def attach(self, bridge_ns: Netns, bridge: str, other: Netns, other_if: str,
               other_addr: str, *, gateway: str | None = None) -> None:
        """Plug ``other`` into a bridge of ``bridge_ns`` with a veth pair."""
        port = f"p{len(self.namespaces)}{secrets.token_hex(2)}"[:15]
        self.link(bridge_ns, port, None, other, other_if, other_addr)
        bridge_ns.ip("link", "set", port, "master", bridge)
        if gateway:
            other.ip("route", "add", "default", "via", gateway)

    # --- processes ----------------------------------------------------------------------

    def spawn(self, ns: Netns, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
              log: Path | None = None) -> subprocess.Popen[bytes]:
        log = log or self.tmp / f"{ns.role}-{len(self.processes)}.log"
        with open(log, "ab") as out:
            proc = subprocess.Popen(ns.exec_argv(argv), stdout=out, stderr=subprocess.STDOUT,
                                    env=_env(env), cwd=ROOT)
        proc.log_path = log  # type: ignore[attr-defined]
        self.processes.append(proc)
        return proc

    def stop(self, proc: subprocess.Popen[bytes], timeout: float = 10) -> None:
        """SIGTERM (then SIGKILL) one process this lab started."""
        terminate(proc, timeout)

    def close(self) -> None:
        """Stop every process, delete every namespace and the temporary files."""
        for proc in reversed(self.processes):
            try:
                self.stop(proc, timeout=5)
            except OSError:
                pass
        for ns in self.namespaces:
            # Anything still inside a lab namespace was started by this lab.
            pids = sh("ip", "netns", "pids", ns.name, check=False).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (OSError, ValueError):
                    pass
        deadline = time.monotonic() + 5
        for ns in self.namespaces:
            while sh("ip", "netns", "pids", ns.name, check=False).stdout.split():
                if time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            sh("ip", "netns", "del", ns.name, check=False)
            shutil.rmtree(self.etc / ns.name, ignore_errors=True)
        self.namespaces.clear()
        self.processes.clear()
        shutil.rmtree(self.tmp, ignore_errors=True)
