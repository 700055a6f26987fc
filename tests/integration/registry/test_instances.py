"""Several registry instances on one ``_schemas`` topic, one primary elected through Kafka
(moldau.registry.elected wiring the election and forwarding into the core's primary seam):
writes to any instance land on the primary, the next primary continues the ids after the
previous one leaves or is killed with kill -9 during a registration burst, and every
acknowledged registration is still there."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest

from moldau.registry.app import SchemaRegistry
from moldau.registry.config import build_config
from moldau.registry.elected import ElectedPrimary, elected_primary_factory
from moldau.testing.runner import InProcessBroker

pytestmark = pytest.mark.timeout(180)

SETTINGS = {"group.min.session.timeout.ms": 500, "group.initial.rebalance.delay.ms": 0,
            "offsets.topic.num.partitions": 1}
SR = "application/vnd.schemaregistry.v1+json"


@pytest.fixture(scope="module")
def broker() -> Iterator[InProcessBroker]:
    with InProcessBroker(settings=SETTINGS) as running:
        yield running


def schema(name: str) -> str:
    return json.dumps({"type": "record", "name": name, "fields": [
        {"name": "f", "type": "string"}]})


# --- in one process -------------------------------------------------------------------------

async def start(broker: InProcessBroker, topic: str, group: str) -> SchemaRegistry:
    registry = SchemaRegistry(build_config({
        "kafkastore.bootstrap.servers": broker.bootstrap, "listeners": "http://127.0.0.1:0",
        "kafkastore.topic": topic, "schema.registry.group.id": group,
        "kafkastore.timeout.ms": "10000", "kafkastore.init.timeout.ms": "30000"}),
        primary_factory=elected_primary_factory({"kafkagroup.session.timeout.ms": 3000,
                                                 "kafkagroup.heartbeat.interval.ms": 300}))
    await registry.start()
    return registry


def elected(registry: SchemaRegistry) -> ElectedPrimary:
    primary = registry.primary.current
    assert isinstance(primary, ElectedPrimary)
    return primary


async def one_primary(registries: list[SchemaRegistry], timeout: float = 20
                      ) -> SchemaRegistry:
    """The primary, once every instance agrees on it."""
    deadline = time.monotonic() + timeout
    while True:
        primaries = [r for r in registries if elected(r).is_primary]
        if len(primaries) == 1:
            url = primaries[0].urls()[0]
            if all(elected(r).primary_url == url for r in registries if r is not primaries[0]):
                return primaries[0]
        assert len(primaries) <= 1, "two primaries"
        assert time.monotonic() < deadline, [elected(r).election.primary_url
                                             for r in registries]
        await asyncio.sleep(0.05)


async def register(registry: SchemaRegistry, subject: str, text: str) -> Any:
    async with aiohttp.ClientSession() as session, session.post(
            f"{registry.urls()[0]}/subjects/{subject}/versions",
            data=json.dumps({"schema": text}), headers={"Content-Type": SR}) as answer:
        return answer.status, await answer.json(content_type=None)


async def get(registry: SchemaRegistry, path: str) -> Any:
    async with aiohttp.ClientSession() as session, session.get(
            registry.urls()[0] + path) as answer:
        return answer.status, await answer.json(content_type=None)


async def registered(registry: SchemaRegistry, subject: str, text: str) -> tuple[int, Any]:
    """(status, id) of a registration."""
    status, answer = await register(registry, subject, text)
    return status, answer.get("id") if isinstance(answer, dict) else answer


def test_writes_land_on_the_primary_and_ids_continue_after_it_leaves(
        broker: InProcessBroker) -> None:
    async def run() -> None:
        topic, group = f"_schemas-{uuid.uuid4().hex[:8]}", f"sr-{uuid.uuid4().hex[:8]}"
        registries = [await start(broker, topic, group) for _ in range(2)]
        try:
            primary = await one_primary(registries)
            (secondary,) = [r for r in registries if r is not primary]
            assert await registered(secondary, "a", schema("A")) == (200, 1)
            assert await registered(primary, "b", schema("B")) == (200, 2)
            for r in registries:
                assert await get(r, "/subjects") == (200, ["a", "b"])
            await primary.stop()
            registries.remove(primary)
            assert await one_primary(registries) is secondary
            assert await registered(secondary, "c", schema("C")) == (200, 3)
            assert await registered(secondary, "a-again", schema("A")) == (200, 1)
            # A new instance joins; the primary may move to it (lowest URL): either way the
            # next id follows the last one.
            registries.append(await start(broker, topic, group))
            await one_primary(registries)
            assert await registered(secondary, "d", schema("D")) == (200, 4)
            for r in registries:
                status, answer = await get(r, "/schemas/ids/4")
                assert (status, json.loads(answer["schema"])) == (200, json.loads(schema("D")))
        finally:
            for r in registries:
                await r.stop()

    asyncio.run(run())


# --- in separate processes, with kill -9 ----------------------------------------------------

class RegistryProc:
    def __init__(self, broker: InProcessBroker, topic: str, group: str, session_ms: int
                 ) -> None:
        script = Path(__file__).with_name("registry_proc.py")
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
        self.proc = subprocess.Popen(
            [sys.executable, str(script), broker.bootstrap, topic, group, str(session_ms)],
            stdout=subprocess.PIPE, text=True, env=env)
        self.lines: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()
        deadline = time.monotonic() + 60
        while not self.lines:
            assert self.proc.poll() is None and time.monotonic() < deadline, "did not start"
            time.sleep(0.05)
        self.url: str = self.lines[0]["url"]

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(json.loads(line))

    @property
    def is_primary(self) -> bool:
        return bool(self.lines[-1].get("primary"))

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        parts = urlsplit(self.url)
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
        try:
            data = None if body is None else json.dumps(body).encode()
            conn.request(method, path, body=data, headers={"Content-Type": SR})
            answer = conn.getresponse()
            return answer.status, json.loads(answer.read() or b"null")
        finally:
            conn.close()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


def test_kill_9_of_the_primary_during_a_registration_burst(broker: InProcessBroker) -> None:
    """Four clients register 60 schemas through both instances; the primary is killed while
    their requests are in flight. Clients retry refused writes (as an application would) until
    acknowledged; afterwards every acknowledged id is there, each id names one schema, and
    no id was skipped or handed out twice."""
    topic, group = f"_schemas-{uuid.uuid4().hex[:8]}", f"sr-{uuid.uuid4().hex[:8]}"
    procs = [RegistryProc(broker, topic, group, 3000) for _ in range(2)]
    acked: dict[int, int] = {}
    refused: list[Any] = []
    failures: list[BaseException] = []
    total, clients = 60, 4
    try:
        deadline = time.monotonic() + 30
        while sum(p.is_primary for p in procs) != 1:
            assert time.monotonic() < deadline, [p.lines for p in procs]
            time.sleep(0.05)
        (victim,) = [p for p in procs if p.is_primary]
        (survivor,) = [p for p in procs if p is not victim]
        stop_at = time.monotonic() + 120

        def client(n: int) -> None:
            try:
                for i in range(n, total, clients):
                    while True:
                        target = procs[i % 2] if victim.proc.poll() is None else survivor
                        try:
                            status, answer = target.request(
                                "POST", f"/subjects/burst-{i}/versions",
                                {"schema": schema(f"S{i}")})
                        except OSError as exc:
                            status, answer = 0, str(exc)
                        if status == 200:
                            acked[i] = answer["id"]
                            break
                        refused.append((i, status, answer))
                        assert status in (0, 500), (status, answer)
                        assert time.monotonic() < stop_at, refused[-5:]
                        time.sleep(0.1)
            except BaseException as exc:
                failures.append(exc)

        threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
        for t in threads:
            t.start()
        while len(acked) < total // 4:
            assert time.monotonic() < stop_at and not failures, failures
            time.sleep(0.01)
        victim.proc.send_signal(signal.SIGKILL)
        victim.proc.wait(10)
        for t in threads:
            t.join(150)
        assert not failures, failures
        assert len(acked) == total
        # The survivor took over only after the victim's session expired: writes were refused
        # meanwhile (50003 forwarding to the dead primary, 50004 during the election).
        assert any(isinstance(a, dict) and a.get("error_code") in (50003, 50004)
                   for _i, _s, a in refused), refused
        assert sorted(acked.values()) == list(range(1, total + 1)), acked
        late = RegistryProc(broker, topic, group, 3000)
        procs.append(late)
        for reader in (survivor, late):
            for i, schema_id in acked.items():
                assert reader.request("GET", f"/subjects/burst-{i}/versions/1")[1]["id"] \
                    == schema_id
                status, answer = reader.request("GET", f"/schemas/ids/{schema_id}")
                assert (status, json.loads(answer["schema"])) == (
                    200, json.loads(schema(f"S{i}")))
    finally:
        for p in procs:
            p.close()
