"""Request dispatch: the handler registry, request decoding and response framing.

Handlers live in :mod:`moldau.broker.handlers`, one module per Kafka API, and register with
``@handler(ApiKey.X, min_version, max_version)``. ApiVersions answers from this registry, so the
broker advertises exactly what it implements and cannot drift. A hot API may register its own
body decoder (``decoder=``, called as ``decoder(header, frame, offset)`` and raising
InvalidRequest on malformed input) instead of kio's (:func:`decode_request`, which checks the
body's bounds and nulls before kio reads it); Produce does.

A handler takes ``(ctx, request)`` and returns (or, if ``async``, resolves to):

* a kio response entity, encoded here with kio's writer;
* a :class:`RawResponse` whose body a hand-written encoder already produced;
* ``None`` when no response is sent (Produce with acks=0).
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
import struct
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from ..protocol.api_keys import ApiKey, api_name
from ..protocol.entities import build
from ..protocol.errors import InvalidRequest
from ..protocol.messages import (
    RequestHeader,
    decode_request,
    decode_request_header,
    encode_body,
    response_header_bytes,
    response_schema,
)
from .context import BrokerContext

log = logging.getLogger(__name__)

_INT32 = struct.Struct(">i")
_KEY_VERSION = struct.Struct(">hh")

_Item = TypeVar("_Item")
_Answer = TypeVar("_Answer")


def answer_each(items: Iterable[_Item], answer: Callable[[_Item], _Answer],
                key: Callable[[_Item], Hashable] = lambda item: item) -> list[_Answer]:
    """``answer(item)`` for every item of a request, in order, where an item whose ``key``
    was seen before gets the very same object.

    Kafka answers a repeated key once per occurrence, and so do we; but a describe request
    of a few KiB can repeat one group, partition or config resource thousands of times, and
    an answer computed and built per occurrence turned 80 KiB into 400 MiB of Python objects
    (live fuzzer). Shared answers are computed once and, as the entity builder reuses one
    entity for one object (:func:`~moldau.protocol.entities.build`), built once: only the
    encoded response grows with the repetition, as it does on a JVM broker.
    """
    done: dict[Hashable, _Answer] = {}
    out = []
    for item in items:
        seen = key(item)
        if seen not in done:
            done[seen] = answer(item)
        out.append(done[seen])
    return out


@dataclass(slots=True)
class RawResponse:
    """A response body already encoded (as one buffer or a list of chunks)."""

    body: bytes | list[bytes | memoryview]


@dataclass(slots=True)
class RequestContext:
    """What a handler knows about the request besides its body; ``broker`` is the node as
    handlers see it (:class:`~.context.BrokerContext`), not the server object."""

    header: RequestHeader
    listener: str
    client_host: str
    client_port: int
    broker: BrokerContext
    connection: Any = None

    @property
    def version(self) -> int:
        return self.header.api_version

    def respond(self, data: Mapping[str, Any]) -> Any:
        """The response entity of this request's API and version, built from plain data."""
        schema = response_schema(self.header.api_key, self.header.api_version)
        assert schema is not None
        return build(schema, data)


HandlerFn = Callable[[RequestContext, Any], Any]
Decoder = Callable[[RequestHeader, Any, int], Any]


@dataclass(frozen=True, slots=True)
class HandlerSpec:
    api_key: int
    min_version: int
    max_version: int
    fn: HandlerFn
    decoder: Decoder = decode_request


REGISTRY: dict[int, HandlerSpec] = {}


def handler(
    api_key: ApiKey, min_version: int, max_version: int, *, decoder: Decoder = decode_request
) -> Callable[[HandlerFn], HandlerFn]:
    """Register ``fn`` as the handler of ``api_key`` for the given version range; requests
    reach it decoded by ``decoder`` (kio's entities by default)."""

    def register(fn: HandlerFn) -> HandlerFn:
        if api_key in REGISTRY:
            raise RuntimeError(f"two handlers for {api_key.name}")
        REGISTRY[api_key] = HandlerSpec(int(api_key), min_version, max_version, fn, decoder)
        return fn

    return register


def load_handlers() -> dict[int, HandlerSpec]:
    """Import every module of :mod:`moldau.broker.handlers` so they register."""
    from . import handlers

    for module in pkgutil.iter_modules(handlers.__path__):
        importlib.import_module(f"{handlers.__name__}.{module.name}")
    return REGISTRY


class Disconnect(Exception):
    """The request cannot be answered; close the connection (as Kafka does)."""


Chunks = list[bytes | memoryview]


def frame_raw(header: RequestHeader, body: bytes | Chunks) -> Chunks:
    """Chunks of a response frame from an encoded body, without copying the body."""
    head = response_header_bytes(header.api_key, header.api_version, header.correlation_id)
    if isinstance(body, (bytes, bytearray, memoryview)):
        chunks: list[bytes | memoryview] = [body]
    else:
        chunks = body
    size = len(head) + sum(len(c) for c in chunks)
    return [_INT32.pack(size) + head, *chunks]


def encode_result(header: RequestHeader, result: Any) -> list[bytes | memoryview] | None:
    """Turn a handler's result into frame chunks (None = no response)."""
    if result is None:
        return None
    if isinstance(result, RawResponse):
        return frame_raw(header, result.body)
    # The body stays its own chunk: a large answer is not copied once more to prepend a header.
    return frame_raw(header, encode_body(result))


def parse_frame(frame: bytes | bytearray | memoryview
                ) -> tuple[RequestHeader, HandlerSpec | None, Any]:
    """Decode a request frame.

    Returns (header, spec, request). ``spec`` is None only for an ApiVersions request at a
    version we do not serve: the caller answers it with the KIP-511 fallback. Raises
    :class:`Disconnect` for anything else that cannot be served.

    The api key and version are checked against the registry before anything else is read,
    built or cached: a made-up key or version costs two integer reads and a disconnect.
    """
    if not isinstance(frame, bytes):
        # Frames over the receive buffer arrive in their own writable buffer; kio's native
        # readers refuse writable buffers ("Received writable byte buffer where read-only ...").
        frame = memoryview(frame).toreadonly()
    if len(frame) < 4:
        raise Disconnect(f"request frame of {len(frame)} bytes is shorter than a header")
    api_key, api_version = _KEY_VERSION.unpack_from(frame, 0)
    spec = REGISTRY.get(api_key)
    if spec is None:
        raise Disconnect(f"unsupported API key {api_key} ({api_name(api_key)})")
    served = spec.min_version <= api_version <= spec.max_version
    if not served and api_key != ApiKey.API_VERSIONS:
        raise Disconnect(
            f"unsupported version {api_version} of {api_name(api_key)} "
            f"(served: {spec.min_version}-{spec.max_version})"
        )
    try:
        header, offset = decode_request_header(frame)
    except InvalidRequest as exc:
        raise Disconnect(str(exc)) from None
    if not served:
        return header, None, None
    try:
        request = spec.decoder(header, frame, offset)
    except InvalidRequest as exc:
        raise Disconnect(str(exc)) from None
    return header, spec, request
