"""An outside test suite against Moldau's REST Proxy (issue 16, acceptance 4): the suite that
ships in the sdist of PyPI's ``kafi`` 0.0.74 (Ralph M. Debusmann's "Swiss army knife for
Kafka"; Apache-2.0), run as it is against a ``moldau serve`` subprocess with its in-process
REST Proxy and schema registry on free ports.

kafi talks to Confluent's REST Proxy through its public API only: v3 for clusters, brokers and
broker configs, topics (create with configs, delete, list, partitions, replicas, configs and
``configs:alter``), consumer groups with their consumers, assignments and lags, and produce
(``POST .../records`` as a stream of JSON objects, in BINARY, JSON, AVRO, PROTOBUF and
JSONSCHEMA with schemas or schema ids); v2 for consumer instances (create with ``format``,
``auto.offset.reset``, ``auto.commit.enable``, subscribe, records with ``timeout`` and
``max_bytes``, commit, committed offsets, assignments, delete) and partition offsets. Its
suite ``test/test_kafka_restproxy.py`` is the class ``Test`` of 49 tests
(``test/test_single_storage_base.py``); its author ran it against Confluent's proxy (local
and Confluent Cloud), so it asserts Confluent's answers.

Nothing of theirs is edited: tests/compat/kafi/configs/ is kafi's connection "local" (the
REST Proxy, the registry, and the Kafka address its ``tearDown`` deletes topics through);
tests/compat/kafi/pytest.ini keeps Moldau's pytest settings away from their run. kafi pins
confluent-kafka 2.13.0, so it runs in its own venv (``moldau.testing.install_clients``).

Of the 49, :data:`NOT_EXERCISED` make no request beyond opening the connection
(``GET /v3/clusters``), by kafi's own code: seven its REST Proxy class overrides with ``pass``,
four whose body is for other storages, two that check kafi's own settings. They pass
trivially and are counted apart; the other 36 made 821 requests to the proxy in a traced run.
docs/compatibility.md has the commands, the result and the routes they use.
"""

from __future__ import annotations

import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from moldau.testing.install_clients import (
    KAFI_DIR,
    KAFI_PYTHON,
    KAFI_SUITE,
    KAFI_VERSION,
    kafi_missing,
)
from moldau.testing.rest import PlatformBrokerProcess

from .conftest import COMPAT_SETTINGS

SUITE = "test/test_kafka_restproxy.py::Test"
TOTAL = 49
#: kafi's tests that exercise nothing against a REST Proxy, and why (kafi 0.0.74's code)
NOT_EXERCISED = {
    # overridden with `pass` in test_kafka_restproxy.py (not in the REST Proxy's API, kafi says)
    "test_delete_groups": "overridden with pass by kafi's REST Proxy suite",
    "test_set_group_offsets": "overridden with pass by kafi's REST Proxy suite",
    "test_lags": "overridden with pass by kafi's REST Proxy suite",
    "test_offsets_for_times": "overridden with pass by kafi's REST Proxy suite",
    "test_consume_from_offsets": "overridden with pass by kafi's REST Proxy suite",
    "test_error_handling": "overridden with pass by kafi's REST Proxy suite",
    "test_compaction": "overridden with pass by kafi's REST Proxy suite",
    # branches of test_single_storage_base.py
    "test_acls": "runs only with a principal (kafi's suite sets none): ACLs need security",
    "test_delete_records": "runs only for kafi's Cluster storage",
    "test_cp_group_offsets": "returns at once for a REST Proxy",
    "test_cp_group_offsets_multiple_topics_in_group": "returns at once for a REST Proxy",
    # they open the connection (GET /v3/clusters) and check kafi's own settings
    "test_cluster_settings": "checks kafi's verbose setting only",
    "test_configs": "lists kafi's configuration files only",
}
TIMEOUT = 1200


def _installed() -> None:
    missing = kafi_missing()
    if missing:
        pytest.fail(f"kafi {KAFI_VERSION} is not installed ({'; '.join(missing)}): run "
                    "`python -m moldau.testing.install_clients` (make test-deps)")


def run_kafi_suite(broker: PlatformBrokerProcess, report: Path) -> subprocess.CompletedProcess[str]:
    """kafi's REST Proxy suite against ``broker``'s proxy and registry, with a JUnit report
    at ``report``."""
    env = dict(os.environ, KAFI_HOME=str(KAFI_DIR), MOLDAU_REST_URL=broker.rest_url,
               MOLDAU_REGISTRY_URL=broker.registry_url, MOLDAU_BOOTSTRAP=broker.bootstrap)
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [str(KAFI_PYTHON), "-m", "pytest", "-c", str(KAFI_DIR / "pytest.ini"),
         "--rootdir", str(KAFI_SUITE), "-q", "--junitxml", str(report), SUITE],
        cwd=KAFI_SUITE, env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False)


def outcomes(report: Path) -> dict[str, str]:
    """Test name -> passed, failed, error or skipped, from a JUnit report."""
    found = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        outcome = "passed"
        for kind in ("failure", "error", "skipped"):
            if case.find(kind) is not None:
                outcome = "failed" if kind == "failure" else kind
        found[case.attrib["name"]] = outcome
    return found


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT + 120)
def test_kafis_rest_proxy_suite_passes_against_moldau(tmp_path: Path) -> None:
    _installed()
    report = tmp_path / "kafi.xml"
    with PlatformBrokerProcess(tmp_path / "data", COMPAT_SETTINGS) as broker:
        done = run_kafi_suite(broker, report)
    assert report.exists(), f"kafi's suite wrote no report (exit {done.returncode}):\n" \
                            f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    found = outcomes(report)
    not_passed = {name: outcome for name, outcome in found.items() if outcome != "passed"}
    assert not not_passed, f"{not_passed}\n{done.stdout[-8000:]}"
    assert len(found) == TOTAL and set(NOT_EXERCISED) <= set(found), sorted(found)
    assert done.returncode == 0
    print(f"kafi {KAFI_VERSION}: {len(found)} passed, 0 failed "
          f"({TOTAL - len(NOT_EXERCISED)} exercise the REST Proxy)")
