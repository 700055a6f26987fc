"""State survives (issue 15, acceptance 3), with real processes: a ``moldau serve`` broker
subprocess, ``moldau schema-registry`` subprocesses, confluent-kafka's SchemaRegistryClient
as the clients, and the ``_schemas`` log read directly (not through a registry).

* the registry and the broker both stopped (SIGTERM, then kill -9) and restarted: every
  subject, version, id, config and soft delete answers as before; the next id follows;
* kill -9 of the registry during a burst of concurrent registrations by several clients:
  every acknowledged registration is there with the id it was answered, and the log holds
  no two different schemas under one id;
* two registry instances on one ``_schemas`` topic, the primary killed with kill -9 during
  a burst: the other becomes the primary, registrations go on through it, ids stay the same
  and nothing acknowledged is lost.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from moldau.testing.runner import BrokerProcess

from .registry_processes import RegistryProcess, http, ids_in_log, read_schemas_log, snapshot

pytestmark = pytest.mark.timeout(240)

#: Short election timeouts (the broker must allow them) so a killed primary is replaced in
#: seconds, not Confluent's default 10 s.
ELECTION = ("kafkagroup.session.timeout.ms=3000", "kafkagroup.heartbeat.interval.ms=300")
BROKER = {"group.min.session.timeout.ms": 500}


def record(name: str, *fields: str) -> str:
    """An Avro record with string fields (a field with a default keeps BACKWARD)."""
    out = [{"name": f, "type": "string", "default": ""} for f in fields]
    return json.dumps({"type": "record", "name": name, "fields": out})


def client(url: str) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": url})


def test_registry_and_broker_restarted_answer_the_same(tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = BrokerProcess(data).start()
    registry = RegistryProcess(broker.bootstrap, tmp_path / "registry.log").start()
    try:
        sr = client(registry.url)
        assert sr.register_schema("orders-value", Schema(record("Order", "a"), "AVRO")) == 1
        assert sr.register_schema("orders-value", Schema(record("Order", "a", "b"), "AVRO")) \
            == 2
        assert sr.register_schema("copy-value", Schema(record("Order", "a"), "AVRO")) == 1
        person = json.dumps({"type": "object", "properties": {"n": {"type": "string"}}})
        assert sr.register_schema("people-value", Schema(person, "JSON")) == 3
        assert sr.register_schema("gone-value", Schema('"string"', "AVRO")) == 4
        sr.delete_subject("gone-value")  # soft delete
        sr.set_compatibility("orders-value", "FULL")
        sr.set_compatibility(level="NONE")
        before = snapshot(registry.url)
        assert before["subjects"] == (200, ["copy-value", "orders-value", "people-value"])
        assert before["gone-value/1"][1]["id"] == 4
        for how in ("SIGTERM", "kill -9"):
            if how == "SIGTERM":
                assert registry.stop() == 0 and broker.stop() == 0
            else:
                registry.kill9()
                broker.kill()
            broker = BrokerProcess(data).start()
            registry = RegistryProcess(broker.bootstrap, tmp_path / "registry.log").start()
            assert snapshot(registry.url) == before, how
        fresh = client(registry.url)
        assert fresh.register_schema("later-value", Schema('"long"', "AVRO")) == 5
        assert fresh.lookup_schema("orders-value", Schema(record("Order", "a"), "AVRO")
                                   ).version == 1
    finally:
        registry.close()
        broker.close()


def burst(targets: Callable[[int], str], clients: int, per_client: int, acked: dict[str, int],
          errors: list[BaseException], stop: threading.Event, *, retry: bool
          ) -> list[threading.Thread]:
    """``clients`` threads, each with its own SchemaRegistryClient, registering
    ``per_client`` subjects; subject i of every client gets schema ``i % 7`` of a shared
    set too (so the same schema is registered concurrently under several subjects) besides
    its own. ``targets(n)`` is the URL for client n (asked again after a failure). Without
    ``retry`` a client stops at its first failure; with it, it retries until acknowledged."""

    def run(n: int) -> None:
        url = targets(n)
        sr = client(url)
        try:
            for i in range(per_client):
                subject = f"c{n}-s{i}"
                text = record(f"Shared{i % 7}") if i % 2 else record(f"C{n}S{i}", "x")
                while not stop.is_set():
                    try:
                        acked[subject] = sr.register_schema(subject, Schema(text, "AVRO"))
                        break
                    except Exception as exc:  # refused, or the connection failed
                        if not retry:
                            return
                        errors.append(exc)
                        if targets(n) != url:
                            url = targets(n)
                            sr = client(url)
                        time.sleep(0.1)
        except BaseException as exc:  # pragma: no cover - reported by the test
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(n,), daemon=True) for n in range(clients)]
    for t in threads:
        t.start()
    return threads


def expected_text(subject: str) -> str:
    n, i = (int(part[1:]) for part in subject.split("-"))
    return record(f"Shared{i % 7}") if i % 2 else record(f"C{n}S{i}", "x")


def check_log(bootstrap: str, acked: dict[str, int]) -> None:
    """The log itself: one schema per id, and each acknowledged id names its schema."""
    texts = ids_in_log(read_schemas_log(bootstrap))
    assert all(len(t) == 1 for t in texts.values()), {i: t for i, t in texts.items()
                                                      if len(t) > 1}
    for subject, schema_id in acked.items():
        (only,) = texts[schema_id]
        assert json.loads(json.loads(only)[1]) == json.loads(expected_text(subject)), subject


def test_kill_9_during_concurrent_registrations(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data") as broker:
        registry = RegistryProcess(broker.bootstrap, tmp_path / "registry.log").start()
        acked: dict[str, int] = {}
        errors: list[BaseException] = []
        stop = threading.Event()
        try:
            threads = burst(lambda n: registry.url, 4, 200, acked, errors, stop, retry=False)
            deadline = time.monotonic() + 60
            while len(acked) < 80:
                assert time.monotonic() < deadline, (len(acked), errors)
                time.sleep(0.005)
            registry.kill9()
            for t in threads:
                t.join(30)
            stop.set()
            assert 80 <= len(acked) < 800
            check_log(broker.bootstrap, acked)
            registry = RegistryProcess(broker.bootstrap, tmp_path / "registry.log").start()
            sr = client(registry.url)
            for subject, schema_id in acked.items():
                found = sr.lookup_schema(subject, Schema(expected_text(subject), "AVRO"))
                assert found.schema_id == schema_id, subject
            # the same schema kept one id across subjects and clients
            shared: dict[str, set[int]] = {}
            for subject, schema_id in acked.items():
                shared.setdefault(expected_text(subject), set()).add(schema_id)
            assert all(len(ids) == 1 for ids in shared.values())
            newest = sr.register_schema("after-kill", Schema('"bytes"', "AVRO"))
            assert newest > max(acked.values())
        finally:
            stop.set()
            registry.close()


def test_two_instances_the_primary_killed_during_a_burst(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data", BROKER) as broker:
        instances = [RegistryProcess(broker.bootstrap, tmp_path / f"registry-{n}.log",
                                     *ELECTION).start() for n in range(2)]
        acked: dict[str, int] = {}
        errors: list[BaseException] = []
        stop = threading.Event()
        try:
            deadline = time.monotonic() + 30
            while sum(r.is_primary for r in instances) != 1:
                assert time.monotonic() < deadline, [r.text() for r in instances]
                time.sleep(0.05)
            (victim,) = [r for r in instances if r.is_primary]
            (survivor,) = [r for r in instances if r is not victim]
            dead = threading.Event()

            def target(n: int) -> str:
                # half the clients talk to the primary, half to the secondary (which
                # forwards); after the kill, every client to the survivor
                return survivor.url if dead.is_set() or n % 2 else victim.url

            threads = burst(target, 4, 40, acked, errors, stop, retry=True)
            deadline = time.monotonic() + 60
            while len(acked) < 40:
                assert time.monotonic() < deadline, (len(acked), errors[-3:])
                time.sleep(0.005)
            victim.kill9()
            dead.set()
            at_kill = dict(acked)
            for t in threads:
                t.join(120)
            assert not any(t.is_alive() for t in threads), errors[-3:]
            assert errors  # the kill refused some requests (connection, 50003/50004) ...
            assert len(acked) == 160  # ... and every registration went through in the end
            assert set(acked) - set(at_kill)  # ... some of them after the kill
            assert survivor.is_primary, survivor.text()[-3000:]
            check_log(broker.bootstrap, acked)
            ids = {expected_text(s): i for s, i in acked.items()}
            assert len(set(ids.values())) == len(ids)  # one id per schema, none reused
            late = RegistryProcess(broker.bootstrap, tmp_path / "registry-late.log",
                                   *ELECTION).start()
            instances.append(late)
            for reader in (survivor, late):
                for subject, schema_id in acked.items():
                    status, entity = http(f"{reader.url}/subjects/{subject}/versions/1")
                    assert (status, entity["id"]) == (200, schema_id), subject
            written = ids_in_log(read_schemas_log(broker.bootstrap))
            status, answer = http(f"{late.url}/subjects/after/versions", "POST",
                                  {"schema": '"bytes"'})  # forwarded to the survivor
            assert status == 200 and answer["id"] == max(written) + 1
        finally:
            stop.set()
            for r in instances:
                r.close()
