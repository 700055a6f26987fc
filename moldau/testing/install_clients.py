"""Install the test clients that do not come from PyPI: Debian's kcat (and the network tools
the namespace tests use), Debian's zookeeper (the real ZooKeeper cluster tests run, see
``moldau.testing.zookeeper``), npm's kafkajs with its codec plugins, and npm's
``@confluentinc/schemaregistry`` with ``@confluentinc/kafka-javascript`` and jest (Confluent's
own end-to-end suite of its JavaScript registry client, tests/compat/test_schema_registry_js.py),
and PyPI's ``kafi`` in a venv of its own with the test suite of its sdist (a suite written for
Confluent's REST Proxy, tests/compat/test_kafi_rest_proxy.py).

``@confluentinc/kafka-javascript`` is a native module whose install script downloads a
prebuilt binary from outside the npm registry; offline from that, node-pre-gyp falls back to
building it, and ``CKJS_LINKING=dynamic`` makes that build compile the librdkafka source the
package ships against Debian's zlib and OpenSSL headers (its static default would download
zlib and OpenSSL sources and fail). About 3-5 minutes on two cores, ~500 MB of node_modules.

kafi pins confluent-kafka 2.13.0 (Moldau tests with 2.16.1), so it lives in
tests/compat/kafi/.venv, installed from the pinned tests/compat/kafi/requirements.txt (about
350 MB: pandas, grpcio-tools, ...); its suite is the ``test/`` folder of the same version's
sdist, unpacked in tests/compat/kafi/.suite/. Nothing of it is committed.

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
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
JS_DIR = ROOT / "tests" / "compat" / "js"
SR_JS_DIR = ROOT / "tests" / "compat" / "schema_registry_js"
KAFI_DIR = ROOT / "tests" / "compat" / "kafi"
KAFI_VERSION = "0.0.74"
KAFI_VENV = KAFI_DIR / ".venv"
KAFI_PYTHON = KAFI_VENV / "bin" / "python"
#: kafi's sdist, unpacked: its ``test/`` folder is the suite (in a dot folder, where Moldau's
#: own pytest run does not look for tests)
KAFI_SUITE = KAFI_DIR / ".suite" / f"kafi-{KAFI_VERSION}"
_KAFI_STAMP = KAFI_VENV / ".requirements"
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


def _kafi_venv_current() -> bool:
    """Whether kafi's venv holds what requirements.txt pins now."""
    wanted = (KAFI_DIR / "requirements.txt").read_text()
    return (KAFI_PYTHON.exists() and _KAFI_STAMP.exists()
            and _KAFI_STAMP.read_text() == wanted)


def kafi_missing() -> list[str]:
    """What of kafi is not installed: its venv (as requirements.txt pins it), its suite."""
    missing = []
    if not _kafi_venv_current():
        missing.append(f"the venv {KAFI_VENV} (tests/compat/kafi/requirements.txt)")
    if not (KAFI_SUITE / "test" / "test_kafka_restproxy.py").exists():
        missing.append(f"kafi {KAFI_VERSION}'s test suite in {KAFI_SUITE}")
    return missing


def install_kafi() -> None:
    """kafi's venv from the pinned requirements, then its sdist's suite in ``.suite/``."""
    requirements = KAFI_DIR / "requirements.txt"
    if not _kafi_venv_current():
        _run([sys.executable, "-m", "venv", "--clear", str(KAFI_VENV)])
        _run([str(KAFI_PYTHON), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
              "-r", str(requirements)], stdout=subprocess.DEVNULL)
        _KAFI_STAMP.write_text(requirements.read_text())
    if (KAFI_SUITE / "test" / "test_kafka_restproxy.py").exists():
        return
    with tempfile.TemporaryDirectory(prefix="kafi-sdist-") as scratch:
        _run([str(KAFI_PYTHON), "-m", "pip", "download", "--quiet", "--no-deps",
              "--disable-pip-version-check", "--no-binary", ":all:", "-d", scratch,
              f"kafi=={KAFI_VERSION}"], stdout=subprocess.DEVNULL)
        archive = Path(scratch) / f"kafi-{KAFI_VERSION}.tar.gz"
        with tarfile.open(archive) as sdist:
            sdist.extractall(KAFI_SUITE.parent, filter="data")


def main() -> int:
    install_debian()
    install_node_packages()
    install_kafi()
    return 0


if __name__ == "__main__":
    sys.exit(main())
