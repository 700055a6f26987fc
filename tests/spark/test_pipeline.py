"""Acceptance 4 (and the loopback half of 3): seed 002's tagging pipeline.

The head-office cluster here is a broker that advertises ``head-office-kafka.invalid:9092``,
a name no resolver knows, as a broker behind NAT advertises its internal address; the
pipeline reaches it only through ``--address-map``. The branch cluster is the suite's broker.
The network-namespace version with real NAT is test_pipeline_nat.py.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from moldau.client import NewTopic, SyncAdminClient, SyncProducer
from moldau.spark.tag_pipeline import TagPipeline, run
from moldau.testing.runner import BrokerProcess

from .pipeline_helpers import (
    KNOWN,
    check_tags,
    pipeline_command,
    produce_events,
    read_tags,
    start_standalone,
    write_reference_csv,
)

ADVERTISED = "head-office-kafka.invalid:9092"


class HeadOffice:
    def __init__(self, broker: BrokerProcess) -> None:
        self.broker = broker
        self.bootstrap = broker.bootstrap
        self.address_map = f"{ADVERTISED}={broker.bootstrap}"
        self.client = {"broker.address.map": self.address_map}

    def topic(self, partitions: int = 2) -> str:
        name = f"events-{uuid.uuid4().hex[:8]}"
        admin = SyncAdminClient({"bootstrap.servers": self.bootstrap, **self.client})
        admin.create_topics([NewTopic(name, partitions, 1)])
        admin.close()
        return name


@pytest.fixture(scope="module")
def head_office(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HeadOffice]:
    broker = BrokerProcess(tmp_path_factory.mktemp("head-office") / "data", {
        "num.partitions": 2, "advertised.listeners": f"PLAINTEXT://{ADVERTISED}"})
    broker.start()
    yield HeadOffice(broker)
    broker.stop()
    broker.close()


def pipeline(ho: HeadOffice, source: str, broker: BrokerProcess, target: str, tmp: Path,
             **more: Any) -> TagPipeline:
    return TagPipeline(source_bootstrap=ho.bootstrap, source_topic=source,
                       address_map=ho.address_map, target_bootstrap=broker.bootstrap,
                       target_topic=target, checkpoint=str(tmp / f"ck-{target}"), **more)


def test_csv_reference_and_restart_on_local(spark: Any, broker: BrokerProcess,
                                            head_office: HeadOffice, tmp_path: Path) -> None:
    source, target = head_office.topic(), f"tags-{uuid.uuid4().hex[:8]}"
    produce_events(head_office.bootstrap, source, 0, 30, head_office.client)
    csv = write_reference_csv(tmp_path / "branch.csv")
    p = pipeline(head_office, source, broker, target, tmp_path, reference=str(csv))
    assert run(spark, p)["records"] == 30
    check_tags(read_tags(broker.bootstrap, target, 30), source, 30)
    # Restart from the checkpoint: only the new events are tagged.
    produce_events(head_office.bootstrap, source, 30, 15, head_office.client)
    assert run(spark, p)["records"] == 15
    check_tags(read_tags(broker.bootstrap, target, 45), source, 45)


def test_compacted_topic_reference_while_running(spark: Any, broker: BrokerProcess,
                                                 head_office: HeadOffice,
                                                 tmp_path: Path) -> None:
    source, target = head_office.topic(), f"tags-{uuid.uuid4().hex[:8]}"
    reference = f"branch-ref-{uuid.uuid4().hex[:8]}"
    SyncAdminClient({"bootstrap.servers": broker.bootstrap}).create_topics(
        [NewTopic(reference, 1, 1, configs={"cleanup.policy": "compact"})])
    producer = SyncProducer({"bootstrap.servers": broker.bootstrap})
    producer.send(reference, json.dumps({"segment": "stale"}), key="c0")
    for key, attrs in KNOWN.items():
        producer.send(reference, json.dumps(attrs), key=key)
    producer.send(reference, json.dumps({"segment": "gone"}), key="c5")
    producer.send(reference, None, key="c5")  # tombstone: the branch forgot c5
    producer.flush()
    producer.close()

    p = pipeline(head_office, source, broker, target, tmp_path, reference_topic=reference,
                 trigger="processing-time=200ms")
    stop = threading.Event()
    result: dict[str, Any] = {}

    def work() -> None:
        try:
            result.update(run(spark, p, stop_event=stop))
        except BaseException as exc:
            result["error"] = exc

    runner = threading.Thread(target=work)
    runner.start()
    try:
        produce_events(head_office.bootstrap, source, 0, 10, head_office.client)
        # The second wave once the first is tagged: the running query picks up new events.
        tags: list[dict[str, Any]] = []
        deadline = time.monotonic() + 120
        while len(tags) < 10 and runner.is_alive() and time.monotonic() < deadline:
            tags = read_tags(broker.bootstrap, target, 10, timeout=2)
        produce_events(head_office.bootstrap, source, 10, 10, head_office.client)
        deadline = time.monotonic() + 120
        while len(tags) < 20 and runner.is_alive() and time.monotonic() < deadline:
            tags = read_tags(broker.bootstrap, target, 20, timeout=2)
    finally:
        stop.set()
        runner.join(120)
    assert not runner.is_alive() and "error" not in result, str(result.get("error"))[:3000]
    check_tags(tags, source, 20)
    assert result["records"] == 20


def test_parquet_reference(spark: Any, broker: BrokerProcess, head_office: HeadOffice,
                           tmp_path: Path) -> None:
    source, target = head_office.topic(1), f"tags-{uuid.uuid4().hex[:8]}"
    produce_events(head_office.bootstrap, source, 0, 12, head_office.client, partitions=1)
    table = pa.table({"id": list(KNOWN), "segment": [v["segment"] for v in KNOWN.values()],
                      "region": [v["region"] for v in KNOWN.values()]})
    pq.write_table(table, tmp_path / "branch.parquet")
    p = pipeline(head_office, source, broker, target, tmp_path,
                 reference=str(tmp_path / "branch.parquet"))
    assert run(spark, p)["records"] == 12
    check_tags(read_tags(broker.bootstrap, target, 12), source, 12)


def test_cli_on_a_standalone_master_and_worker(broker: BrokerProcess, head_office: HeadOffice,
                                              tmp_path: Path) -> None:
    source, target = head_office.topic(), f"tags-{uuid.uuid4().hex[:8]}"
    produce_events(head_office.bootstrap, source, 0, 25, head_office.client)
    csv = write_reference_csv(tmp_path / "branch.csv")
    cluster = start_standalone(tmp_path / "standalone")
    try:
        command = pipeline_command(
            head_office.bootstrap, source, broker.bootstrap, target, tmp_path / "ck",
            "--address-map", head_office.address_map, "--reference", str(csv),
            "--master", cluster.url, "--spark-conf", "spark.executor.memory=1g")
        done = subprocess.run(command, capture_output=True, text=True, timeout=400)
        assert done.returncode == 0, done.stderr[-5000:]
        summary = json.loads(done.stdout.strip().splitlines()[-1])
        assert summary["records"] == 25
        app_dirs = list((tmp_path / "standalone" / "worker").glob("app-*"))
        assert app_dirs, "the job did not run on the standalone worker"
    finally:
        cluster.stop()
    check_tags(read_tags(broker.bootstrap, target, 25), source, 25)
