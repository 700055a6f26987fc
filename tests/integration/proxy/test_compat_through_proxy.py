"""A representative slice of the client compatibility suite, run through ``moldau proxy``.

Every real client (confluent-kafka, kcat, kafka-python, aiokafka, kafkajs, seed 004) runs its
group commit/restart/resume test, its admin and metadata tests, LogAppendTime, and one codec
of its byte-exact produce/fetch matrix, against a broker whose advertised address
(``broker.invalid``) only the proxy can reach. Each client uses its own Metadata and
FindCoordinator versions, so together they cover the rewriting end to end. About a minute.

The whole suite (200 tests) runs through the proxy with
``MOLDAU_COMPAT_ENDPOINT=direct,moldau.testing.proxy:proxied_endpoint pytest tests/compat``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SELECTION = ("group_commit_restart_resume or group_consume_commit_resume or topic_admin or "
             "metadata_listing or seed or log_append_time or "
             "((fetch_back_byte_exact or consume_all_byte_exact) and zstd)")
CLIENT_MODULES = ["test_confluent_kafka", "test_kcat", "test_kafka_python", "test_aiokafka",
                  "test_kafkajs", "test_seed_004"]


def _pytest(env: dict[str, str], *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "tests/compat", "-k", SELECTION, "-p",
         "no:cacheprovider", "-W", "ignore::DeprecationWarning", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow  # ~40 s
@pytest.mark.timeout(900)
def test_compat_slice_through_the_proxy() -> None:
    env = dict(os.environ, MOLDAU_COMPAT_ENDPOINT="moldau.testing.proxy:proxied_endpoint")
    collected = _pytest(env, "--collect-only", "-q", timeout=120).stdout
    for module in CLIENT_MODULES:  # a renamed test must not drop a client silently
        assert f"tests/compat/{module}.py::" in collected, (module, collected[-3000:])
    assert "proxied_endpoint]" in collected

    result = _pytest(env, "-q", "-rfEs", timeout=880)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-6000:]
    summary = re.search(r"(\d+) passed", out)
    assert summary, out[-3000:]
    assert not re.search(r"\d+ (failed|skipped|errors?)\b", out), out[-3000:]
    assert int(summary[1]) == collected.count("proxied_endpoint]"), out[-3000:]
