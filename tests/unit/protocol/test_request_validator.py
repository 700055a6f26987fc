"""The pre-decode request validator: it walks bodies exactly as kio reads them, refuses what
kio would crash on or wrongly accept, and never lets a malformed body reach kio.

Bodies come from the request plans themselves (plan_bodies.encode); kio's reader is the
reference for where each body ends. Anything that could make kio's native reader abort runs in
a subprocess, so a validator bug fails one test instead of killing the test run.
"""

from __future__ import annotations

import dataclasses
import random
import struct
import subprocess
import sys
import types
import typing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.serial import entity_reader

from moldau.protocol.errors import InvalidRequest
from moldau.protocol.messages import is_flexible, request_schema
from moldau.protocol.request_plan import Array, Blob, Struct, request_plan
from moldau.protocol.request_validator import (
    body_validator,
    validate_request_body,
    validator_source,
)

from .plan_bodies import Choices, encode, uvarint, walk

ROOT = Path(__file__).resolve().parents[3]
ALL_SCHEMAS = [(api, v) for api in range(100) for v in range(40)
               if request_plan(api, v) is not None]


def served() -> list[tuple[int, int]]:
    from moldau.broker.dispatch import load_handlers
    from moldau.protocol.messages import HAND_CODED_FIRST_FLEXIBLE

    # APIs kio has no schema for are decoded by their own hand-written, tested codecs.
    return sorted((spec.api_key, v) for spec in load_handlers().values()
                  if spec.api_key not in HAND_CODED_FIRST_FLEXIBLE
                  for v in range(spec.min_version, spec.max_version + 1))


SERVED = served()


def kio_size(api: int, version: int, body: bytes) -> int:
    _value, size = entity_reader(request_schema(api, version))(body, 0)
    return int(size)


def refused(api: int, version: int, body: bytes) -> str:
    with pytest.raises(InvalidRequest) as info:
        validate_request_body(api, version, body, 0)
    return str(info.value)


def test_plans_cover_every_kio_request_schema() -> None:
    assert len(ALL_SCHEMAS) >= 300
    assert all((api, v) in ALL_SCHEMAS for api, v in SERVED)
    assert validator_source(3, 12).startswith("def _walk")


@pytest.mark.parametrize("with_tags", [True, False])
def test_walk_ends_where_kio_ends_for_every_schema(with_tags: bool) -> None:
    """A body with one element per array (and every known tagged field, or none) of every
    request schema kio has: kio and the walker both consume all of it."""

    class NoTags(Choices):
        def tags(self, struct_: Struct) -> list[int]:
            return []

    for api, version in ALL_SCHEMAS:
        plan = request_plan(api, version)
        assert plan is not None
        body = encode(plan, Choices() if with_tags else NoTags())
        assert kio_size(api, version, body) == len(body), (api, version)
        walker = body_validator(api, version)
        assert walker is not None
        assert walker(body, 0, len(body)) == len(body), (api, version)
        # At an offset inside a larger frame, with bytes after the body (kio ignores them).
        frame = b"\x07" * 9 + body + b"\x00\x01"
        validate_request_body(api, version, frame, 9)


class Drawn(Choices):
    """Counts, lengths (some need two-byte varints), nulls and tags drawn by hypothesis."""

    def __init__(self, data: st.DataObject) -> None:
        self.data = data

    def count(self, name: str) -> int:
        return self.data.draw(st.integers(0, 3))

    def length(self, name: str) -> int:
        return self.data.draw(st.sampled_from([0, 1, 7, 200]))

    def null(self, name: str) -> bool:
        return self.data.draw(st.booleans())

    def tags(self, struct_: Struct) -> list[int]:
        if not struct_.tags:
            return []
        return self.data.draw(st.lists(st.sampled_from([t for t, _ in struct_.tags]),
                                       unique=True))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(ALL_SCHEMAS), st.data())
def test_random_valid_bodies_are_accepted_as_kio_reads_them(schema: tuple[int, int],
                                                             data: st.DataObject) -> None:
    api, version = schema
    plan = request_plan(api, version)
    assert plan is not None
    body = encode(plan, Drawn(data))
    assert kio_size(api, version, body) == len(body)
    walker = body_validator(api, version)
    assert walker is not None and walker(body, 0, len(body)) == len(body)


def test_every_prefix_of_a_body_is_refused() -> None:
    for api, version in SERVED:
        plan = request_plan(api, version)
        assert plan is not None
        body = encode(plan, Choices())
        for cut in range(len(body)):
            refused(api, version, body[:cut])


def test_null_where_the_schema_forbids_it_is_refused() -> None:
    """Every non-nullable array and string/bytes field, at any depth and in every version
    served (flexible and not), written as null: refused, naming the field. Nullable ones
    written as null are accepted, and kio reads them to the same end."""
    forbidden = allowed = 0
    for api, version in SERVED:
        plan = request_plan(api, version)
        assert plan is not None
        for node in walk(plan):
            if not isinstance(node, (Array, Blob)):
                continue
            body = encode(plan, Choices(), null=node.name)
            if node.nullable:
                validate_request_body(api, version, body, 0)
                assert kio_size(api, version, body) == len(body)
                allowed += 1
            else:
                message = refused(api, version, body)
                assert f"{node.name} is null" in message, message
                forbidden += 1
    # Produce/Fetch/Metadata/... have dozens of each (the count is a sanity floor).
    assert forbidden > 300 and allowed > 20, (forbidden, allowed)


