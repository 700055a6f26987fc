"""Real registry processes for the durability tests: ``moldau schema-registry`` subprocesses
(stopped with SIGTERM or kill -9), a reader of the ``_schemas`` log itself (confluent-kafka's
consumer, Confluent's key and value JSON), and a snapshot of everything a registry answers."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from moldau.testing.processes import child_env, kill, terminate

READY = re.compile(r"schema registry ready on (http://127\.0\.0\.1:\d+)")
#: The election's log lines: this instance elected (then "caught up; acting as primary"),
#: another one named, or none eligible.
ELECTED = re.compile(r"this instance \(http://[^)]+\) is the primary|the primary is http://"
                     r"|no eligible instance|caught up; acting as primary")


class RegistryProcess:
    """``moldau schema-registry --listeners http://127.0.0.1:0`` against ``bootstrap``; its
    log in ``log``. :attr:`url` once :meth:`start` returned (the "ready" line)."""

    def __init__(self, bootstrap: str, log: Path, *properties: str) -> None:
        self.bootstrap = bootstrap
        self.log = log
        self.properties = properties
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""
        self._start_at = 0

    def start(self, timeout: float = 60) -> RegistryProcess:
        self.log.touch()
        self._start_at = self.log.stat().st_size
        args = [sys.executable, "-m", "moldau.cli.main", "schema-registry",
                "--bootstrap-server", self.bootstrap, "--listeners", "http://127.0.0.1:0"]
        for item in self.properties:
            args += ["--property", item]
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT,
                                         env=child_env())
        deadline = time.monotonic() + timeout
        while True:
            found = READY.search(self.text())
            if found:
                self.url = found.group(1)
                return self
            assert self.proc.poll() is None, self.text()
            assert time.monotonic() < deadline, f"no ready line in {timeout}s:\n{self.text()}"
            time.sleep(0.05)

    def text(self) -> str:
        """This run's part of the log."""
        return self.log.read_bytes()[self._start_at:].decode(errors="replace")

    @property
    def is_primary(self) -> bool:
        """Whether this run's last election line says it acts as the primary."""
        lines = ELECTED.findall(self.text())
        return bool(lines) and lines[-1] == "caught up; acting as primary"

    def kill9(self) -> None:
        assert self.proc is not None
        kill(self.proc)

    def stop(self) -> int:
        assert self.proc is not None
        return terminate(self.proc, 30)

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            kill(self.proc)


def http(url: str, method: str = "GET", body: Any = None, timeout: float = 30
         ) -> tuple[int, Any]:
    """(status, parsed JSON) of one request (errors included)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def snapshot(url: str) -> dict[str, Any]:
    """Everything a registry answers about its state: every subject (deleted ones too) with
    each version's id, type, references and text, its config, the global config, and each
    id's schema and owners."""
    state: dict[str, Any] = {"config": http(f"{url}/config"),
                             "subjects": http(f"{url}/subjects"),
                             "deleted": http(f"{url}/subjects?deleted=true")}
    ids: set[int] = set()
    for subject in state["deleted"][1]:
        for version in http(f"{url}/subjects/{subject}/versions?deleted=true")[1]:
            status, entity = http(f"{url}/subjects/{subject}/versions/{version}?deleted=true")
            state[f"{subject}/{version}"] = (status, entity)
            ids.add(entity["id"])
        state[f"{subject}/config"] = http(f"{url}/config/{subject}")
    for schema_id in sorted(ids):
        state[f"id/{schema_id}"] = http(f"{url}/schemas/ids/{schema_id}")
        state[f"id/{schema_id}/versions"] = http(
            f"{url}/schemas/ids/{schema_id}/versions?deleted=true")
    return state


def read_schemas_log(bootstrap: str, topic: str = "_schemas", timeout: float = 30
                     ) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """Every record of the registry's topic, read from the log with confluent-kafka (not
    through any registry): (key, value or None for a tombstone), in offset order."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, low)])
        records: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
        deadline = time.monotonic() + timeout
        offset = low
        while offset < high:
            assert time.monotonic() < deadline, f"read {offset} of {high} records"
            message = consumer.poll(1.0)
            if message is None or message.error():
                continue
            offset = message.offset() + 1
            key = json.loads(message.key())
            value = message.value()
            records.append((key, json.loads(value) if value else None))
        return records
    finally:
        consumer.close()


def ids_in_log(records: list[tuple[dict[str, Any], dict[str, Any] | None]]
               ) -> dict[int, set[str]]:
    """id -> the distinct schema texts written with it (each SCHEMA record's value)."""
    found: dict[int, set[str]] = {}
    for key, value in records:
        if key.get("keytype") == "SCHEMA" and value is not None:
            found.setdefault(int(value["id"]), set()).add(
                json.dumps([value.get("schemaType", "AVRO"), value["schema"],
                            value.get("references") or []]))
    return found
