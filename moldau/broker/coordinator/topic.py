"""Creating a coordinator's internal topic on the first lookup of its coordinator.

``__consumer_offsets`` and ``__transaction_state`` are created by the first FindCoordinator
that needs them, as Kafka does (their logs are created in one batch, so even 50 partitions
take well under a second).

A lookup never waits long on the controller. Kafka's broker sends the creation to the
controller in the background and answers COORDINATOR_NOT_AVAILABLE at once (clients retry).
Moldau runs the creation as a background task of the runtime (one at a time: later lookups join
it) and waits for it at most :data:`TOPIC_CREATION_WAIT_S`, so the single node, whose
controller answers in milliseconds, still answers the first lookup with its coordinator, while
a cluster whose controller is frozen, gone or still being elected answers
COORDINATOR_NOT_AVAILABLE within that bound instead of the forwarding channel's 30 s.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import Any

from ...protocol.errors import ErrorCode
from ..metadata.channel import ControllerChannel, TopicSpec
from ..metadata.image import MetadataImage
from .runtime import CoordinatorRuntime

log = logging.getLogger(__name__)

#: How long a FindCoordinator waits for the creation of the topic before it answers
#: COORDINATOR_NOT_AVAILABLE (the creation goes on; the client's retry finds it).
TOPIC_CREATION_WAIT_S = 1.0


async def ensure_internal_topic(runtime: CoordinatorRuntime[Any], image: MetadataImage,
                                spec: TopicSpec, controller: ControllerChannel, *,
                                cap_rf: bool, rf_key: str,
                                wait_s: float = TOPIC_CREATION_WAIT_S,
                                ) -> tuple[ErrorCode, str | None]:
    """Create ``spec`` (the runtime's topic) if it does not exist yet, through the
    controller; the error and message a FindCoordinator gets when it cannot be, or is not
    created within ``wait_s`` (the creation then goes on in the background of ``runtime``).

    Kafka (since 0.11, KIP-115) refuses to create it while fewer brokers are alive than its
    replication factor (``rf_key``, named in the message) and answers COORDINATOR_NOT_AVAILABLE,
    which clients retry: a cluster that is still starting must not get a topic with too few
    replicas forever. ``cap_rf`` (the single node) caps the factor at the brokers alive instead,
    so Kafka's default of 3 works there; a ``min.insync.replicas`` in ``spec.configs`` is
    capped at the factor (else every write of one broker would fail NOT_ENOUGH_REPLICAS)."""
    name = spec.name
    if name in image.topics_by_name:
        return ErrorCode.none, None
    live = len(image.live_brokers())
    wanted = spec.replication_factor
    if live == 0:
        return ErrorCode.coordinator_not_available, "no broker is alive yet"
    if cap_rf:
        wanted = min(wanted, live)
    elif live < wanted:
        message = (f"{live} brokers are alive, fewer than {rf_key}={wanted} that {name} "
                   f"needs: it is created once enough brokers have started (or lower "
                   f"{rf_key})")
        log.warning("cannot create %s yet: %s", name, message)
        return ErrorCode.coordinator_not_available, message
    configs = dict(spec.configs)
    if "min.insync.replicas" in configs:
        configs["min.insync.replicas"] = str(min(int(configs["min.insync.replicas"]), wanted))
    spec = replace(spec, replication_factor=wanted, configs=configs)
    creation = runtime.topic_creation
    if creation is None or creation.done():
        creation = runtime.spawn(_create_topic(controller, spec))
        runtime.topic_creation = creation
    try:
        # shield: a lookup that stops waiting (or whose client goes away) leaves the
        # creation running for the next one
        return await asyncio.wait_for(asyncio.shield(creation), wait_s)
    except TimeoutError:
        return (ErrorCode.coordinator_not_available,
                f"{name} is being created through the active controller, which has "
                f"not answered within {int(wait_s * 1000)} ms; retry")


async def _create_topic(controller: ControllerChannel,
                        spec: TopicSpec) -> tuple[ErrorCode, str | None]:
    result = (await controller.create_topics([spec]))[0]
    if result.error not in (ErrorCode.none, ErrorCode.topic_already_exists):
        log.warning("could not create %s: %s", spec.name, result.message)
        return (ErrorCode.coordinator_not_available,
                f"creating {spec.name} failed: {result.message}")
    if result.error == ErrorCode.none:
        log.info("created %s with %d partitions, replication factor %d", spec.name,
                 spec.num_partitions, spec.replication_factor)
    return ErrorCode.none, None
