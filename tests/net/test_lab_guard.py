"""The lab's safety guard refuses to build anything outside a private, empty namespace.

Each check runs in a child process in a throwaway mount namespace (``unshare --mount``), so
even a broken guard could not mount anything where it matters.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from .lab import INNER_ENV, OUTER_MNT_ENV, OUTER_NET_ENV, ROOT, missing_tools

pytestmark = pytest.mark.net

PROGRAM = """
import sys
from tests.net.lab import UnsafeEnvironment, enter_private_namespace
try:
    enter_private_namespace()
except UnsafeEnvironment as exc:
    print("REFUSED:", exc)
    sys.exit(0)
print("ACCEPTED")
sys.exit(1)
"""


def guard(unshare: list[str], env: dict[str, str], before: str = "") -> str:
    if missing_tools():
        pytest.fail(f"needs {', '.join(missing_tools())} (make test-deps installs them)",
                    pytrace=False)
    script = f"{before}exec {sys.executable} -c '{PROGRAM}'"
    result = subprocess.run(["unshare", *unshare, "--propagation", "private", "sh", "-c", script],
                            capture_output=True, text=True, cwd=ROOT, timeout=60,
                            env={**os.environ, "PYTHONPATH": str(ROOT), **env})
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def own(kind: str) -> str:
    return str(os.stat(f"/proc/self/ns/{kind}").st_ino)


def test_refuses_without_the_netlab_re_execution() -> None:
    env = {INNER_ENV: "", OUTER_NET_ENV: "", OUTER_MNT_ENV: ""}
    assert "only runs in a process started by netlab()" in guard(["--mount"], env)


def test_refuses_in_the_starting_network_namespace() -> None:
    env = {INNER_ENV: "1", OUTER_NET_ENV: own("net"), OUTER_MNT_ENV: own("mnt")}
    out = guard(["--mount"], env)
    assert "shares the network or mount namespace" in out


def test_refuses_a_namespace_with_other_interfaces() -> None:
    env = {INNER_ENV: "1", OUTER_NET_ENV: own("net"), OUTER_MNT_ENV: own("mnt")}
    out = guard(["--net", "--mount"], env,
                before="ip link add v0 type veth peer name v1 && ")
    assert "refusing to run: the namespace has interfaces" in out
    assert "'v0'" in out and "'v1'" in out
