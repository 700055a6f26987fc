"""Hostile load for tests/integration/test_resource_limits.py, run as its own process so that
the process measuring a normal client's latency stays quiet.

    python resource_load.py PORT IDLE SLOW ANNOUNCE BURST_PER_S

opens IDLE connections that send nothing, ANNOUNCE connections that send the size prefix of a
100 MiB frame (and a few header bytes) and then nothing, and SLOW connections that send a
Metadata request one byte at a time, every TICK seconds each, over and over. It prints
``ready`` when all are open, and then waits, all of them silent. After the line ``load`` on
stdin the slow connections send, and BURST_PER_S requests per second with made-up api keys and
version 32767 are sent, each on a new connection; after ``calm`` all are silent again (and
stay open); on ``quit`` (or end of input) it closes everything and exits.
"""

from __future__ import annotations

import socket
import struct
import sys
import threading
import time

TICK = 0.1
MiB = 1024 * 1024


def metadata_request(correlation_id: int) -> bytes:
    # Metadata v1, all topics: api key 3, version 1, client id "slow", topics null.
    payload = struct.pack(">hhih", 3, 1, correlation_id, 4) + b"slow" + struct.pack(">i", -1)
    return struct.pack(">i", len(payload)) + payload


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=30)


def main() -> None:
    port, idle, slow, announce, burst_per_s = (int(a) for a in sys.argv[1:6])
    idle_socks = [connect(port) for _ in range(idle)]
    announcers = []
    for i in range(announce):
        sock = connect(port)
        sock.sendall(struct.pack(">i", 100 * MiB) + struct.pack(">hhi", 0, 9, i))
        announcers.append(sock)
    slow_socks = [connect(port) for _ in range(slow)]
    pending = [metadata_request(i) for i in range(slow)]
    positions = [0] * slow
    active = threading.Event()
    done = threading.Event()

    def commands() -> None:
        for line in sys.stdin:
            command = line.strip()
            if command == "load":
                active.set()
            elif command == "calm":
                active.clear()
            elif command == "quit":
                break
        done.set()

    threading.Thread(target=commands, daemon=True).start()
    print("ready", flush=True)
    # One event at a time, evenly spread, as independent clients would be: each slow
    # connection sends a byte every TICK, and a made-up request goes every 1/BURST_PER_S s.
    slow_every = TICK / max(slow, 1)
    burst_every = 1 / burst_per_s if burst_per_s else float("inf")
    burst_key = 1000
    slow_index = 0
    while not done.is_set():
        if not active.wait(TICK):
            continue
        now = time.monotonic()
        next_slow, next_burst = now, now + burst_every
        while active.is_set() and not done.is_set():
            now = time.monotonic()
            if slow and now >= next_slow:
                i = slow_index
                slow_socks[i].send(pending[i][positions[i] : positions[i] + 1])
                positions[i] = (positions[i] + 1) % len(pending[i])
                slow_index = (i + 1) % slow
                next_slow += slow_every
            if now >= next_burst:
                with connect(port) as sock:
                    sock.sendall(struct.pack(">ihhih", 10, burst_key, 32767, burst_key, -1))
                burst_key = 1000 + (burst_key - 999) % 20000
                next_burst += burst_every
            time.sleep(max(0.0, min(next_slow if slow else next_burst, next_burst)
                           - time.monotonic()))
    for sock in idle_socks + announcers + slow_socks:
        sock.close()


if __name__ == "__main__":
    main()
