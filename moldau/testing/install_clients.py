"""Install the test clients that do not come from PyPI: Debian's kcat (and the network tools
the namespace tests use), Debian's zookeeper (the real ZooKeeper cluster tests run, see
``moldau.testing.zookeeper``), npm's kafkajs with its codec plugins, and npm's
``@confluentinc/schemaregistry`` with ``@confluentinc/kafka-javascript`` and jest (Confluent's
own end-to-end suite of its JavaScript registry client, tests/compat/test_schema_registry_js.py).

``@confluentinc/kafka-javascript`` is a native module whose install script downloads a
prebuilt binary from outside the npm registry; offline from that, node-pre-gyp falls back to
building it, and ``CKJS_LINKING=dynamic`` makes that build compile the librdkafka source the
package ships against Debian's zlib and OpenSSL headers (its static default would download
zlib and OpenSSL sources and fail). About 3-5 minutes on two cores, ~500 MB of node_modules.

Run by ``make test`` (``python -m moldau.testing.install_clients``). Each tool is installed only
when missing. Failing to install is an error with a message that says what to do: the suite
must not silently skip what it cannot run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
JS_DIR = ROOT / "tests" / "compat" / "js"
SR_JS_DIR = ROOT / "tests" / "compat" / "schema_registry_js"
#: npm folders and the environment their install needs.
NODE_DIRS: dict[Path, dict[str, str]] = {JS_DIR: {}, SR_JS_DIR: {"CKJS_LINKING": "dynamic"}}
DEBIAN_PACKAGES = {"kcat": "kcat", "ip": "iproute2", "nft": "nftables",
                   "java": "default-jre-headless",
                   # tests/unit/protocol/test_properties.py runs a .java source file against
                   # java.util.Properties: source launch needs the compiler (a JDK).
                   "javac": "default-jdk-headless"}
#: Packages that put nothing on PATH, found by a file they install. ``zookeeper`` brings the
#: SLF4J/log4j jars the server is started with (and a Java runtime).
DEBIAN_FILES = {"/usr/share/java/zookeeper.jar": "zookeeper",
                "/usr/share/java/slf4j-log4j12.jar": "zookeeper",
                "/usr/share/java/log4j-1.2.jar": "zookeeper",
                "/usr/share/zookeeper/bin/zkCli.sh": "zookeeper",
                # @confluentinc/kafka-javascript's build from source (see above)
                "/usr/include/zlib.h": "zlib1g-dev",
                "/usr/include/openssl/ssl.h": "libssl-dev"}


def _run(cmd: list[str], **kwargs: object) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kwargs)  # type: ignore[call-overload]


def install_debian() -> None:
    missing = [pkg for tool, pkg in DEBIAN_PACKAGES.items() if shutil.which(tool) is None]
    missing += [pkg for path, pkg in DEBIAN_FILES.items() if not Path(path).exists()]
    missing = list(dict.fromkeys(missing))
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


def missing_node_packages(folder: Path) -> list[str]:
    """The dependencies of ``folder``'s package.json not installed in its node_modules."""
    wanted = json.loads((folder / "package.json").read_text())["dependencies"]
    return [name for name in wanted
            if not (folder / "node_modules" / name / "package.json").exists()]


def install_node_packages() -> None:
    """Install the npm packages pinned in each folder of :data:`NODE_DIRS` (their
    package-lock.json fixes the versions of everything they bring)."""
    for folder, extra_env in NODE_DIRS.items():
        if not missing_node_packages(folder):
            continue
        if shutil.which("npm") is None:
            raise SystemExit("npm is missing: install Node.js (Debian packages nodejs and npm) "
                             "to run the JavaScript compatibility tests")
        _run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(folder)],
             stdout=subprocess.DEVNULL, env=dict(os.environ, **extra_env))


def main() -> int:
    install_debian()
    install_node_packages()
    return 0


if __name__ == "__main__":
    sys.exit(main())
