"""What each real client is told about the cluster through one bootstrap address.

Every function returns ``{broker id: "host:port"}`` as that client sees it, asked through
``bootstrap`` only: confluent-kafka (librdkafka 2.16, Metadata v13), kafka-python
(DescribeCluster), aiokafka (Metadata v5), kafkajs (``admin.describeCluster``, Metadata v6)
and ``kcat -L`` (librdkafka 2.0.2, Metadata v4).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

JS_DIR = Path(__file__).resolve().parents[1] / "compat" / "js"
TIMEOUT = 60

Brokers = dict[int, str]


def require(*tools: str) -> None:
    """Fail (not skip) when a client the suite must cover is not installed."""
    missing = [t for t in tools if shutil.which(t) is None]
    if "node" in tools and not (JS_DIR / "node_modules" / "kafkajs").is_dir():
        missing.append(f"kafkajs in {JS_DIR}/node_modules")
    if missing:
        pytest.fail(f"{', '.join(missing)} not installed: run "
                    f"`python -m moldau.testing.install_clients` (make test does)")


def confluent_brokers(bootstrap: str) -> Brokers:
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=TIMEOUT)
    return {b.id: f"{b.host}:{b.port}" for b in metadata.brokers.values()}


def kafka_python_brokers(bootstrap: str) -> Brokers:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT * 1000)
    try:
        cluster = admin.describe_cluster()
    finally:
        admin.close()
    return {b["broker_id"]: f"{b['host']}:{b['port']}" for b in cluster["brokers"]}


def aiokafka_brokers(bootstrap: str) -> Brokers:
    from aiokafka.admin import AIOKafkaAdminClient

    async def ask() -> Brokers:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            cluster = await admin.describe_cluster()
        finally:
            await admin.close()
        return {b["node_id"]: f"{b['host']}:{b['port']}" for b in cluster["brokers"]}

    return asyncio.run(ask())


_KAFKAJS = r"""
const { Kafka, logLevel } = require('kafkajs')
const kafka = new Kafka({ clientId: 'moldau-cluster-test', brokers: [process.env.BOOTSTRAP],
                          logLevel: logLevel.NOTHING })
const admin = kafka.admin()
;(async () => {
  await admin.connect()
  const cluster = await admin.describeCluster()
  await admin.disconnect()
  console.log(JSON.stringify(cluster))
})().catch((e) => { console.error(e); process.exit(1) })
"""


def kafkajs_brokers(bootstrap: str) -> Brokers:
    run = subprocess.run(["node", "-e", _KAFKAJS], capture_output=True, text=True,
                         timeout=TIMEOUT, cwd=JS_DIR,
                         env={**os.environ, "BOOTSTRAP": bootstrap,
                              "NODE_PATH": str(JS_DIR / "node_modules")})
    assert run.returncode == 0, f"kafkajs describeCluster via {bootstrap}:\n{run.stderr}"
    cluster = json.loads(run.stdout.strip().splitlines()[-1])
    return {b["nodeId"]: f"{b['host']}:{b['port']}" for b in cluster["brokers"]}


_KCAT_BROKER = re.compile(r"^\s+broker (?P<id>\d+) at (?P<addr>\S+)", re.M)


def kcat_metadata(bootstrap: str) -> str:
    run = subprocess.run(["kcat", "-b", bootstrap, "-L", "-m", "30"], capture_output=True,
                         text=True, timeout=TIMEOUT)
    assert run.returncode == 0, f"kcat -L -b {bootstrap}: {run.stderr}"
    return run.stdout


def kcat_brokers(bootstrap: str) -> Brokers:
    return {int(m["id"]): m["addr"] for m in _KCAT_BROKER.finditer(kcat_metadata(bootstrap))}


CLIENTS = {
    "confluent-kafka": confluent_brokers,
    "kafka-python": kafka_python_brokers,
    "aiokafka": aiokafka_brokers,
    "kafkajs": kafkajs_brokers,
    "kcat": kcat_brokers,
}
