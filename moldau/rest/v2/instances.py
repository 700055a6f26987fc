"""Consumer instances of API v2: real members of their consumer group, living in the proxy.

``POST /consumers/{group}`` makes a :class:`ConsumerInstance`: a :class:`moldau.client.Consumer`
with ``group.id`` = the group (settings: ``client.*``/``consumer.*`` of the proxy, then the
request's ``auto.offset.reset`` and ``auto.commit.enable``). Unless the proxy's settings name a
``client.id``, the member's client id is ``consumer-<group>-<n>`` (n counting the proxy's
instances from 1): Confluent's proxy leaves ``client.id`` unset and the Java consumer names
itself so, which is what v3's consumer listings and ``kafka-consumer-groups`` show for such a
member (kafi's suite checks the prefix). Its client connects on first use
(subscribe, assign, records, commits, seeks), as the Java consumer connects on its first
``poll``, so an instance that is created and never used costs no connection.

Every operation on an instance runs under the instance's lock (one at a time, as Confluent's
``synchronized`` consumer state) and marks it used; :class:`InstanceManager` closes instances
idle longer than ``consumer.instance.timeout.ms`` (checked at least once a second, never one
in the middle of an operation): the member leaves its group, its partitions go to the others.

Memory per instance is bounded: the client prefetches at most two fetches of
``max.partition.fetch.bytes`` (``consumer.max.partition.fetch.bytes``, 1 MiB) per assigned
partition, one read answers at most ``consumer.request.max.bytes``, and nothing is kept
between reads (records a read could not fit are fetched again: the position moves back to
the first record not answered). The number of instances is bounded by
``consumer.max.instances``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from moldau.client import Consumer, TopicPartition
from moldau.client.errors import ConfigError

from .. import errors
from ..config import RestConfig
from ..context import RestContext
from .formats import RecordDecoder, check_format

log = logging.getLogger("moldau.rest")

#: records one poll of a read hands over at most (Confluent's proxy sets max.poll.records 30)
POLL_RECORDS = 30


@dataclass(frozen=True)
class InstanceSettings:
    """What ``POST /consumers/{group}`` asked for (validated)."""

    name: str
    format: str
    auto_offset_reset: str | None
    auto_commit_enable: bool | None
    fetch_min_bytes: int | None
    request_timeout_ms: int | None

    @classmethod
    def parse(cls, body: Any, proxy_id: str) -> InstanceSettings:
        """Confluent's rules: ``id`` wins over ``name``; neither: ``rest-consumer-[ID-]UUID``;
        a bad ``format`` is 422, a bad setting 42204, ``fetch.min.bytes`` outside -1 ..
        10000000 is 40001."""
        if body is None:
            body = {}
        if not isinstance(body, dict):
            raise errors.unprocessable("The request body must be a JSON object")
        name = body.get("id") or body.get("name")
        if name is not None and (not isinstance(name, str) or not name):
            raise errors.unprocessable("name must be a non-empty string")
        if name is None:
            name = "rest-consumer-" + (f"{proxy_id}-" if proxy_id else "") + str(uuid.uuid4())
        reset = body.get("auto.offset.reset")
        if reset is not None and str(reset).lower() not in ("earliest", "latest", "none"):
            raise errors.unprocessable(
                f"Invalid consumer configuration: Invalid value {reset} for configuration "
                "auto.offset.reset: String must be one of: latest, earliest, none",
                errors.INVALID_CONSUMER_CONFIG)
        commit = body.get("auto.commit.enable")
        if commit is not None and str(commit).lower() not in ("true", "false"):
            raise errors.unprocessable(
                f"Invalid consumer configuration: Invalid value {commit} for configuration "
                "enable.auto.commit: Expected value to be either true or false",
                errors.INVALID_CONSUMER_CONFIG)
        min_bytes = _optional_int(body, "fetch.min.bytes", "responseMinBytes")
        if min_bytes is not None and not -1 <= min_bytes <= 10000000:
            raise errors.unprocessable(
                "Invalid consumer configuration. It does not abide by the constraints: "
                f"Invalid value {min_bytes} for configuration fetch.min.bytes: Value must be "
                "between -1 and 10000000", 40001)
        wait = _optional_int(body, "consumer.request.timeout.ms", "requestWaitMs")
        return cls(name, check_format(body.get("format")),
                   None if reset is None else str(reset).lower(),
                   None if commit is None else str(commit).lower() == "true", min_bytes, wait)


def _optional_int(body: dict[str, Any], key: str, alias: str) -> int | None:
    value = body.get(key, body.get(alias))
    if value is None:
        return None
    try:
        if isinstance(value, bool):
            raise ValueError(value)
        return int(value)
    except (TypeError, ValueError):
        raise errors.unprocessable(f"Invalid consumer configuration: {key} must be an "
                                   f"integer, not {value!r}",
                                   errors.INVALID_CONSUMER_CONFIG) from None


class ConsumerInstance:
    """One consumer instance (see the module docstring)."""

    def __init__(self, group: str, settings: InstanceSettings, consumer: Consumer,
                 decoder: RecordDecoder) -> None:
        self.group = group
        self.settings = settings
        self.consumer = consumer
        self.decoder = decoder
        self.lock = asyncio.Lock()
        self.last_used = time.monotonic()
        self.busy = 0
        self.started = False
        self.closed = False

    @property
    def name(self) -> str:
        return self.settings.name

    @property
    def format(self) -> str:
        return self.settings.format

    async def client(self) -> Consumer:
        """The started client (connects on first use; 50003 when the cluster is away)."""
        if not self.started:
            await RestContext.kafka(self.consumer.start())
            self.started = True
        return self.consumer

    def idle_for(self, now: float) -> float:
        return 0.0 if self.busy else now - self.last_used

    async def close(self) -> None:
        """Leave the group (committing first with auto-commit) and drop the client."""
        if self.closed:
            return
        self.closed = True
        try:
            async with asyncio.timeout(30):
                await self.consumer.close()
        except Exception as exc:  # the instance is gone either way
            log.warning("closing consumer instance %s/%s: %s", self.group, self.name, exc)


class InstanceManager:
    """The proxy's consumer instances by (group, name); expiry in a background task."""

    def __init__(self, ctx: RestContext) -> None:
        self.ctx = ctx
        self.config: RestConfig = ctx.config
        self.instances: dict[tuple[str, str], ConsumerInstance] = {}
        self.timeout_s = self.config["consumer.instance.timeout.ms"] / 1000
        self._task: asyncio.Task[None] | None = None
        self._closing: set[asyncio.Task[None]] = set()
        self._client_ids = itertools.count(1)

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._expire_loop(), name="rest-consumer-expiry")

    async def stop(self) -> None:
        """Stop expiring and close every instance."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        instances, self.instances = list(self.instances.values()), {}
        await asyncio.gather(*(i.close() for i in instances), *self._closing,
                             return_exceptions=True)

    async def _expire_loop(self) -> None:
        interval = min(1.0, max(0.02, self.timeout_s / 4))
        while True:
            await asyncio.sleep(interval)
            self.expire(time.monotonic())

    def expire(self, now: float) -> int:
        """Forget instances idle longer than the timeout and close them in the background;
        how many expired."""
        expired = [key for key, inst in self.instances.items()
                   if inst.idle_for(now) >= self.timeout_s]
        for key in expired:
            instance = self.instances.pop(key)
            log.debug("consumer instance %s/%s expired", *key)
            task = asyncio.create_task(instance.close())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)
        return len(expired)

    # --- instances ----------------------------------------------------------------------------

    def create(self, group: str, body: Any) -> ConsumerInstance:
        """A new instance of ``group`` (40902 when the name is taken)."""
        settings = InstanceSettings.parse(body, self.config["id"])
        key = (group, settings.name)
        if key in self.instances:
            raise errors.already_exists()
        if len(self.instances) >= self.config["consumer.max.instances"]:
            raise errors.too_many_instances(len(self.instances))
        client = self.config.client("consumer")
        client["group.id"] = group
        client.setdefault("client.id", f"consumer-{group}-{next(self._client_ids)}")
        if settings.auto_offset_reset is not None:
            client["auto.offset.reset"] = settings.auto_offset_reset
        if settings.auto_commit_enable is not None:
            client["enable.auto.commit"] = settings.auto_commit_enable
        try:
            consumer = Consumer(client)
        except ConfigError as exc:
            raise errors.unprocessable(f"Invalid consumer configuration: {exc}",
                                       errors.INVALID_CONSUMER_CONFIG) from None
        instance = ConsumerInstance(group, settings, consumer,
                                    RecordDecoder(settings.format, self.ctx.registry))
        self.instances[key] = instance
        return instance

    def get(self, group: str, name: str) -> ConsumerInstance:
        instance = self.instances.get((group, name))
        if instance is None:
            raise errors.instance_not_found()
        instance.last_used = time.monotonic()
        return instance

    @contextlib.asynccontextmanager
    async def use(self, group: str, name: str) -> AsyncIterator[ConsumerInstance]:
        """The instance, locked and kept from expiring while the block runs (40403 when
        there is none, or it was deleted while this waited for the lock)."""
        instance = self.get(group, name)
        instance.busy += 1
        try:
            async with instance.lock:
                if instance.closed:
                    raise errors.instance_not_found()
                yield instance
        finally:
            instance.busy -= 1
            instance.last_used = time.monotonic()

    async def delete(self, group: str, name: str) -> None:
        instance = self.get(group, name)
        del self.instances[(group, name)]
        async with instance.lock:
            await instance.close()


def assigned(consumer: Consumer, tps: list[TopicPartition]) -> None:
    """40903 unless every partition in ``tps`` is assigned (the Java consumer's
    IllegalStateException "No current assignment for partition")."""
    have = consumer.assignment()
    for tp in tps:
        if tp not in have:
            raise errors.illegal_state(f"No current assignment for partition {tp.topic}-"
                                       f"{tp.partition}")
