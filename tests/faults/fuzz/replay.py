"""Replay a saved live-fuzzer finding against a fresh broker:
``.venv/bin/python -m tests.faults.fuzz.live --replay FILE``."""

from __future__ import annotations

import json
import socket
import struct
import time
from pathlib import Path

from tests.integration.broker_wire import Wire, create_topic

from .corpus import PLAYGROUND_TOPICS
from .support import SIZE, BrokerLog

SENTINEL_CID = 0x7FFFFFF0
_SENTINEL_BODY = struct.pack(">hhih", 18, 0, SENTINEL_CID, 11) + b"fuzz-replay"  # ApiVersions v0
SENTINEL = SIZE.pack(len(_SENTINEL_BODY)) + _SENTINEL_BODY


def _outcome(sock: socket.socket, sentinel: bool) -> bool:
    """Print what the broker did with the input just sent; False if it neither answered
    nor closed the connection in time."""
    got = b""
    try:
        while True:
            chunk = sock.recv(1 << 20)
            if not chunk:
                print("  the broker closed the connection")
                return True
            got += chunk
            if len(got) >= 8 and len(got) >= 4 + SIZE.unpack_from(got)[0]:
                if sentinel and SIZE.unpack_from(got, 4)[0] == SENTINEL_CID:
                    print("  no answer (as for an acks=0 produce): the next request was "
                          "answered")
                else:
                    print(f"  answered: {got[:80].hex()}")
                return True
    except TimeoutError:
        return False
    except OSError:  # reset: the broker closed it with bytes of ours still unread
        print("  the broker closed the connection (reset)")
        return True


def replay(path: Path, timeout: float = 30.0) -> bool:
    """Send a saved finding's inputs to a fresh broker, one connection each, and report
    what happens. True when the broker answered or closed every one and logged nothing."""
    from .live import Fuzzer, Settings

    doc = json.loads(path.read_text())
    fuzzer = Fuzzer(Settings(seed=doc["seed"], restart=False))
    broker = fuzzer.start_broker()
    ok = True
    try:
        with Wire(broker.port()) as wire:
            for name, (partitions, configs) in PLAYGROUND_TOPICS.items():
                create_topic(wire, name, partitions, configs)
        blog = BrokerLog(broker.log_path)
        for frame in doc["frames"]:
            data = bytes.fromhex(frame["hex"])
            print(f"input {frame['input']}: {len(data)} bytes: {data[:64].hex()}...")
            sock = socket.create_connection(("127.0.0.1", broker.port()), timeout=timeout)
            honest = len(data) >= 4 and SIZE.unpack_from(data)[0] == len(data) - 4
            # An ApiVersions after it: its answer alone means the input was handled without
            # one (an acks=0 produce), not that the broker hangs.
            try:
                sock.sendall(data + (SENTINEL if honest else b""))
            except OSError:
                pass  # closed while we sent: _outcome sees it
            if not _outcome(sock, honest):
                print(f"  NO ANSWER and no close within {timeout} s")
                ok = False
            sock.close()
            time.sleep(0.3)
            for block in blog.new_tracebacks():
                print("  broker traceback:\n" + block)
                ok = False
        rss = fuzzer.rss_kb()
        print(f"broker RSS after replay: {rss // 1024} MiB")
    finally:
        fuzzer.close()
    print("REPRODUCED" if not ok else "not reproduced (answered or closed, no traceback)")
    return ok


