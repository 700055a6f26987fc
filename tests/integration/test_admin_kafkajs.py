"""Admin APIs through kafkajs 2.2.4 (node) against a ``moldau serve`` subprocess.

kafkajs is installed into tests/compat/js/node_modules by ``make test-deps``. The script runs
the admin calls and prints one JSON document with what it saw; the assertions are here.
(Deleting an unknown topic is left out: kafkajs retries UNKNOWN_TOPIC_OR_PARTITION for ~13 s,
as it does against Kafka.)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from moldau.testing.runner import BrokerProcess

JS_DIR = Path(__file__).resolve().parents[1] / "compat" / "js"

SCRIPT = r"""
const { Kafka, ConfigResourceTypes, logLevel } = require('kafkajs')
const kafka = new Kafka({ clientId: 'moldau-admin-test', brokers: [process.env.BOOTSTRAP],
                          logLevel: logLevel.NOTHING })
const admin = kafka.admin()
const out = {}
const errorOf = async (fn) => {
  try { await fn(); return null } catch (e) {
    const inner = (e.errors && e.errors[0]) || e
    return { type: inner.type || e.type || e.name, message: inner.message || e.message }
  }
}
;(async () => {
  await admin.connect()
  const topic = process.env.TOPIC
  out.created = await admin.createTopics({ topics: [{ topic, numPartitions: 2,
    replicationFactor: 1, configEntries: [{ name: 'retention.ms', value: '7000' }] }] })
  out.createdAgain = await admin.createTopics({ topics: [{ topic, numPartitions: 2 }] })
  out.badConfig = await errorOf(() => admin.createTopics({ topics: [{ topic: topic + '-bad',
    configEntries: [{ name: 'segment.bytes', value: 'huge' }] }] }))
  const md = await admin.fetchTopicMetadata({ topics: [topic] })
  out.partitions = md.topics[0].partitions.length
  const described = await admin.describeConfigs({ includeSynonyms: true, resources: [
    { type: ConfigResourceTypes.TOPIC, name: topic, configNames: ['retention.ms'] }] })
  out.retention = described.resources[0].configEntries[0]
  await admin.alterConfigs({ validateOnly: false, resources: [{ type: ConfigResourceTypes.TOPIC,
    name: topic, configEntries: [{ name: 'cleanup.policy', value: 'compact' }] }] })
  const after = await admin.describeConfigs({ includeSynonyms: false, resources: [
    { type: ConfigResourceTypes.TOPIC, name: topic,
      configNames: ['cleanup.policy', 'retention.ms'] }] })
  out.afterAlter = after.resources[0].configEntries.map(
    (e) => [e.configName, e.configValue, e.configSource])
  await admin.createPartitions({ topicPartitions: [{ topic, count: 4 }] })
  out.partitionsAfter = (await admin.fetchTopicMetadata({ topics: [topic] }))
    .topics[0].partitions.length
  out.shrink = await errorOf(() => admin.createPartitions({ topicPartitions: [{ topic,
    count: 1 }] }))
  out.cluster = await admin.describeCluster()
  await admin.deleteTopics({ topics: [topic] })
  out.topicsAfterDelete = await admin.listTopics()
  await admin.disconnect()
  console.log(JSON.stringify(out))
})().catch((e) => { console.error(e); process.exit(1) })
"""


@pytest.fixture(scope="module")
def kafkajs_available() -> None:
    if shutil.which("node") is None or not (JS_DIR / "node_modules" / "kafkajs").is_dir():
        pytest.fail("node or kafkajs missing: run `make test-deps`", pytrace=False)


def test_kafkajs_admin(kafkajs_available: None) -> None:
    with BrokerProcess() as broker:
        env = {**os.environ, "BOOTSTRAP": broker.bootstrap, "TOPIC": "kjs-admin",
               "NODE_PATH": str(JS_DIR / "node_modules")}
        run = subprocess.run(["node", "-e", SCRIPT], capture_output=True, text=True,
                             timeout=90, env=env, cwd=JS_DIR)
        assert run.returncode == 0, run.stderr
        seen = json.loads(run.stdout.strip().splitlines()[-1])
        cluster = seen["cluster"]
        assert cluster["clusterId"] == broker.cluster_id
        assert cluster["controller"] == 1
        assert cluster["brokers"] == [{"nodeId": 1, "host": "127.0.0.1",
                                       "port": broker.port()}]
    assert seen["created"] is True
    assert seen["createdAgain"] is False  # kafkajs maps TOPIC_ALREADY_EXISTS to false
    assert seen["badConfig"]["type"] == "INVALID_CONFIG"
    assert seen["partitions"] == 2
    retention = seen["retention"]
    assert (retention["configName"], retention["configValue"], retention["configSource"]) == (
        "retention.ms", "7000", 1)
    assert [s["configName"] for s in retention["configSynonyms"]] == [
        "retention.ms", "log.retention.hours"]
    # AlterConfigs replaced the topic's configs: retention.ms is back to the default
    assert sorted(seen["afterAlter"]) == [["cleanup.policy", "compact", 1],
                                          ["retention.ms", "604800000", 5]]
    assert seen["partitionsAfter"] == 4
    assert seen["shrink"]["type"] == "INVALID_PARTITIONS"
    assert "kjs-admin" not in seen["topicsAfterDelete"]
