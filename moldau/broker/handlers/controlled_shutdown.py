"""ControlledShutdown (key 7), versions 1-3: a broker about to stop asks the active controller
to move partition leadership off it first (``controlled.shutdown.enable``).

Served by the active controller only; any other broker answers NOT_CONTROLLER (41), and the
sender asks again wherever the metadata then names the controller. An unknown broker id
answers BROKER_NOT_AVAILABLE (8) "Broker id N does not exist.", as Kafka's controller does.
Otherwise the controller moves leadership of every partition the broker leads to another
in-sync replica, then answers NONE with ``remaining_partitions``: the partitions that broker
still leads although another replica could take over (a partition with one replica cannot
move and is not listed, as in Kafka). The sender retries while any remain
(``controlled.shutdown.max.retries``, ``controlled.shutdown.retry.backoff.ms``).

The codec is hand-written (:mod:`moldau.protocol.controlled_shutdown`): kio has no schema for
this API. Left out: version 0 (its request header has no client id), and the broker epoch
check (STALE_BROKER_EPOCH): Moldau's image does not keep the epoch (the registration znode's
czxid) of a broker, so ``broker_epoch`` is read and ignored.
"""

from __future__ import annotations

import logging
from typing import Any

from ...protocol import controlled_shutdown as codec
from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import RequestHeader
from ..dispatch import RawResponse, RequestContext, handler

log = logging.getLogger(__name__)


def _decode(header: RequestHeader, frame: Any, offset: int) -> codec.ControlledShutdownRequest:
    # The header's tagged fields (v3) were read with the header.
    return codec.decode_request_body(header.api_version, frame, offset, header_tags=False)


@handler(ApiKey.CONTROLLED_SHUTDOWN, codec.MIN_VERSION, codec.MAX_VERSION, decoder=_decode)
async def handle_controlled_shutdown(ctx: RequestContext,
                                     request: codec.ControlledShutdownRequest) -> RawResponse:
    log.info("controlled shutdown of broker %d requested (from %s:%s)", request.broker_id,
             ctx.client_host, ctx.client_port)
    try:
        remaining = await ctx.broker.shut_down_broker(request.broker_id)
        answer = codec.ControlledShutdownResponse(ErrorCode.none, tuple(remaining))
    except KafkaError as exc:
        log.info("controlled shutdown of broker %d refused: %s", request.broker_id, exc)
        answer = codec.ControlledShutdownResponse(exc.code)
    return RawResponse(codec.encode_response_body(ctx.version, answer))
