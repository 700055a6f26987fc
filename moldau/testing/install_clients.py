"""Install the test clients that do not come from PyPI: Debian's kcat (and the network tools
the namespace tests use) and npm's kafkajs.

Run by ``make test`` (``python -m moldau.testing.install_clients``). Each tool is installed only
when missing. Failing to install is an error with a message that says what to do: the suite
must not silently skip what it cannot run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
JS_DIR = ROOT / "tests" / "compat" / "js"
KAFKAJS_VERSION = "2.2.4"
DEBIAN_PACKAGES = {"kcat": "kcat", "ip": "iproute2", "nft": "nftables"}


def _run(cmd: list[str], **kwargs: object) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kwargs)  # type: ignore[call-overload]


def install_debian() -> None:
    missing = [pkg for tool, pkg in DEBIAN_PACKAGES.items() if shutil.which(tool) is None]
    if not missing:
        return
    if shutil.which("apt-get") is None:
        raise SystemExit(f"missing {', '.join(missing)} and apt-get is not available; install "
                         f"them with your package manager")
    prefix = [] if os.geteuid() == 0 else ["sudo", "-n"]
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    try:
        _run([*prefix, "apt-get", "install", "-y", "-q", "--no-install-recommends", *missing],
             env=env, stdout=subprocess.DEVNULL)
    except subprocess.CalledProcessError:
        _run([*prefix, "apt-get", "update", "-q"], env=env, stdout=subprocess.DEVNULL)
        _run([*prefix, "apt-get", "install", "-y", "-q", "--no-install-recommends", *missing],
             env=env, stdout=subprocess.DEVNULL)


def install_kafkajs() -> None:
    marker = JS_DIR / "node_modules" / "kafkajs" / "package.json"
    if marker.exists():
        return
    if shutil.which("npm") is None:
        raise SystemExit("npm is missing: install Node.js (Debian package nodejs/npm) to run "
                         "the kafkajs compatibility tests")
    JS_DIR.mkdir(parents=True, exist_ok=True)
    _run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(JS_DIR),
          f"kafkajs@{KAFKAJS_VERSION}"], stdout=subprocess.DEVNULL)


def main() -> int:
    install_debian()
    install_kafkajs()
    return 0


if __name__ == "__main__":
    sys.exit(main())