def test_kio_alone_lets_null_arrays_through() -> None:
    """Why the null check exists: kio 0.6.5 reads a null non-nullable array as None."""
    plan = request_plan(1, 12)
    assert plan is not None
    body = encode(plan, Choices(), null="topics")
    value, _size = entity_reader(request_schema(1, 12))(body, 0)
    assert value.topics is None
    assert "topics is null" in refused(1, 12, body)


def huge_bodies(versions: list[tuple[int, int]]) -> list[tuple[int, int, str, bytes]]:
    """For every array at any depth of every version: a body whose array claims 2**32 - 2
    (compact) or 2**31 - 1 (int32) elements."""
    out = []
    for api, version in versions:
        plan = request_plan(api, version)
        assert plan is not None
        for node in walk(plan):
            if isinstance(node, Array):
                out.append((api, version, node.name, encode(plan, Choices(), huge=node.name)))
    return out


def test_huge_array_counts_are_refused_before_kio() -> None:
    bodies = huge_bodies(SERVED)
    flexible = {(a, v) for a, v, _n, _b in bodies if is_flexible(a, v)}
    assert len(flexible) > 40
    for api, version, name, body in bodies:
        message = refused(api, version, body)
        assert f"{name}: tried to allocate a collection of size" in message, message


def header(api: int, version: int) -> bytes:
    out = struct.pack(">hhih", api, version, 1, 1) + b"t"
    return out + (b"\x00" if is_flexible(api, version) else b"")


def test_huge_counts_through_dispatch_do_not_crash_the_process() -> None:
    """The brief's ``ff ff ff ff 0f`` bodies, at every depth of every flexible version the
    broker serves, through the broker's own frame parser in a subprocess (kio's abort would
    kill it): each is a Disconnect, the process lives."""
    script = (
        "import sys\n"
        "from tests.unit.protocol.test_request_validator import dispatch_huge_bodies\n"
        "sys.exit(dispatch_huge_bodies())\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "disconnected" in proc.stdout, proc.stdout


def dispatch_huge_bodies() -> int:
    from moldau.broker.dispatch import Disconnect, parse_frame

    flexible = [(a, v) for a, v in SERVED if is_flexible(a, v)]
    n = 0
    for api, version, name, body in huge_bodies(flexible):
        frame = header(api, version) + body
        try:
            parse_frame(frame)
        except Disconnect:
            n += 1
            continue
        print(f"api {api} v{version} {name}: accepted a huge count")
        return 1
    # The shortest form too: just the count where the body starts.
    for api, version in flexible:
        try:
            parse_frame(header(api, version) + bytes.fromhex("ffffffff0f"))
        except Disconnect:
            n += 1
    print(f"{n} bodies disconnected")
    return 0


# --- tagged fields, markers, varints ----------------------------------------------------------

def tagged_schema() -> tuple[int, int, Struct]:
    """A served flexible version whose top-level struct has a known tagged field
    (Fetch v12: cluster_id, tag 0, a compact string)."""
    plan = request_plan(1, 12)
    assert plan is not None and plan.tags and plan.tags[0][0] == 0
    return 1, 12, plan


def with_top_tags(plan: Struct, section: bytes) -> bytes:
    class NoTags(Choices):
        def tags(self, struct_: Struct) -> list[int]:
            return []

    body = encode(plan, NoTags())
    assert body.endswith(b"\x00")
    return body[:-1] + section


def test_tagged_fields() -> None:
    api, version, plan = tagged_schema()
    ok = with_top_tags(plan, b"\x01\x00\x04\x04abc")  # cluster_id = "abc"
    validate_request_body(api, version, ok, 0)
    assert kio_size(api, version, ok) == len(ok)
    # Declared size larger than the value; smaller (the value is bounded by the size).
    assert "does not fill" in refused(api, version, with_top_tags(plan, b"\x01\x00\x05\x04abcx"))
    message = refused(api, version, with_top_tags(plan, b"\x01\x00\x03\x04abc"))
    assert "cluster_id runs past the end" in message
    # Size past the end, count past the end.
    assert "runs past the end" in refused(api, version, with_top_tags(plan, b"\x01\x00\x7f\x04"))
    message = refused(api, version, with_top_tags(plan, b"\xff\xff\xff\xff\x0f"))
    assert "tagged fields: tried to allocate" in message
    # The value of a known tag is checked like any field: null where it cannot be.
    assert "cluster_id is null" in refused(api, version, with_top_tags(plan, b"\x01\x00\x01\x00"))
    # Unknown tags are skipped by size (Kafka does; kio then refuses them itself).
    unknown = with_top_tags(plan, b"\x01\x2a\x03xyz")
    validate_request_body(api, version, unknown, 0)


def test_varints_longer_than_five_bytes_are_refused() -> None:
    assert "longer than 5 bytes" in refused(3, 12, bytes.fromhex("ffffffffff01"))
    # Five bytes is the limit kio reads (2**32 - 2 elements: refused for the count instead).
    assert "tried to allocate" in refused(3, 12, bytes.fromhex("ffffffff0f"))
    # A redundant but short encoding of 1 (empty array) is fine, as for kio.
    body = bytes.fromhex("818000") + b"\x00\x00\x00"
    validate_request_body(3, 12, body, 0)
    assert kio_size(3, 12, body) == len(body)


def nullable_struct_schema() -> tuple[int, int, Struct]:
    for api, version in ALL_SCHEMAS:
        plan = request_plan(api, version)
        assert plan is not None
        if any(isinstance(n, Struct) and n.nullable for n in walk(plan)):
            return api, version, plan
    raise AssertionError("no nullable struct in any request schema")


def test_nullable_struct_markers() -> None:
    api, version, plan = nullable_struct_schema()
    target = next(n for n in walk(plan) if isinstance(n, Struct) and n.nullable)
    present = encode(plan, Choices())
    null = encode(plan, Choices(), null=target.name)
    for body in (present, null):
        validate_request_body(api, version, body, 0)
        assert kio_size(api, version, body) == len(body)
    # Find the marker: the only byte where "present" has 0x01 and "null" has 0xff.
    at = next(i for i, (a, b) in enumerate(zip(present, null, strict=False)) if a != b)
    assert (present[at], null[at]) == (1, 0xFF)
    bad = present[:at] + b"\x05" + present[at + 1:]
    assert "marker is neither" in refused(api, version, bad)


def test_negative_legacy_lengths_are_refused() -> None:
    # Metadata v4: topics int32 count -2; then a topic name of length -2.
    assert "negative count" in refused(3, 4, struct.pack(">i", -2) + b"\x00")
    assert "negative length" in refused(3, 4, struct.pack(">ih", 1, -2) + b"\x00")
    assert "is null" in refused(3, 4, struct.pack(">ih", 1, -1) + b"\x00")
    # -1 topics is "all topics": nullable.
    validate_request_body(3, 4, struct.pack(">i", -1) + b"\x00", 0)


# --- mutated bodies through the validator and kio (subprocess) ------------------------------

def forbidden_nulls(entity: Any, path: str = "") -> list[str]:
    """Fields of a decoded kio entity that are None although their type is not nullable."""
    found = []
    for field in dataclasses.fields(entity):
        value = getattr(entity, field.name)
        tp = field.type
        nullable = (typing.get_origin(tp) in (types.UnionType, typing.Union)
                    and type(None) in typing.get_args(tp))
        if value is None and not nullable:
            found.append(path + field.name)
        elif dataclasses.is_dataclass(value):
            found += forbidden_nulls(value, f"{path}{field.name}.")
        elif isinstance(value, tuple):
            for item in value:
                if dataclasses.is_dataclass(item):
                    found += forbidden_nulls(item, f"{path}{field.name}[].")
    return found


def mutate(rng: random.Random, body: bytes) -> bytes:
    data = bytearray(body)
    for _ in range(rng.randrange(1, 4)):
        op = rng.random()
        pos = rng.randrange(len(data) + 1)
        if op < 0.4 and data:
            data[min(pos, len(data) - 1)] = rng.choice([0x00, 0x01, 0x7F, 0x80, 0xFF,
                                                        rng.randrange(256)])
        elif op < 0.6:
            data[pos:pos] = rng.choice([b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\x7f",
                                        uvarint(rng.randrange(1 << 20)), rng.randbytes(3)])
        elif op < 0.8:
            del data[pos:pos + rng.randrange(1, 6)]
        else:
            data[pos:pos] = b"\x00"
    return bytes(data)


def sweep_mutations(seed: int, per_schema: int) -> int:
    """Mutated bodies of every served version: whatever the validator accepts, kio reads
    without dying and without a null where the schema forbids one. Returns 0 on success."""
    from moldau.protocol.messages import RequestHeader, decode_request

    rng = random.Random(seed)
    accepted = refused_count = 0
    for api, version in SERVED:
        plan = request_plan(api, version)
        assert plan is not None
        header_ = RequestHeader(api, version, 1, "t")
        seeds = [encode(plan, Choices())]
        for _ in range(per_schema):
            body = mutate(rng, rng.choice(seeds))
            try:
                value = decode_request(header_, body, 0)
            except InvalidRequest:
                refused_count += 1
                continue
            accepted += 1
            bad = forbidden_nulls(value)
            if bad:
                print(f"api {api} v{version} body {body.hex()}: null {bad}")
                return 1
    print(f"accepted {accepted} refused {refused_count}")
    return 0


def test_mutated_bodies_never_crash_kio_nor_reach_it_with_forbidden_nulls() -> None:
    script = (
        "import sys\n"
        "from tests.unit.protocol.test_request_validator import sweep_mutations\n"
        f"sys.exit(sweep_mutations({random.randrange(1 << 30)}, 300))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, script + proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "accepted" in proc.stdout
