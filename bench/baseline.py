"""Raw loopback socket baseline, pinned like the brokers: the ceiling any broker shares.

A server process on the broker CPU; the client on the client CPU. Measures one-stream
throughput (sendall of 1 MiB chunks -> recv_into) and request/response round trips of 1 KiB
(p50/p99/p99.9).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from typing import Any

from moldau.perf.latency import LatencyHistogram
from moldau.testing.peers import free_port


def serve(port: int, mode: str) -> None:
    """Server side (runs in its own pinned process)."""
    with socket.create_server(("127.0.0.1", port)) as srv:
        print("ready", flush=True)
        conn, _ = srv.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = bytearray(1 << 20)
        view = memoryview(buf)
        if mode == "stream":
            total = 0
            while n := conn.recv_into(view):
                total += n
            return
        while True:  # echo fixed 1 KiB messages
            got = 0
            while got < 1024:
                n = conn.recv_into(view[got:1024])
                if not n:
                    return
                got += n
            conn.sendall(view[:1024])


def _start(mode: str, cpus: str | None) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    cmd = ([*(["taskset", "-c", cpus] if cpus else []), sys.executable, "-m", "bench.baseline",
            str(port), mode])
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != b"ready":
        raise RuntimeError("baseline server did not start")
    return proc, port


def _connect(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def stream(cpus: str | None, seconds: float = 3.0) -> dict[str, Any]:
    proc, port = _start("stream", cpus)
    try:
        chunk = memoryview(bytes(1 << 20))
        sent = 0
        with _connect(port) as s:
            t0 = time.monotonic()
            while time.monotonic() - t0 < seconds:
                for _ in range(16):
                    s.sendall(chunk)
                sent += 16 << 20
            elapsed = time.monotonic() - t0
    finally:
        proc.wait(10)
    return {"mb_per_s": round(sent / elapsed / 2**20, 1)}


def ping_pong(cpus: str | None, rounds: int = 20_000) -> dict[str, Any]:
    proc, port = _start("echo", cpus)
    hist = LatencyHistogram()
    try:
        msg = bytes(1024)
        buf = bytearray(1024)
        view = memoryview(buf)
        with _connect(port) as s:
            for i in range(rounds + 1000):
                t0 = time.perf_counter_ns()
                s.sendall(msg)
                got = 0
                while got < 1024:
                    got += s.recv_into(view[got:])
                if i >= 1000:
                    hist.record((time.perf_counter_ns() - t0) // 1000)
    finally:
        proc.wait(10)
    return {"round_trips": rounds, "rtt_ms": {
        "p50": round(hist.percentile_ms(50), 3), "p99": round(hist.percentile_ms(99), 3),
        "p99.9": round(hist.percentile_ms(99.9), 3), "max": round(hist.max_ms, 3)},
        "round_trips_per_s": round(rounds / (hist.total_us / 1e6), 1)}


def measure(cpus: str | None) -> dict[str, Any]:
    return {"stream": stream(cpus), "ping_pong_1k": ping_pong(cpus)}


if __name__ == "__main__":
    serve(int(sys.argv[1]), sys.argv[2])
