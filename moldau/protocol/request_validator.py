"""Bounds and null checks of a request body before kio decodes it.

kio 0.6.5's native reader trusts what a request says about itself: it reserves memory for a
compact array from the count prefix before reading any element (a 5-byte varint claims 2**32
elements; the failed allocation aborts the whole process), and it decodes a null array even
where the schema says the array cannot be null (handlers then iterate None). Kafka's parsers
refuse both ("Tried to allocate a collection of size N, but there are only M bytes
remaining"), and so does this module, before kio sees the body.

:func:`validate_request_body` walks a body against the :mod:`~.request_plan` of its
(api key, version) and raises :class:`InvalidRequest` (the broker then closes the connection,
as Kafka does for a request it cannot parse) when

* an array count is larger than the bytes left could hold (each element needs at least its
  minimum encoded size, and at least one byte);
* a string/bytes length, or a tagged field's size, runs past the end of what holds it;
* an array, string or bytes field that is not nullable is null (-1 / compact 0), or a
  nullable struct's marker byte is neither -1 nor 1;
* a known tagged field's value does not fill exactly the size it declares; varints are longer
  than 5 bytes (kio's limit); the body ends early.

The walk consumes exactly the bytes kio's reader consumes and is stricter wherever they could
differ, so a body it accepts is read by kio along the same path: kio never sees a count the
walk did not bound. Unknown tagged fields are skipped by their size, as Kafka does (kio then
refuses them itself).

Speed: each plan is compiled once (cached) into the source of one Python function - fixed-size
runs as one addition, arrays of fixed-size elements as one multiplication, one- and two-byte
varints inline, nested arrays as nested loops - so the check costs about as much as kio's own
decode of the same body: on the 2-core dev machine ~0.3-0.5 us for a Metadata request, ~1-1.4
us for a 10-partition Fetch, ~2-2.5 us for a 10-partition Produce (which the broker reads with
:mod:`.produce_request` instead). ``validator_source(api_key, version)`` shows the code.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from .errors import InvalidRequest
from .request_plan import Array, Blob, Fixed, Node, Struct, fixed_size, min_size, request_plan
from .schemas import has_schema
from .varint import read_uvarint_rest as _varint

__all__ = ["body_validator", "validate_request_body", "validator_source"]

Buffer = bytes | bytearray | memoryview
Walker = Callable[[Any, int, int], int]

_I16 = struct.Struct(">h").unpack_from
_I32 = struct.Struct(">i").unpack_from


def _too_many(name: str, count: int, remaining: int) -> InvalidRequest:
    return InvalidRequest(
        f"{name}: tried to allocate a collection of size {count}, but there are only "
        f"{max(remaining, 0)} bytes remaining"
    )


def _tags(buf: Any, pos: int, end: int, known: dict[int, Walker], where: str) -> int:
    """Walk a tagged-field section whose count byte is not 0."""
    count = buf[pos]
    pos += 1
    if count > 127:
        count, pos = _varint(buf, pos, count)
    # Each tagged field takes at least two bytes (its tag and its size).
    if count * 2 > end - pos:
        raise _too_many(f"{where} tagged fields", count, end - pos)
    for _ in range(count):
        tag = buf[pos]
        pos += 1
        if tag > 127:
            tag, pos = _varint(buf, pos, tag)
        size = buf[pos]
        pos += 1
        if size > 127:
            size, pos = _varint(buf, pos, size)
        stop = pos + size
        if stop > end:
            raise InvalidRequest(f"{where}: tagged field {tag} of {size} bytes runs past the end")
        walk = known.get(tag)
        if walk is not None and walk(buf, pos, stop) != stop:
            raise InvalidRequest(f"{where}: tagged field {tag} does not fill its {size} bytes")
        pos = stop
    return pos


class _Codegen:
    """Emits the source of one walker function per plan (plus one per known tagged field)."""

    def __init__(self) -> None:
        self.namespace: dict[str, Any] = {
            "_varint": _varint, "_too_many": _too_many, "_tags": _tags, "_I16": _I16,
            "_I32": _I32, "_Invalid": InvalidRequest,
        }
        self.sources: list[str] = []
        self._names = 0

    def constant(self, value: Any) -> str:
        self._names += 1
        name = f"_c{self._names}"
        self.namespace[name] = value
        return name

    def function(self, node: Node) -> str:
        """Compile a walker ``(buf, pos, end) -> pos`` of ``node``; return its name."""
        self._names += 1
        name = f"_walk{self._names}"
        lines = [f"def {name}(buf, pos, end):"]
        self.emit(node, lines, 1, 0)
        lines.append("    return pos")
        source = "\n".join(lines)
        # The source comes from kio's schema classes only, never from request bytes.
        exec(compile(source, f"<validator {name}>", "exec"), self.namespace)
        self.sources.append(source)
        return name

    def emit(self, node: Node, out: list[str], indent: int, depth: int) -> None:
        pad = "    " * indent
        match node:
            case Fixed(size):
                out.append(f"{pad}pos += {size}")
            case Blob():
                self._blob(node, out, pad)
            case Array():
                self._array(node, out, indent, depth)
            case Struct(nullable=True):
                bad = self.constant(f"{node.name}: nullable struct marker is neither -1 nor 1")
                out.append(f"{pad}m = buf[pos]")
                out.append(f"{pad}pos += 1")
                out.append(f"{pad}if m == 1:")
                before = len(out)
                self._struct_body(node, out, indent + 1, depth)
                if len(out) == before:
                    out.append(f"{pad}    pass")
                out.append(f"{pad}elif m != 255:")
                out.append(f"{pad}    raise _Invalid({bad})")
            case Struct():
                self._struct_body(node, out, indent, depth)

    def _struct_body(self, node: Struct, out: list[str], indent: int, depth: int) -> None:
        pad = "    " * indent
        for field in node.fields:
            self.emit(field, out, indent, depth)
        if node.flexible:
            known = {tag: self.namespace[self.function(sub)] for tag, sub in node.tags}
            table = self.constant(known)
            where = self.constant(node.name)
            out.append(f"{pad}if buf[pos]:")
            out.append(f"{pad}    pos = _tags(buf, pos, end, {table}, {where})")
            out.append(f"{pad}else:")
            out.append(f"{pad}    pos += 1")

    @staticmethod
    def _long_varint(var: str, out: list[str], pad: str) -> None:
        """Finish a varint whose first byte is in ``var``: two-byte ones (lengths 128-16383,
        e.g. most record sets) inline, longer ones by a call."""
        out.append(f"{pad}if {var} > 127:")
        out.append(f"{pad}    b = buf[pos]")
        out.append(f"{pad}    if b < 128:")
        out.append(f"{pad}        {var} = ({var} & 127) | (b << 7)")
        out.append(f"{pad}        pos += 1")
        out.append(f"{pad}    else:")
        out.append(f"{pad}        {var}, pos = _varint(buf, pos, {var})")

    def _blob(self, node: Blob, out: list[str], pad: str) -> None:
        null = self.constant(f"{node.name} is null but not nullable")
        past = self.constant(f"{node.name} runs past the end")
        if node.compact:
            out.append(f"{pad}n = buf[pos]")
            out.append(f"{pad}pos += 1")
            self._long_varint("n", out, pad)
            out.append(f"{pad}if n:")
            out.append(f"{pad}    pos += n - 1")
            out.append(f"{pad}    if pos > end:")
            out.append(f"{pad}        raise _Invalid({past})")
            if not node.nullable:
                out.append(f"{pad}else:")
                out.append(f"{pad}    raise _Invalid({null})")
            return
        unpack = "_I16" if node.prefix == 2 else "_I32"
        negative = self.constant(f"{node.name} has a negative length")
        out.append(f"{pad}n = {unpack}(buf, pos)[0]")
        out.append(f"{pad}pos += {node.prefix}")
        out.append(f"{pad}if n >= 0:")
        out.append(f"{pad}    pos += n")
        out.append(f"{pad}    if pos > end:")
        out.append(f"{pad}        raise _Invalid({past})")
        if node.nullable:
            out.append(f"{pad}elif n != -1:")
            out.append(f"{pad}    raise _Invalid({negative})")
        else:
            out.append(f"{pad}else:")
            out.append(f"{pad}    raise _Invalid({null} if n == -1 else {negative})")

    def _array(self, node: Array, out: list[str], indent: int, depth: int) -> None:
        pad = "    " * indent
        n = f"n{depth}"
        null = self.constant(f"{node.name} is null but not nullable")
        name = self.constant(node.name)
        if node.compact:
            out.append(f"{pad}{n} = buf[pos]")
            out.append(f"{pad}pos += 1")
            self._long_varint(n, out, pad)
            if node.nullable:
                out.append(f"{pad}if {n}:")
                indent += 1
            else:
                out.append(f"{pad}if not {n}:")
                out.append(f"{pad}    raise _Invalid({null})")
            pad = "    " * indent
            out.append(f"{pad}{n} -= 1")
        else:
            negative = self.constant(f"{node.name} has a negative count")
            out.append(f"{pad}{n} = _I32(buf, pos)[0]")
            out.append(f"{pad}pos += 4")
            if node.nullable:
                out.append(f"{pad}if {n} < -1:")
                out.append(f"{pad}    raise _Invalid({negative})")
                out.append(f"{pad}if {n} >= 0:")
                indent += 1
            else:
                out.append(f"{pad}if {n} < 0:")
                out.append(f"{pad}    raise _Invalid({null} if {n} == -1 else {negative})")
            pad = "    " * indent
        # Kafka: every element takes at least one byte; ours know their minimum.
        least = max(min_size(node.item), 1)
        claim = n if least == 1 else f"{n} * {least}"
        out.append(f"{pad}if {claim} > end - pos:")
        out.append(f"{pad}    raise _too_many({name}, {n}, end - pos)")
        size = fixed_size(node.item)
        if size is not None:
            if size:
                out.append(f"{pad}pos += {n} * {size}")
            return
        out.append(f"{pad}for _ in range({n}):")
        self.emit(node.item, out, indent + 1, depth + 1)


Compiled = tuple[Walker, str, tuple[str, ...]]


def _compiled(api_key: int, version: int, response: bool = False) -> Compiled | None:
    compiled = _walkers.get((api_key, version, response), _UNKNOWN)
    if compiled is _UNKNOWN:
        # Unknown pairs are refused before the cache, which therefore holds at most one
        # walker per schema kio ships (a broker asks only for the versions it serves).
        if not has_schema(api_key, version):
            return None
        compiled = _walkers[(api_key, version, response)] = _compile(api_key, version, response)
    return compiled  # type: ignore[no-any-return]


_walkers: dict[tuple[int, int, bool], Compiled | None] = {}
_UNKNOWN: Any = object()


def _compile(api_key: int, version: int, response: bool) -> Compiled | None:
    plan = request_plan(api_key, version, response)
    if plan is None:
        return None
    gen = _Codegen()
    name = gen.function(plan)
    return gen.namespace[name], f"{plan.name} v{version}", tuple(gen.sources)


def body_validator(api_key: int, version: int) -> Walker | None:
    """The compiled walker ``(buf, pos, end) -> end position`` of a request body, or None
    when kio has no schema for ``(api_key, version)``."""
    compiled = _compiled(api_key, version)
    return None if compiled is None else compiled[0]


def validator_source(api_key: int, version: int) -> str:
    """The generated source of the walker (for reading and debugging)."""
    compiled = _compiled(api_key, version)
    return "" if compiled is None else "\n\n".join(compiled[2])


def validate_request_body(api_key: int, version: int, buf: Buffer, offset: int, *,
                          response: bool = False) -> None:
    """Check the body at ``buf[offset:]`` before kio decodes it; raise InvalidRequest if it
    is malformed in a way kio would not refuse safely (see the module docstring).

    With ``response`` the body is a response: clients and the proxy check what a broker sends
    them, so a hostile or broken peer cannot abort them through kio either."""
    compiled = _compiled(api_key, version, response)
    if compiled is None:
        raise InvalidRequest(f"no schema for api {api_key} v{version}")
    walk, label, _sources = compiled
    end = len(buf)
    try:
        pos = walk(buf, offset, end)
    except InvalidRequest as exc:
        raise InvalidRequest(f"malformed {label}: {exc}") from None
    except (IndexError, struct.error):
        raise InvalidRequest(f"malformed {label}: the body ends early") from None
    if pos > end:
        raise InvalidRequest(f"malformed {label}: the body ends early")
