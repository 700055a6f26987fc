"""Responses are checked before kio decodes them, so a hostile or broken broker (or proxy)
cannot abort a client through kio's allocation of a huge compact array."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    from moldau.protocol.errors import InvalidRequest
    from moldau.protocol.messages import decode_response
    # Metadata v12 response: correlation id, header tags, throttle time, then a brokers
    # array claiming 2**32 - 2 entries.
    head = b"\\x00\\x00\\x00\\x07" + b"\\x00" + b"\\x00\\x00\\x00\\x00"
    frame = head + b"\\xff\\xff\\xff\\xff\\x0f"
    try:
        decode_response(3, 12, frame)
    except InvalidRequest as exc:
        print("refused:", exc)
    # A non-nullable array sent as null (compact length 0).
    frame = head + b"\\x00"
    try:
        decode_response(3, 12, frame)
    except InvalidRequest as exc:
        print("refused:", exc)
""")


def test_hostile_metadata_responses_are_refused_not_fatal() -> None:
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == 2 and all(line.startswith("refused:") for line in lines), proc.stdout
