"""Replay a saved live-fuzzer finding against a fresh broker:
``.venv/bin/python -m tests.faults.fuzz.live --replay FILE``."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

from tests.integration.broker_wire import Wire, create_topic

from .corpus import PLAYGROUND_TOPICS
from .support import SIZE, BrokerLog


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
            sock.sendall(data)
            got = b""
            try:
                while True:
                    chunk = sock.recv(1 << 20)
                    if not chunk:
                        print("  the broker closed the connection")
                        break
                    got += chunk
                    if len(got) >= 4 and len(got) >= 4 + SIZE.unpack_from(got)[0]:
                        print(f"  answered: {got[:80].hex()}")
                        break
            except TimeoutError:
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


