"""The sending side of a controlled shutdown (Kafka's ``KafkaServer.controlledShutdown``).

A cluster broker that stops cleanly (SIGTERM) with ``controlled.shutdown.enable`` first asks
the active controller, by ControlledShutdown (key 7) on ``inter.broker.listener.name``, to
move leadership of its partitions to other replicas, so clients switch leaders before the
broker goes instead of after its session times out. An attempt fails when no controller is
known, it cannot be reached, it answers an error (NOT_CONTROLLER: it moved), or partitions
remain led by this broker; then the broker waits ``controlled.shutdown.retry.backoff.ms`` and
tries again, ``controlled.shutdown.max.retries`` attempts in all. If none succeeds it shuts
down anyway and says so, as Kafka does ("Proceeding to do an unclean shutdown").

When this broker is itself the active controller it moves leadership off itself directly.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable

from ..protocol import controlled_shutdown as codec
from ..protocol.encoders.primitives import INT32
from ..protocol.errors import ErrorCode, KafkaError
from .metadata.forwarding import forwarding_client_id
from .metadata.image import MetadataImage

log = logging.getLogger(__name__)

# Kafka's controller.socket.timeout.ms: how long one attempt waits for the controller.
REQUEST_TIMEOUT_S = 30.0
_correlation = itertools.count(1)


class AttemptFailed(Exception):
    """One controlled shutdown attempt did not complete; the message says why."""


async def send_controlled_shutdown(host: str, port: int, request: codec.ControlledShutdownRequest,
                                   client_id: str, timeout_s: float = REQUEST_TIMEOUT_S
                                   ) -> codec.ControlledShutdownResponse:
    """Send one ControlledShutdown (v3) to ``host:port`` and return the answer."""
    version = codec.MAX_VERSION
    correlation_id = next(_correlation) & 0x7FFFFFFF
    async with asyncio.timeout(timeout_s):
        reader, writer = await asyncio.open_connection(host, port)
        try:
            writer.write(codec.encode_request(version, correlation_id, client_id, request))
            await writer.drain()
            (size,) = INT32.unpack(await reader.readexactly(4))
            if not 4 <= size <= 1 << 20:
                raise ValueError(f"a response frame of {size} bytes")
            frame = await reader.readexactly(size)
        finally:
            writer.close()
    answered, response = codec.decode_response(version, frame)
    if answered != correlation_id:
        raise ValueError(f"correlation id {answered}, expected {correlation_id}")
    return response


async def controlled_shutdown(*, node_id: int, image: MetadataImage, listener: str,
                              max_retries: int, backoff_ms: int,
                              local: Callable[[int], Awaitable[list[tuple[str, int]]]],
                              timeout_s: float = REQUEST_TIMEOUT_S) -> bool:
    """Ask the active controller to move leadership off ``node_id``; True when it did."""
    for attempt in range(1, max_retries + 1):
        try:
            await _attempt(node_id, image, listener, local, timeout_s)
            log.info("controlled shutdown succeeded (attempt %d of %d)", attempt, max_retries)
            return True
        except AttemptFailed as exc:
            log.warning("controlled shutdown attempt %d of %d failed: %s", attempt,
                        max_retries, exc)
        if attempt < max_retries:
            await asyncio.sleep(backoff_ms / 1000)
    log.warning("Proceeding to do an unclean shutdown as all the controlled shutdown attempts "
                "failed (controlled.shutdown.max.retries=%d): partitions this broker leads "
                "are unavailable until the controller notices it is gone", max_retries)
    return False


async def _attempt(node_id: int, image: MetadataImage, listener: str,
                   local: Callable[[int], Awaitable[list[tuple[str, int]]]],
                   timeout_s: float) -> None:
    controller_id = image.controller_id
    if controller_id < 0:
        raise AttemptFailed("no active controller is known")
    if controller_id == node_id:
        try:
            remaining = await local(node_id)
        except KafkaError as exc:
            raise AttemptFailed(str(exc)) from exc
    else:
        registration = image.brokers.get(controller_id)
        endpoint = registration.endpoint(listener) if registration is not None else None
        if endpoint is None:
            raise AttemptFailed(f"the active controller, broker {controller_id}, has no "
                                f"endpoint on listener {listener} (inter.broker.listener.name)")
        where = f"broker {controller_id} at {endpoint.host}:{endpoint.port}"
        try:
            answer = await send_controlled_shutdown(
                endpoint.host, endpoint.port, codec.ControlledShutdownRequest(node_id),
                forwarding_client_id(node_id), timeout_s)
        except (OSError, TimeoutError, ValueError, asyncio.IncompleteReadError) as exc:
            raise AttemptFailed(f"the active controller ({where}) could not be asked: "
                                f"{exc!r}") from exc
        if answer.error_code != ErrorCode.none:
            raise AttemptFailed(f"the active controller ({where}) answered "
                                f"{ErrorCode(answer.error_code).name.upper()}")
        remaining = list(answer.remaining_partitions)
    if remaining:
        shown = ", ".join(f"{t}-{p}" for t, p in remaining[:20])
        raise AttemptFailed(f"{len(remaining)} partition(s) are still led by this broker: "
                            f"{shown}{' ...' if len(remaining) > 20 else ''}")
