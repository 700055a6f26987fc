"""Schema lookups: bounded caches, unknown keys cost nothing, real errors are not hidden.

Issue 11 defects 2 and 15: a 14-byte request header with an unknown api key and version 32767
filled ``functools.cache``s with 32,767 entries (about 5 MB, never freed), and any exception
in a schema lookup, including a broken installation, was cached as "no such API".
"""

from __future__ import annotations

import random
import struct
import subprocess
import sys
import textwrap
import tracemalloc

from moldau.protocol.errors import InvalidRequest
from moldau.protocol.messages import decode_request_header, is_flexible, request_schema
from moldau.protocol.request_plan import request_plan
from moldau.protocol.request_validator import validate_request_body


def _header(api_key: int, version: int) -> bytes:
    return struct.pack(">hhih", api_key, version, 7, -1) + b"\x00"


def _probe(api_key: int, version: int) -> None:
    """Everything a broker or client may ask about a header it received."""
    try:
        decode_request_header(_header(api_key, version))
    except InvalidRequest:
        pass
    is_flexible(api_key, version)
    request_schema(api_key, version)
    request_plan(api_key, version)
    try:
        validate_request_body(api_key, version, b"", 0)
    except InvalidRequest:
        pass


def test_unknown_api_keys_and_versions_leave_nothing_behind() -> None:
    _probe(18, 4)  # warm what is legitimately cached
    rnd = random.Random(11)
    pairs = [(1000 + i, 32767) for i in range(150)]
    pairs += [(rnd.randint(-32768, 32767), rnd.randint(-32768, 32767)) for _ in range(1000)]
    pairs += [(18, 32767), (3, 32767), (0, -1)]  # known APIs at unknown versions
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        for api_key, version in pairs:
            _probe(api_key, version)
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    # Before the fix: about 5 MB per unknown (key, 32767) pair.
    assert grown < 256 * 1024, f"{grown} bytes retained by {len(pairs)} made-up headers"


def test_flexibility_of_unknown_versions() -> None:
    # KIP-511: an ApiVersions request newer than we know has a flexible (v2) header.
    assert is_flexible(18, 32767)
    assert is_flexible(18, 3) and not is_flexible(18, 2)
    assert not is_flexible(18, -1)
    assert not is_flexible(1000, 32767)  # unknown api key
    header, offset = decode_request_header(_header(18, 32767))
    assert (header.api_key, header.api_version, offset) == (18, 32767, 11)


def test_a_broken_install_raises_with_its_cause_and_is_not_cached() -> None:
    # In a fresh interpreter, so no schema is cached yet.
    script = textwrap.dedent("""
        import kio.index
        from moldau.protocol.messages import request_schema, response_schema
        from moldau.protocol.request_plan import request_plan

        real = kio.index.resolve_name

        def broken(path):
            raise ImportError(f"simulated broken installation: cannot import {path}")

        kio.index.resolve_name = broken
        for lookup in (lambda: request_schema(3, 12), lambda: response_schema(3, 12),
                       lambda: request_plan(1, 12)):
            try:
                result = lookup()
            except ImportError as exc:
                assert "simulated broken installation" in str(exc), exc
            else:
                raise SystemExit(f"a broken install was answered with {result!r}")
        kio.index.resolve_name = real
        assert request_schema(3, 12).__name__ == "MetadataRequest"
        assert request_plan(1, 12) is not None
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr
