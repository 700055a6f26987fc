"""An outside test suite against Moldau's schema registry (issue 15, acceptance 5): the
end-to-end specs that Confluent ships inside its JavaScript client, npm's
``@confluentinc/schemaregistry`` 1.10.1 (``dist/e2e/*.spec.js``), run with jest 29.7.0 as
they are, against a ``moldau serve`` subprocess with its in-process registry on free ports.

* ``schemaregistry-client.spec.js`` (8 tests): register with metadata, get by subject and
  id, lookup, versions, latest, latest with metadata, soft and permanent deletes,
  compatibility (per subject and version), subject and global config.
* ``schemaregistry-avro.spec.js`` (11): ``AvroSerializer``/``AvroDeserializer`` through the
  broker with ``@confluentinc/kafka-javascript`` (librdkafka) producers and consumers:
  records, every primitive, ``useLatestVersion`` / ``autoRegisterSchemas``, two topics.
* ``schemaregistry-json.spec.js`` (4): the same for JSON Schema, with references.

Nothing of theirs is edited: tests/compat/schema_registry_js/moldau-setup.js sets the
registry URL of their ``test-constants`` client config before each spec, and
kafka-javascript.js hands their hard-coded ``localhost:9092`` broker list our broker's
address (see jest.config.js there). Their ``dist/test/`` specs are unit tests of the client
against mocks (no server) and are not part of this run. docs/compatibility.md has the
commands and the result.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from moldau.testing.install_clients import SR_JS_DIR, missing_node_packages
from moldau.testing.registry import RegistryBrokerProcess

from .conftest import COMPAT_SETTINGS, require_tool

JEST = SR_JS_DIR / "node_modules" / "jest" / "bin" / "jest.js"
#: Every spec file of the package's e2e folder and how many tests it has (1.10.1).
EXPECTED = {"schemaregistry-client.spec.js": 8, "schemaregistry-avro.spec.js": 11,
            "schemaregistry-json.spec.js": 4}
TIMEOUT = 300


def _installed() -> None:
    require_tool("node")
    missing = missing_node_packages(SR_JS_DIR)
    if missing:
        pytest.fail(f"npm packages missing from {SR_JS_DIR}/node_modules: {', '.join(missing)}; "
                    "run `python -m moldau.testing.install_clients` (make test-deps)")


def run_jest(registry_url: str, bootstrap: str, out: Path) -> dict[str, Any]:
    """Run Confluent's e2e specs against ``registry_url`` and ``bootstrap``; jest's JSON
    report. One worker (``--runInBand``): the specs share a consumer group name and the
    machine has two cores."""
    env = dict(os.environ, SCHEMA_REGISTRY_URL=registry_url, KAFKA_BOOTSTRAP=bootstrap)
    done = subprocess.run(
        ["node", str(JEST), "--config", str(SR_JS_DIR / "jest.config.js"), "--ci",
         "--runInBand", "--silent", "--json", "--outputFile", str(out)],
        cwd=SR_JS_DIR, env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    if not out.exists():
        raise AssertionError(f"jest wrote no report (exit {done.returncode}):\n"
                             f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    report: dict[str, Any] = json.loads(out.read_text())
    return report


def _failures(report: dict[str, Any]) -> list[str]:
    found = []
    for spec in report["testResults"]:
        for case in spec["assertionResults"]:
            if case["status"] != "passed":
                found.append(f"{case['fullName']}: {case['status']}\n"
                             + "\n".join(case.get("failureMessages") or [])[:2000])
        if spec.get("message") and not spec["assertionResults"]:
            found.append(f"{spec['name']}: {spec['message'][:2000]}")
    return found


def test_confluents_javascript_client_suite_passes_against_moldau(tmp_path: Path) -> None:
    _installed()
    with RegistryBrokerProcess(tmp_path / "data", COMPAT_SETTINGS) as broker:
        report = run_jest(broker.registry_url, broker.bootstrap, tmp_path / "jest.json")
        with urllib.request.urlopen(f"{broker.registry_url}/subjects", timeout=10) as answer:
            subjects = json.loads(answer.read())
    failures = _failures(report)
    assert not failures, "\n\n".join(failures)
    per_spec = {Path(spec["name"]).name: len(spec["assertionResults"])
                for spec in report["testResults"]}
    assert per_spec == EXPECTED
    total = sum(EXPECTED.values())
    assert (report["numTotalTests"], report["numPassedTests"], report["numFailedTests"],
            report["numPendingTests"]) == (total, total, 0, 0)
    assert report["success"] is True
    # the serializer specs registered their topics' subjects here, in Moldau's registry
    assert any(s.endswith("-value") for s in subjects)
