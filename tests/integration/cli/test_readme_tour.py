"""The README's tour, run as a newcomer runs it: every command of its shell blocks and its
seed 004 Python snippet, in order, against a broker started from ``make run``'s embedded
settings (only the bootstrap address is changed). The commands that need a remote broker use
documentation addresses, which the README must mark as placeholders.

Found by a newcomer: the snippet needed confluent-kafka without saying so, and left its
consumer in ``mygroup`` for the session timeout, so the next command of the tour,
``--reset-offsets --execute``, failed (the group was still Stable).
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from moldau.testing.rest import PlatformBrokerProcess
from moldau.testing.runner import BrokerProcess

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "README.md"
EMBEDDED = ROOT / "moldau" / "broker" / "config" / "server.properties"
PLACEHOLDERS = ("203.0.113.7", "10.0.0.5")


def fenced_blocks(language: str) -> list[str]:
    text = README.read_text()
    return re.findall(rf"^```{language}\n(.*?)^```$", text, re.M | re.S)


def commands(block: str) -> list[str]:
    """The block's commands: continuation lines joined, comments and blank lines dropped."""
    joined = re.sub(r"\\\n\s*", "", block)
    return [line for line in joined.splitlines() if line.strip() and not line.startswith("#")]


def block_with(language: str, needle: str) -> str:
    [block] = [b for b in fenced_blocks(language) if needle in b]
    return block


@pytest.fixture(scope="module")
def make_run_broker(tmp_path_factory: pytest.TempPathFactory
                    ) -> Iterator[PlatformBrokerProcess]:
    """``make run``'s broker: the embedded server.properties and make run's overrides (schema
    registry, REST Proxy), on free ports and a temporary data directory instead of
    localhost:9092/8081/8082 and ./data."""
    data = tmp_path_factory.mktemp("make-run") / "data"
    text = EMBEDDED.read_text()
    text = re.sub(r"^listeners=.*$", "listeners=PLAINTEXT://127.0.0.1:0", text, flags=re.M)
    text = re.sub(r"^log\.dirs=.*$", f"log.dirs={data}", text, flags=re.M)
    # make run's overrides, on free ports
    makefile = (ROOT / "Makefile").read_text()
    assert "schema.registry.listeners=http://localhost:8081" in makefile
    assert "rest.proxy.listeners=http://localhost:8082" in makefile
    text += ("\nschema.registry.listeners=http://127.0.0.1:0"
             "\nrest.proxy.listeners=http://127.0.0.1:0\n")
    broker = PlatformBrokerProcess(data, config_text=text)
    broker.start()
    yield broker
    broker.stop()
    broker.close()


def run_shell(command: str, broker: BrokerProcess, cwd: Path) -> subprocess.CompletedProcess[str]:
    """One README command line, with ``localhost:9092`` and ``.venv/bin/`` pointing at the
    test broker and this virtual environment."""
    if command.startswith("kcat ") and shutil.which("kcat") is None:
        pytest.fail("kcat is not installed (make test installs it)", pytrace=False)
    line = command.replace("localhost:9092", broker.bootstrap)
    if isinstance(broker, PlatformBrokerProcess):
        line = line.replace("http://localhost:8081", broker.registry_url)
    line = line.replace(".venv/bin/", f"{Path(sys.executable).parent}/")
    done = subprocess.run(["bash", "-o", "pipefail", "-c", line], cwd=cwd, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, f"{command}\nexited {done.returncode}:\n{done.stderr}"
    return done


def test_the_tour_runs_in_order(make_run_broker: BrokerProcess, tmp_path: Path) -> None:
    # Topics, produce and consume.
    outputs = [run_shell(c, make_run_broker, tmp_path)
               for c in commands(block_with("sh", "kcat -b localhost:9092 -L"))]
    assert set(outputs[-1].stdout.splitlines()) == {"k1\thello", "k2\tworld"}

    # Configs; the remote-broker commands are placeholders, documented as such.
    configs = block_with("sh", "--add-config retention.ms=3600000")
    remote = [c for c in commands(configs) if any(a in c for a in PLACEHOLDERS)]
    local = [c for c in commands(configs) if c not in remote]
    assert remote and local
    markers = [line for line in configs.splitlines() if line.startswith("# PLACEHOLDERS")]
    assert markers and all(a in markers[0] for a in PLACEHOLDERS), (
        f"the commands {remote} use documentation addresses without a '# PLACEHOLDERS' line")
    prose = README.read_text().split(configs)[0].rsplit("```", 1)[0][-800:]
    assert "placeholders" in prose and all(f"`{a}" in prose for a in PLACEHOLDERS), prose
    described = [run_shell(c, make_run_broker, tmp_path) for c in local][-1]
    assert "retention.ms=3600000" in described.stdout

    # Seed 004's REST Proxy commands, against make run's proxy (a read may answer [] while
    # the instance joins its group: the README says to run it again).
    rest = commands(block_with("sh", "localhost:8082/topics/jsontest"))
    hostport = make_run_broker.rest_url.split("://", 1)[1]
    answers = [run_shell(c.replace("localhost:8082", hostport), make_run_broker, tmp_path)
               for c in rest]
    assert '"partition":0,"offset":0' in answers[0].stdout
    for _ in range(30):
        if answers[-1].stdout != "[]":
            break
        answers.append(run_shell(rest[-1].replace("localhost:8082", hostport),
                                 make_run_broker, tmp_path))
    assert answers[-1].stdout == ('[{"topic":"jsontest","key":null,"value":{"foo":"bar"},'
                                  '"partition":0,"offset":0}]')
    assert "make run" in README.read_text().split(rest[0].split()[0], 1)[0][-3000:]

    # Seed 004's Python code: the README says how to get confluent-kafka (the pinned version).
    snippet = block_with("python", "from confluent_kafka import")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]["test"]
    [pin] = [r for r in extras if r.startswith("confluent-kafka")]
    assert f"`.venv/bin/pip install '{pin}'`" in README.read_text()
    script = tmp_path / "seed004.py"
    script.write_text(snippet.replace("localhost:9092", make_run_broker.bootstrap))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "b'{\"foo\":\"bar\"}'\n"

    # Schemas: register, read back, Avro records through the registry.
    schemas = [run_shell(c, make_run_broker, tmp_path)
               for c in commands(block_with("sh", "subjects/tags-value/versions"))]
    assert json.loads(schemas[0].stdout)["id"] == 1
    latest = json.loads(schemas[1].stdout)
    assert latest["subject"] == "tags-value" and latest["version"] == 1
    assert json.loads(schemas[-1].stdout) == {"id": 7}

    # Consumer groups: right after the snippet, as a newcomer goes on.
    groups = [run_shell(c, make_run_broker, tmp_path)
              for c in commands(block_with("sh", "--reset-offsets"))]
    assert re.search(r"jsontest\s+0\s+0\s*$", groups[-1].stdout, re.M), groups[-1].stdout


def test_commands_are_split_as_a_shell_would(tmp_path: Path) -> None:
    """The block parser joins continuation lines and keeps quoting intact."""
    block = "# a comment\nmoldau consume -b h:1 --address-map 'a:1=b:2' \\\n    --topic t\n\n"
    assert commands(block) == ["moldau consume -b h:1 --address-map 'a:1=b:2' --topic t"]
    assert shlex.split(commands(block)[0])[-3] == "a:1=b:2"
