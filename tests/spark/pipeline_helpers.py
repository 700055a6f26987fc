"""Shared parts of the pipeline tests: head-office events, reference data, tag records,
and a Spark standalone master + worker started from the pyspark installation."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moldau.client import SyncConsumer, SyncProducer
from moldau.testing.processes import free_port, terminate
from moldau.testing.tail import complete_text

KNOWN = {"c0": {"segment": "gold", "region": "north"},
         "c1": {"segment": "silver", "region": "south"},
         "c2": {"segment": "bronze", "region": "east"}}


def event(i: int) -> dict[str, Any]:
    """Event i of the head office; subjects c0..c6, of which the branch knows c0..c2."""
    return {"id": f"c{i % 7}", "seq": i, "amount": round(i * 1.25, 2)}


def produce_events(bootstrap: str, topic: str, first: int, count: int,
                   config: dict[str, Any] | None = None, *, partitions: int = 2) -> None:
    producer = SyncProducer({"bootstrap.servers": bootstrap, "linger.ms": 1, **(config or {})})
    for i in range(first, first + count):
        producer.send(topic, json.dumps(event(i)), key=event(i)["id"],
                      partition=i % partitions)
    producer.flush(60)
    producer.close()


def write_reference_csv(path: Path) -> Path:
    lines = ["id,segment,region"] + [f"{k},{v['segment']},{v['region']}"
                                     for k, v in KNOWN.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def read_tags(bootstrap: str, topic: str, expected: int,
              timeout: float = 60) -> list[dict[str, Any]]:
    """Every tag record of ``topic`` (waits until ``expected`` arrived, then a little more)."""
    consumer = SyncConsumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"})
    consumer.assign([(topic, p) for p in consumer.partitions_for(topic)])
    records: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    quiet_until = None
    while time.monotonic() < deadline:
        batch = consumer.poll(0.3)
        for r in batch:
            tag = json.loads(r.value)
            tag["_key"] = r.key
            records.append(tag)
        if len(records) >= expected:
            quiet_until = quiet_until or time.monotonic() + 1.0  # catch duplicates, if any
            if time.monotonic() >= quiet_until:
                break
    consumer.close()
    return records


def check_tags(tags: list[dict[str, Any]], source_topic: str, count: int) -> None:
    """One tag record per source event 0..count-1, each joined correctly."""
    positions = [(t["source"]["partition"], t["source"]["offset"]) for t in tags]
    assert len(positions) == len(set(positions)), "a source record was tagged twice"
    assert sorted(t["event"]["seq"] for t in tags) == list(range(count))
    for t in tags:
        assert t["source"]["topic"] == source_topic
        assert t["id"] == t["event"]["id"] and t["_key"] == t["id"].encode()
        assert t["tags"] == KNOWN.get(t["id"]), t
        assert t["raw"] is None
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", t["source"]["timestamp"])


@dataclass
class Standalone:
    """A Spark standalone master and one worker, started from the pyspark installation."""

    master: subprocess.Popen[bytes]
    worker: subprocess.Popen[bytes]
    url: str
    logs: Path

    def stop(self) -> None:
        for proc in (self.worker, self.master):
            terminate(proc, 20)


def _wait_for(path: Path, pattern: str, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = complete_text(path)  # the process is still writing its log
        if re.search(pattern, text):
            return
        if proc.poll() is not None:
            raise RuntimeError(f"{path.name}: exited with {proc.returncode}:\n{text[-3000:]}")
        time.sleep(0.2)
    raise TimeoutError(f"{pattern!r} not in {path} after {timeout}s")


def start_standalone(work: Path, cores: int = 2, timeout: float = 120) -> Standalone:
    from moldau.spark.session import prepare_environment, spark_home

    prepare_environment()
    home = spark_home()
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_NO_DAEMONIZE": "1", "PYSPARK_PYTHON": sys.executable}
    spark_class = str(home / "bin" / "spark-class")
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    work.mkdir(parents=True, exist_ok=True)
    master_log, worker_log = work / "master.log", work / "worker.log"
    with open(master_log, "wb") as out:
        master = subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", str(port), "--webui-port", str(free_port())],
            stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        _wait_for(master_log, r"I have been elected leader|Starting Spark master", master,
                  timeout)
        with open(worker_log, "wb") as out:
            worker = subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host",
                 "127.0.0.1", "--cores", str(cores), "--memory", "2g", "--webui-port",
                 str(free_port()), "--work-dir", str(work / "worker")],
                stdout=out, stderr=subprocess.STDOUT, env=env)
    except BaseException:
        master.kill()
        master.wait()
        raise
    cluster = Standalone(master, worker, url, work)
    try:
        _wait_for(worker_log, r"Successfully registered with master", worker, timeout)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def pipeline_command(source_bootstrap: str, source_topic: str, target_bootstrap: str,
                     target_topic: str, checkpoint: Path, *more: str) -> list[str]:
    return [sys.executable, "-m", "moldau.cli.main", "pipeline", "tag",
            "--source-bootstrap", source_bootstrap, "--source-topic", source_topic,
            "--target-bootstrap", target_bootstrap, "--target-topic", target_topic,
            "--checkpoint", str(checkpoint), *more]


def main(argv: list[str] | None = None) -> int:
    """``python -m tests.spark.pipeline_helpers produce|read ...`` (run inside lab namespaces).

    produce: create the topic when missing and send events FIRST..FIRST+COUNT-1;
    read: print the tag records of a topic as one JSON list.
    """
    import argparse

    from moldau.client import NewTopic, SyncAdminClient

    parser = argparse.ArgumentParser(prog="pipeline_helpers")
    parser.add_argument("action", choices=["produce", "read"])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--count", type=int, default=0)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--expected", type=int, default=0)
    args = parser.parse_args(argv)
    if args.action == "produce":
        admin = SyncAdminClient({"bootstrap.servers": args.bootstrap})
        if args.topic not in admin.list_topics():
            admin.create_topics([NewTopic(args.topic, args.partitions, 1)])
        admin.close()
        produce_events(args.bootstrap, args.topic, args.first, args.count,
                       partitions=args.partitions)
        print(json.dumps({"produced": args.count}))
        return 0
    tags = read_tags(args.bootstrap, args.topic, args.expected)
    for tag in tags:
        tag["_key"] = tag["_key"].decode() if tag["_key"] is not None else None
    print(json.dumps(tags))
    return 0


if __name__ == "__main__":
    sys.exit(main())
