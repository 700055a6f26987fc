"""Seed 004's four REST Proxy commands, run as the seed writes them with the real ``curl``,
against ``moldau serve`` with ``rest.proxy.listeners`` on a free port (only
``localhost:8082`` is replaced by that address). As with Confluent's proxy, the records call
may answer ``[]`` while the new instance joins its group; the seed's reader calls again."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator

import pytest

from moldau.testing.rest import RestBrokerProcess

# Verbatim from seed 004 (line breaks and all).
PRODUCE = '''curl -X POST -H "Content-Type: application/vnd.kafka.json.v2+json" \\
--data '{"records":[{"value":{"foo":"bar"}}]}' "http://localhost:8082/topics/jsontest"'''
CREATE = '''curl -X POST -H "Content-Type: application/vnd.kafka.v2+json" \\
--data '{"name": "my_consumer_instance", "format": "json", "auto.offset.reset": "earliest"}' \\
http://localhost:8082/consumers/my_json_consumer'''
SUBSCRIBE = '''curl -X POST -H "Content-Type: application/vnd.kafka.v2+json" --data '{"topics":["jsontest"]}' \\
http://localhost:8082/consumers/my_json_consumer/instances/my_consumer_instance/subscription'''  # noqa: E501
RECORDS = '''curl -X GET -H "Accept: application/vnd.kafka.json.v2+json" \\
http://localhost:8082/consumers/my_json_consumer/instances/my_consumer_instance/records'''

EXPECTED = '[{"topic":"jsontest","key":null,"value":{"foo":"bar"},"partition":0,"offset":0}]'


@pytest.fixture
def serve() -> Iterator[RestBrokerProcess]:
    assert shutil.which("curl"), "curl is not installed"
    with RestBrokerProcess() as broker:
        yield broker
        assert broker.stop() == 0


def curl(command: str, broker: RestBrokerProcess) -> str:
    hostport = broker.rest_url.split("://", 1)[1]
    done = subprocess.run(["bash", "-c", command.replace("localhost:8082", hostport)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, (command, done.stderr)
    return done.stdout


def test_seed_004_curl_commands_verbatim(serve: RestBrokerProcess) -> None:
    produced = json.loads(curl(PRODUCE, serve))
    assert produced["offsets"] == [{"partition": 0, "offset": 0, "error_code": None,
                                    "error": None}]
    created = json.loads(curl(CREATE, serve))
    assert created == {"instance_id": "my_consumer_instance",
                       "base_uri": f"{serve.rest_url}/consumers/my_json_consumer/instances/"
                                   "my_consumer_instance"}
    assert curl(SUBSCRIBE, serve) == ""  # 204 No Content
    answers = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        answers.append(curl(RECORDS, serve))
        if answers[-1] != "[]":
            break
    assert answers[-1] == EXPECTED, answers
    assert all(a == "[]" for a in answers[:-1]), answers
    # run again, the produce appends and the instance reads on from where it was
    assert json.loads(curl(PRODUCE, serve))["offsets"][0]["offset"] == 1
    for _ in range(10):
        answer = curl(RECORDS, serve)
        if answer != "[]":
            break
    assert answer == EXPECTED.replace('"offset":0', '"offset":1')
